package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/bench/internal/loadgen"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/postgres"
	"github.com/mcptask/mcptask/task"
)

// The cancel mode runs two in-process instances ("nodes") on one
// PostgreSQL schema, each with its own pool, engine, MCP server and
// loopback HTTP server, like two mcptaskd processes. Their tools record
// when the work observes what a client did through the other node.

// probe is what a tool records about one task's work.
type probe struct {
	started  chan struct{}  // closed when the work starts
	observed chan time.Time // when the work saw its context done, or its answer
}

// probes maps task IDs to probes; either side may create a probe first.
type probes struct{ m sync.Map }

func (p *probes) get(id string) *probe {
	v, _ := p.m.LoadOrStore(id, &probe{started: make(chan struct{}), observed: make(chan time.Time, 1)})
	return v.(*probe)
}

// Tools of the nodes.
const (
	blockTool = "block" // waits until its context is done
	askTool   = "ask"   // asks the client for a confirmation, then ends
)

// inputPollInterval is how often work waiting for input re-reads its task
// without the change feed (engine.Options.InputPollInterval's default).
const inputPollInterval = 2 * time.Second

// node is one in-process instance.
type node struct {
	name   string
	store  *postgres.Store
	eng    *engine.Engine
	hs     *http.Server
	client *wiretest.Client
}

// feedless hides the store's change feed: the engine then learns of
// other instances' changes by polling only (heartbeats for cancellation,
// Options.InputPollInterval for input).
type feedless struct{ store.Store }

// startNode starts a node on schema; feed false hides the change feed.
func startNode(ctx context.Context, dsn, schema, name string, lease time.Duration, feed bool, pr *probes) (*node, error) {
	quiet := slog.New(slog.DiscardHandler)
	pg, err := postgres.Open(ctx, dsn, &postgres.Options{Schema: schema, Logger: quiet})
	if err != nil {
		return nil, err
	}
	var st store.Store = pg
	if !feed {
		st = feedless{pg}
	}
	eng, err := engine.New(engine.Options{
		Store:             st,
		Logger:            quiet,
		Lease:             lease,
		InstanceID:        name,
		Policy:            task.Policy{DefaultTTL: time.Hour, MaxTTL: time.Hour},
		InputPollInterval: inputPollInterval,
	})
	if err != nil {
		pg.Close()
		return nil, err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcptask-fleet", Version: "1"}, &mcp.ServerOptions{Logger: quiet})
	ts, err := mcptask.New(srv, eng, &mcptask.Options{Logger: quiet})
	if err != nil {
		pg.Close()
		return nil, err
	}
	mcptask.AddTool(ts, &mcp.Tool{Name: blockTool, Description: "waits until cancelled"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			p := pr.get(mcptask.FromContext(ctx).ID())
			close(p.started)
			<-ctx.Done()
			p.observed <- time.Now()
			return nil, nil, ctx.Err()
		}, mcptask.ToolOptions{Support: mcptask.Required})
	mcptask.AddTool(ts, &mcp.Tool{Name: askTool, Description: "asks for a confirmation"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			t := mcptask.FromContext(ctx)
			p := pr.get(t.ID())
			close(p.started)
			_, err := t.Elicit(ctx, &mcp.ElicitParams{Message: "Go on?", RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}})
			p.observed <- time.Now()
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Required})
	if err := eng.Run(ctx); err != nil {
		pg.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		eng.Shutdown(ctx)
		pg.Close()
		return nil, err
	}
	n := &node{name: name, store: pg, eng: eng,
		hs: &http.Server{Handler: ts.Handler(&mcp.StreamableHTTPOptions{Logger: quiet}), ReadHeaderTimeout: 10 * time.Second}}
	n.client = &wiretest.Client{URL: fmt.Sprintf("http://%s/mcp", ln.Addr()), Tasks: true,
		HTTP: &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}}
	go n.hs.Serve(ln)
	return n, nil
}

func (n *node) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Join(n.hs.Shutdown(ctx), n.eng.Shutdown(ctx), n.store.Close())
}

// latencyResult is the figures of one kind of cross-instance delivery.
type latencyResult struct {
	Name  string        `json:"name"`
	What  string        `json:"what"`
	Feed  bool          `json:"changeFeed"`
	Lease time.Duration `json:"leaseNs"`
	// Stats are the latencies from sending the request to the work
	// observing it; Ack those of the request's HTTP round trip.
	Stats loadgen.Stats `json:"stats"`
	Ack   loadgen.Stats `json:"ack"`
}

