package mcptask_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/pgtest"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store/postgres"
	"github.com/mcptask/mcptask/wire/events"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const benchSecret = "whsec_YmVuY2htYXJrLXNlY3JldC1ieXRlcy0wMTIzNDU2"

// benchSink is a webhook endpoint that answers at once and notes when
// each event arrived (the body's timestamp is when it happened).
type benchSink struct {
	srv  *httptest.Server
	mu   sync.Mutex
	n    int
	lat  []time.Duration // completion events only
	seen chan struct{}
}

func newBenchSink(b *testing.B) *benchSink {
	s := &benchSink{seen: make(chan struct{}, 1<<16)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		body, _ := io.ReadAll(r.Body)
		var ctl events.ControlEnvelope
		if json.Unmarshal(body, &ctl) == nil && ctl.Type == "verification" {
			_ = json.NewEncoder(w).Encode(map[string]string{"challenge": ctl.Challenge})
			return
		}
		var occ events.Occurrence
		_ = json.Unmarshal(body, &occ)
		var d events.StatusData
		_ = json.Unmarshal(occ.Data, &d)
		at, _ := time.Parse(time.RFC3339Nano, occ.Timestamp)
		s.mu.Lock()
		s.n++
		if d.Status == "completed" {
			s.lat = append(s.lat, now.Sub(at))
		}
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		s.seen <- struct{}{}
	}))
	b.Cleanup(s.srv.Close)
	return s
}

func quickTool(ts *mcptask.Server) (func(), error) {
	mcptask.AddTool(ts, &mcp.Tool{Name: "quick"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	}, mcptask.ToolOptions{Support: mcptask.Optional})
	return nil, nil
}

func eventsBenchServer(b *testing.B, st *postgres.Store, ev mcptask.Events) *servertest.Server {
	o := servertest.Options{Tasks: mcptask.Options{Owner: userOwner, Events: ev}, Register: quickTool}
	if st != nil {
		o.Store = st
	}
	return servertest.Start(b, o)
}

func subscribe(b *testing.B, c *wiretest.Client, url string, args map[string]any) {
	b.Helper()
	if err := c.Result(b.Context(), events.MethodSubscribe, map[string]any{"name": events.TypeStatus, "arguments": args,
		"delivery": map[string]any{"url": url, "secret": benchSecret}}, nil); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWebhookLatency measures the time from a task's status change
// (its completion, as the store recorded it) to its webhook delivery's
// arrival at the endpoint: on SQLite (the instance running the task
// delivers) and on PostgreSQL, delivered by another instance than the
// one running the task (woken by the change feed). Each task is created
// after the previous delivery arrived. It reports p50-ms and p99-ms.
func BenchmarkWebhookLatency(b *testing.B) {
	// One subscription gets a delivery every millisecond or so here:
	// above the default 50 per second, whose pacing would be measured.
	ev := mcptask.Events{Webhooks: true, AllowPrivateCallbacks: true, Rate: 5000}
	b.Run("sqlite", func(b *testing.B) {
		s := eventsBenchServer(b, nil, ev)
		benchLatency(b, s.URL, s.URL)
	})
	b.Run("postgres/other-instance", func(b *testing.B) {
		dsn := pgtest.DSN(b)
		schema := pgtest.Schema(b, dsn, "events_bench_")
		var urls []string
		for i := range 2 {
			st, err := postgres.Open(b.Context(), dsn, &postgres.Options{Schema: schema})
			if err != nil {
				b.Fatal(err)
			}
			e := ev
			if i == 0 {
				e.Workers = -1 // the instance running the tasks delivers nothing
			}
			urls = append(urls, eventsBenchServer(b, st, e).URL)
		}
		benchLatency(b, urls[0], urls[1])
	})
}

func benchLatency(b *testing.B, runURL, subURL string) {
	sink := newBenchSink(b)
	c := &wiretest.Client{URL: subURL, Tasks: true, Header: http.Header{"X-User": {"bench"}}}
	subscribe(b, c, sink.srv.URL, map[string]any{"tool": "quick"})
	runner := &wiretest.Client{URL: runURL, Tasks: true, Header: http.Header{"X-User": {"bench"}}}
	ctx := b.Context()
	b.ResetTimer()
	for i := range b.N {
		if _, err := runner.CallTool(ctx, "quick", nil); err != nil {
			b.Fatal(err)
		}
		for { // until its completion's delivery arrived
			<-sink.seen
			sink.mu.Lock()
			done := len(sink.lat) > i
			sink.mu.Unlock()
			if done {
				break
			}
		}
	}
	b.StopTimer()
	sink.mu.Lock()
	lat := slices.Clone(sink.lat)
	sink.mu.Unlock()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
	}
}

