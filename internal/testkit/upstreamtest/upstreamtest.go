// Package upstreamtest serves, for tests, an upstream MCP server that
// speaks tasks itself: an mcptask server on its own SQLite file, on
// loopback HTTP, in the test's process. A gateway (in-process, or an
// mcptaskd process the test started) re-exports its tools; the test sees
// what the upstream saw (how often its tool ran) and decides when the work
// ends, whatever happened to the gateway meanwhile.
package upstreamtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TaskServer is the upstream. Its tools:
//
//   - "work" {label}: counts its run (Runs), sets its task's status message
//     to "upstream working on LABEL", waits until Release, and answers
//     "LABEL done, run N" (N: the count at its start);
//   - "ask" {question} (task required): elicits an answer and returns
//     "ACTION: ANSWER";
//   - "deploy" {label}: counts its run (Deploys), waits until Release and
//     answers "LABEL deployed";
//     its cancel is refused ("a deploy cannot be stopped once started");
//   - "block": waits until cancelled; a cancel of its task closes the
//     channel Cancelled returns.
type TaskServer struct {
	// URL is the server's root URL (it serves MCP on every path).
	URL string
	// Runs counts the starts of the "work" tool, Deploys those of
	// "deploy", across Restarts.
	Runs, Deploys atomic.Int64
	// Cut, if set, picks POST bodies the upstream handles (a create
	// creates its task) and then answers by cutting the connection: the
	// upstream died with the answer on its way.
	Cut atomic.Pointer[func(body []byte) bool]

	handler atomic.Pointer[http.Handler]
	release chan struct{}
	once    sync.Once

	mu           sync.Mutex
	cancelled    chan struct{}
	traceparents map[string][]string // method → the traceparent of each request's _meta
}

// note records the traceparent in the _meta of the JSON-RPC request body.
func (u *TaskServer) note(body []byte) {
	var req struct {
		Method string `json:"method"`
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &req) != nil || req.Method == "" {
		return
	}
	tp, _ := req.Params.Meta["traceparent"].(string)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.traceparents == nil {
		u.traceparents = map[string][]string{}
	}
	u.traceparents[req.Method] = append(u.traceparents[req.Method], tp)
}

// Traceparents returns the traceparent of the _meta of each request of
// method the upstream received, in order ("" for a request without one).
func (u *TaskServer) Traceparents(method string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.traceparents[method]...)
}

// askArgs are the arguments of the "ask" tool.
type askArgs struct {
	Question string `json:"question"`
}

type workArgs struct {
	Label string `json:"label"`
}

// New starts the upstream on loopback; the test's end releases its work
// and stops it.
func New(t testing.TB) *TaskServer {
	t.Helper()
	u := &TaskServer{release: make(chan struct{}), cancelled: make(chan struct{})}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			u.note(body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if cut := u.Cut.Load(); cut != nil && (*cut)(body) {
				(*u.handler.Load()).ServeHTTP(httptest.NewRecorder(), r)
				if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
					conn.Close()
				}
				return
			}
		}
		(*u.handler.Load()).ServeHTTP(w, r)
	}))
	u.URL = hs.URL
	u.Restart(t)
	t.Cleanup(func() {
		u.Release()
		hs.CloseClientConnections()
		hs.Close()
	})
	return u
}

// Release lets every "work" call, running or to come, finish.
func (u *TaskServer) Release() { u.once.Do(func() { close(u.release) }) }

// Cancelled is closed when a cancel of a "block" task reached its work;
// ResetCancelled replaces it by a new one.
func (u *TaskServer) Cancelled() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cancelled
}

// ResetCancelled replaces the channel Cancelled returns.
func (u *TaskServer) ResetCancelled() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.cancelled = make(chan struct{})
}

// Restart replaces the upstream by a new one on a new, empty task store:
// it forgets every task of the old one.
func (u *TaskServer) Restart(t testing.TB) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "upstream.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	eng, err := engine.New(engine.Options{Store: st, Logger: log, Exclusive: true, SweepInterval: -1,
		Policy: task.Policy{PollInterval: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "task-upstream", Version: "1"}, &mcp.ServerOptions{Logger: log})
	ts, err := mcptask.New(srv, eng, &mcptask.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	mcptask.AddTool(ts, &mcp.Tool{Name: "work", Description: "runs until released"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in workArgs) (*mcp.CallToolResult, any, error) {
			n := u.Runs.Add(1)
			if tk := mcptask.FromContext(ctx); tk != nil {
				_ = tk.SetStatusMessage(ctx, "upstream working on "+in.Label)
			}
			select {
			case <-u.release:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Label + " done, run " + strconv.FormatInt(n, 10)}}}, nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Optional})
	mcptask.AddTool(ts, &mcp.Tool{Name: "ask", Description: "asks the user"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in askArgs) (*mcp.CallToolResult, any, error) {
			tk := mcptask.FromContext(ctx)
			if tk == nil {
				return nil, nil, errors.New("ask runs as a task only")
			}
			tk.Log("asking: " + in.Question)
			res, err := tk.Elicit(ctx, &mcp.ElicitParams{Message: in.Question, RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}})
			if err != nil {
				return nil, nil, err
			}
			tk.LogStream("stderr", "answered: "+res.Action)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action + ": " + res.Content["answer"].(string)}}}, nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Required})
	mcptask.AddTool(ts, &mcp.Tool{Name: "block", Description: "waits until cancelled"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			<-ctx.Done()
			if tk := mcptask.FromContext(ctx); tk != nil && tk.Cancelled() {
				u.mu.Lock()
				close(u.cancelled)
				u.mu.Unlock()
			}
			return nil, nil, ctx.Err()
		}, mcptask.ToolOptions{Support: mcptask.Optional})
	mcptask.AddTool(ts, &mcp.Tool{Name: "deploy", Description: "runs until released; refuses to be cancelled"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in workArgs) (*mcp.CallToolResult, any, error) {
			u.Deploys.Add(1)
			select {
			case <-u.release:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Label + " deployed"}}}, nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Optional, Cancel: func(context.Context, *task.Task) error {
			return errors.New("a deploy cannot be stopped once started")
		}})
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var h http.Handler = ts.Handler(nil)
	u.handler.Store(&h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = ts.Close(ctx)
		_ = st.Close()
	})
}