// runCancel measures how long cancellation and input take to reach work
// running on another instance, with and without the change feed.
func runCancel(ctx context.Context, cfg config, stderr io.Writer) (_ []latencyResult, err error) {
	var out []latencyResult
	for _, feed := range []bool{true, false} {
		if !feed && cfg.fallbackSamples <= 0 {
			continue
		}
		schema := newSchemaName()
		res, err := measurePair(ctx, cfg, schema, feed, stderr)
		err = errors.Join(err, loadgen.DropSchema(cfg.dsn, schema))
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
	}
	return out, nil
}

func measurePair(ctx context.Context, cfg config, schema string, feed bool, stderr io.Writer) (_ []latencyResult, err error) {
	pr := &probes{}
	a, err := startNode(ctx, cfg.dsn, schema, "node-A", cfg.cancelLease, feed, pr)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, a.close()) }()
	b, err := startNode(ctx, cfg.dsn, schema, "node-B", cfg.cancelLease, feed, pr)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, b.close()) }()

	n := cfg.cancels
	suffix := "with LISTEN/NOTIFY"
	if !feed {
		n = cfg.fallbackSamples
		suffix = "polling only"
	}
	kinds := []struct {
		name, what string
		via        *node
		tool       string
	}{
		{"cancel, same instance", "tasks/cancel to A → A's work sees ctx done", a, blockTool},
		{"cancel, cross-instance", "tasks/cancel to B → A's work sees ctx done", b, blockTool},
		{"input, cross-instance", "tasks/update to B → A's Elicit returns", b, askTool},
	}
	var out []latencyResult
	for _, k := range kinds {
		if !feed && k.via == a {
			continue // the same instance does not use the feed
		}
		var lat, ack [][]time.Duration
		// Without the feed, the delivery waits for the next poll of A: a
		// random pause before each request samples every phase of A's
		// polling (a loop of samples would otherwise lock onto it).
		var phase time.Duration
		if !feed {
			phase = cfg.cancelLease / 3
			if k.tool == askTool {
				phase = inputPollInterval
			}
		}
		for i := range n {
			l, rt, err := deliverOnce(ctx, a, k.via, k.tool, pr, phase)
			if err != nil {
				return nil, fmt.Errorf("%s (%s), sample %d: %w", k.name, suffix, i+1, err)
			}
			lat = append(lat, []time.Duration{l})
			ack = append(ack, []time.Duration{rt})
		}
		r := latencyResult{Name: k.name + ", " + suffix, What: k.what, Feed: feed, Lease: cfg.cancelLease,
			Stats: loadgen.Merge(lat...), Ack: loadgen.Merge(ack...)}
		if cfg.verbose {
			fmt.Fprintf(stderr, "%-50s n=%d p50 %v p99 %v max %v\n", r.Name, r.Stats.Ops, r.Stats.P50, r.Stats.P99, r.Stats.Max)
		}
		out = append(out, r)
	}
	return out, nil
}

// deliverOnce creates a task of tool through a (where its work runs),
// waits until the work runs, then cancels it (blockTool) or answers its
// input request (askTool) through via, and returns the time from sending
// that request to the work observing it, and the request's round trip.
// Before sending that request it pauses for a random time in [0, phase).
func deliverOnce(ctx context.Context, a, via *node, tool string, pr *probes, phase time.Duration) (latency, roundTrip time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tk, err := a.client.CallTool(ctx, tool, map[string]any{})
	if err != nil {
		return 0, 0, err
	}
	if tk.TaskID == "" {
		return 0, 0, fmt.Errorf("no task handle: %+v", tk)
	}
	p := pr.get(tk.TaskID)
	select {
	case <-p.started:
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("the work of %s did not start", tk.TaskID)
	}
	var params map[string]any
	method := "tasks/cancel"
	switch tool {
	case blockTool:
		params = map[string]any{"taskId": tk.TaskID}
	case askTool:
		got, err := via.client.WaitFor(ctx, tk.TaskID, func(t *wiretest.Task) bool { return t.Status == "input_required" })
		if err != nil {
			return 0, 0, err
		}
		var key string
		for k := range got.InputRequests {
			key = k
		}
		method = "tasks/update"
		params = map[string]any{"taskId": tk.TaskID, "inputResponses": map[string]any{
			key: map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}}
	}
	if phase > 0 {
		time.Sleep(rand.N(phase))
	}
	sent := time.Now()
	if err := via.client.Result(ctx, method, params, nil); err != nil {
		return 0, 0, err
	}
	roundTrip = time.Since(sent)
	select {
	case at := <-p.observed:
		return at.Sub(sent), roundTrip, nil
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("the work of %s never observed %s", tk.TaskID, method)
	}
}