// BenchmarkWebhookFanout measures the deliveries per second of one
// instance (SQLite, 16 workers) to one endpoint when 1,000 subscriptions
// of one requester follow every task status: each task's two status
// changes make up to 2,000 deliveries. It reports deliveries/s.
func BenchmarkWebhookFanout(b *testing.B) {
	const subs = 1000
	s := eventsBenchServer(b, nil, mcptask.Events{Webhooks: true, AllowPrivateCallbacks: true, MaxSubscriptions: subs, Rate: 1000})
	sink := newBenchSink(b)
	c := &wiretest.Client{URL: s.URL, Tasks: true, Header: http.Header{"X-User": {"fan"}}}
	for i := range subs {
		subscribe(b, c, fmt.Sprintf("%s/hook/%d", sink.srv.URL, i), nil)
	}
	ctx := b.Context()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := c.CallTool(ctx, "quick", nil); err != nil {
			b.Fatal(err)
		}
	}
	// A task that ends at once has one status event (created completed),
	// else two: every delivery of each is waited for.
	want := func() int {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return subs * b.N
	}
	for range want() {
		<-sink.seen
	}
	for {
		sink.mu.Lock()
		done := len(sink.lat) >= subs*b.N
		n := sink.n
		sink.mu.Unlock()
		if done {
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "deliveries/s")
			return
		}
		<-sink.seen
	}
}

// BenchmarkEventStreamMemory measures the heap and goroutines one open
// events/stream (Streamable HTTP, idle) holds on the server: 200 streams
// of 200 requesters are opened, the heap measured before and after. It
// reports heap-B/stream and goroutines/stream.
func BenchmarkEventStreamMemory(b *testing.B) {
	const n = 200
	for range b.N {
		b.StopTimer()
		s := eventsBenchServer(b, nil, mcptask.Events{})
		before := heapNow()
		g0 := runtime.NumGoroutine()
		b.StartTimer()
		var bodies []io.Closer
		hc := &http.Client{Transport: &http.Transport{}}
		for i := range n {
			c := &wiretest.Client{Tasks: true, Events: true}
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": events.MethodStream,
				"params": map[string]any{"name": events.TypeStatus, "cursor": nil, "_meta": c.Meta()}})
			req, _ := http.NewRequestWithContext(b.Context(), http.MethodPost, s.URL, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			req.Header.Set("X-User", fmt.Sprintf("u%d", i))
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			// The stream is open once its first notification arrived.
			br := bufio.NewReaderSize(resp.Body, 512)
			line, err := br.ReadString('\n')
			for err == nil && !strings.Contains(line, events.NotifyActive) {
				line, err = br.ReadString('\n')
			}
			if err != nil {
				b.Fatalf("stream %d: %v", i, err)
			}
			bodies = append(bodies, resp.Body)
		}
		b.StopTimer()
		after := heapNow()
		g1 := runtime.NumGoroutine()
		// The client's side of each stream is in this process too (its
		// connection's buffers and goroutines, nothing more): counted
		// with the server's.
		b.ReportMetric(float64(after-before)/n, "heap-B/stream")
		b.ReportMetric(float64(g1-g0)/n, "goroutines/stream")
		for _, body := range bodies {
			body.Close()
		}
		s.Close(context.Background())
	}
}

func heapNow() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
