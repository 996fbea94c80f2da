package mcptask_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testServer is mcptask on a real SQLite file behind real loopback HTTP.
type testServer struct {
	url     string
	eng     *engine.Engine
	ts      *mcptask.Server
	handler http.Handler
	close   func()
}

type sleepArgs struct {
	Millis int    `json:"millis,omitempty"`
	Label  string `json:"label,omitempty"`
}

// gates lets tests hold tool work until they release it.
type gates struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

func (g *gates) get(name string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = map[string]chan struct{}{}
	}
	c, ok := g.ch[name]
	if !ok {
		c = make(chan struct{})
		g.ch[name] = c
	}
	return c
}

func startServer(t testing.TB, dbPath string, g *gates) *testServer {
	t.Helper()
	return startServerWith(t, dbPath, func(ts *mcptask.Server) { registerTestTools(ts, g) })
}

func startServerWith(t testing.TB, dbPath string, register func(*mcptask.Server)) *testServer {
	t.Helper()
	return startServerOpts(t, dbPath, mcptask.Options{}, register)
}

// startServerOpts is startServerWith with the server's options (its
// Logger set here).
func startServerOpts(t testing.TB, dbPath string, opts mcptask.Options, register func(*mcptask.Server)) *testServer {
	t.Helper()
	st, err := sqlite.Open(dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.New(engine.Options{Store: st, Logger: logger, MaxResultBytes: 64 << 10, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ServerOptions{Logger: logger})
	opts.Logger = logger
	ts, err := mcptask.New(srv, eng, &opts)
	if err != nil {
		t.Fatal(err)
	}
	register(ts)
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(ts.Handler(&mcp.StreamableHTTPOptions{Stateless: true, Logger: logger}))
	closed := false
	s := &testServer{url: hs.URL, eng: eng, ts: ts, handler: hs.Config.Handler}
	s.close = func() {
		if closed {
			return
		}
		closed = true
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_ = ts.Close(ctx)
		_ = st.Close()
	}
	t.Cleanup(s.close)
	return s
}

func registerTestTools(ts *mcptask.Server, g *gates) {
	mcptask.AddTool(ts, &mcp.Tool{Name: "plain", Description: "sync only"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sleepArgs) (*mcp.CallToolResult, any, error) {
			return text("plain " + in.Label), nil, nil
		}, mcptask.ToolOptions{})
	work := func(ctx context.Context, _ *mcp.CallToolRequest, in sleepArgs) (*mcp.CallToolResult, any, error) {
		if tk := mcptask.FromContext(ctx); tk != nil {
			_ = tk.SetStatusMessage(ctx, "working on "+in.Label)
		}
		if in.Millis < 0 { // wait for the test to open the gate
			select {
			case <-g.get(in.Label):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
		return text("done " + in.Label), nil, nil
	}
	mcptask.AddTool(ts, &mcp.Tool{Name: "work", Description: "optional task"}, work, mcptask.ToolOptions{Support: mcptask.Optional})
	mcptask.AddTool(ts, &mcp.Tool{Name: "rerunnable", Description: "optional, safe to re-run"}, work, mcptask.ToolOptions{Support: mcptask.Optional, Rerunnable: true})
	mcptask.AddTool(ts, &mcp.Tool{Name: "only_task", Description: "required task"}, work, mcptask.ToolOptions{Support: mcptask.Required})
	mcptask.AddTool(ts, &mcp.Tool{Name: "tool_error", Description: "isError"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			r := text("bad input")
			r.IsError = true
			return r, nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Optional})
	mcptask.AddTool(ts, &mcp.Tool{Name: "rpc_error", Description: "JSON-RPC error"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, &jsonrpc.Error{Code: -32001, Message: "backend unavailable", Data: json.RawMessage(`{"retry":true}`)}
		}, mcptask.ToolOptions{Support: mcptask.Optional})
	mcptask.AddTool(ts, &mcp.Tool{Name: "panics", Description: "panics"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			panic("boom")
		}, mcptask.ToolOptions{Support: mcptask.Optional})
	mcptask.AddTool(ts, &mcp.Tool{Name: "huge", Description: "oversized result"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return text(strings.Repeat("x", 100<<10)), nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Optional})
	mcptask.AddTool(ts, &mcp.Tool{Name: "records_op", Description: "records a domain operation"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sleepArgs) (*mcp.CallToolResult, any, error) {
			op, err := mcptask.FromContext(ctx).RecordOperation(ctx, mcptask.Operation{Object: "service/api", Effect: "deploy " + in.Label})
			if err != nil {
				return nil, nil, err
			}
			if err := op.Submitted(ctx, "receipt-"+in.Label); err != nil {
				return nil, nil, err
			}
			if err := op.Confirmed(ctx, "applied"); err != nil {
				return nil, nil, err
			}
			return text("deployed " + in.Label), nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Optional})
	mcptask.AddTool(ts, &mcp.Tool{Name: "ask", Description: "asks twice"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			tk := mcptask.FromContext(ctx)
			schema := map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}
			var answers []string
			for i := range 2 {
				res, err := tk.Elicit(ctx, &mcp.ElicitParams{Message: fmt.Sprintf("question %d", i), RequestedSchema: schema})
				if err != nil {
					return nil, nil, err
				}
				answers = append(answers, fmt.Sprintf("%s:%v", res.Action, res.Content["ok"]))
			}
			return text(strings.Join(answers, ",")), nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Optional})
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func clients(s *testServer) (withTasks, without *wiretest.Client) {
	return &wiretest.Client{URL: s.url, Tasks: true}, &wiretest.Client{URL: s.url}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// resultText returns the text of a stored tool result as a task method
// inlined it: on the 2026-07-28 wire with resultType "complete" (that
// revision's CallToolResult requires it), on 2025-11-25 without.
func resultText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	return wireResultText(t, raw, "complete")
}

func wireResultText(t *testing.T, raw json.RawMessage, resultType string) string {
	t.Helper()
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError    bool           `json:"isError"`
		ResultType string         `json:"resultType"`
		Meta       map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s: not a CallToolResult with content (%v)", raw, err)
	}
	if r.ResultType != resultType {
		t.Errorf("inlined result carries resultType %q, want %q", r.ResultType, resultType)
	}
	if _, ok := r.Meta["io.modelcontextprotocol/related-task"]; ok {
		t.Errorf("inlined result carries related-task _meta")
	}
	return r.Content[0].Text
}

func TestTaskLifecycle(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), &gates{})
	c, _ := clients(s)
	ctx := ctxT(t)

	h, err := c.CallTool(ctx, "work", map[string]any{"millis": 0, "label": "a"})
	if err != nil {
		t.Fatal(err)
	}
	if h.ResultType != "task" || h.TaskID == "" || h.TTLMs == nil || *h.TTLMs <= 0 || h.PollIntervalMs <= 0 {
		t.Fatalf("handle = %+v", h)
	}
	if !strings.HasPrefix(h.CreatedAt, "20") || !strings.HasSuffix(h.CreatedAt, "Z") {
		t.Errorf("createdAt %q is not RFC 3339 UTC", h.CreatedAt)
	}
	got, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "completed" || got.ResultType != "complete" {
		t.Fatalf("task = %+v", got)
	}
	if txt := resultText(t, got.Result); txt != "done a" {
		t.Errorf("result text %q", txt)
	}
}

func TestOutcomes(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), &gates{})
	c, _ := clients(s)
	ctx := ctxT(t)
	for _, tc := range []struct {
		tool, status string
		code         int64
		check        func(*testing.T, *wiretest.Task)
	}{
		{tool: "tool_error", status: "completed", check: func(t *testing.T, tk *wiretest.Task) {
			var r struct{ IsError bool }
			_ = json.Unmarshal(tk.Result, &r)
			if !r.IsError {
				t.Errorf("isError lost: %s", tk.Result)
			}
		}},
		{tool: "rpc_error", status: "failed", code: -32001, check: func(t *testing.T, tk *wiretest.Task) {
			if string(tk.Error.Data) != `{"retry":true}` {
				t.Errorf("error data = %s", tk.Error.Data)
			}
		}},
		{tool: "panics", status: "failed", code: -32603},
		{tool: "huge", status: "failed", code: -32603, check: func(t *testing.T, tk *wiretest.Task) {
			if !strings.Contains(tk.Error.Message, "exceeds") {
				t.Errorf("oversized result message: %q", tk.Error.Message)
			}
		}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			h, err := c.CallTool(ctx, tc.tool, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tc.status {
				t.Fatalf("status %s, want %s (%+v)", got.Status, tc.status, got)
			}
			if tc.code != 0 {
				if got.Error == nil || got.Error.Code != tc.code || got.Result != nil {
					t.Fatalf("error = %+v result = %s, want code %d and no result", got.Error, got.Result, tc.code)
				}
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	g := &gates{}
	s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), g)
	c, _ := clients(s)
	ctx := ctxT(t)
	h, err := c.CallTool(ctx, "work", map[string]any{"millis": -1, "label": "forever"})
	if err != nil {
		t.Fatal(err)
	}
	var ack map[string]any
	if err := c.Result(ctx, "tasks/cancel", map[string]any{"taskId": h.TaskID}, &ack); err != nil {
		t.Fatal(err)
	}
	// Exactly {"resultType":"complete"}, with an optional _meta.
	for k := range ack {
		if k != "resultType" && k != "_meta" {
			t.Errorf("cancel ack has %q: %v", k, ack)
		}
	}
	if ack["resultType"] != "complete" {
		t.Errorf("cancel ack = %v, want resultType complete", ack)
	}
	got, err := c.Get(ctx, h.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "cancelled" {
		t.Fatalf("status after cancel = %s, want cancelled before the answer", got.Status)
	}
	// A second cancel, and a cancel of a terminal task, are acknowledged.
	if err := c.Result(ctx, "tasks/cancel", map[string]any{"taskId": h.TaskID}, &ack); err != nil {
		t.Fatalf("second cancel: %v", err)
	}
	if got, _ := c.Get(ctx, h.TaskID); got.Status != "cancelled" {
		t.Fatalf("status changed to %s", got.Status)
	}
}

func TestInputRequired(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), &gates{})
	c, _ := clients(s)
	ctx := ctxT(t)
	h, err := c.CallTool(ctx, "ask", nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for round := range 2 {
		tk, err := c.WaitFor(ctx, h.TaskID, func(tk *wiretest.Task) bool { return tk.Status == "input_required" && len(tk.InputRequests) == 1 })
		if err != nil {
			t.Fatal(err)
		}
		var key string
		for k, v := range tk.InputRequests {
			key = k
			var req struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(v, &req)
			if req.Method != "elicitation/create" {
				t.Errorf("input request %s", v)
			}
		}
		if seen[key] {
			t.Fatalf("key %q reused", key)
		}
		seen[key] = true
		// Unknown keys are ignored and acknowledged; the task stays parked.
		if err := c.Result(ctx, "tasks/update", map[string]any{"taskId": h.TaskID, "inputResponses": map[string]any{"nope": map[string]any{}}}, nil); err != nil {
			t.Fatal(err)
		}
		if tk, _ := c.Get(ctx, h.TaskID); tk.Status != "input_required" {
			t.Fatalf("unknown key changed the status to %s", tk.Status)
		}
		// Malformed answers, or ones outside the requested schema, are
		// refused naming the key; nothing is stored, the task still waits.
		for _, bad := range []any{
			"yes",
			map[string]any{"action": "maybe"},
			map[string]any{"action": "accept", "content": map[string]any{"ok": "yes"}},
		} {
			r, err := c.Call(ctx, "tasks/update", map[string]any{"taskId": h.TaskID, "inputResponses": map[string]any{key: bad}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, key) {
				t.Fatalf("answer %v: %+v %s, want -32602 naming %s", bad, r.Error, r.Result, key)
			}
			if tk, _ := c.Get(ctx, h.TaskID); tk.Status != "input_required" || tk.InputRequests[key] == nil {
				t.Fatalf("after the bad answer %v: status %s, outstanding %v", bad, tk.Status, tk.InputRequests)
			}
		}
		answer := map[string]any{"action": "accept", "content": map[string]any{"ok": round == 0}}
		if err := c.Result(ctx, "tasks/update", map[string]any{"taskId": h.TaskID, "inputResponses": map[string]any{key: answer}}, nil); err != nil {
			t.Fatal(err)
		}
		// The answered key is gone from the very next get.
		if tk, _ := c.Get(ctx, h.TaskID); tk.InputRequests[key] != nil {
			t.Fatalf("answered key %q still outstanding", key)
		}
		// Answering the same key again is ignored while the task runs;
		// once it finished (the last answer may end it at once), the
		// update is refused, naming its status.
		r, err := c.Call(ctx, "tasks/update", map[string]any{"taskId": h.TaskID, "inputResponses": map[string]any{key: answer}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Error != nil && (round == 0 || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "is completed")) {
			t.Fatalf("the same answer again: %+v", r.Error)
		}
	}
	tk, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal)
	if err != nil {
		t.Fatal(err)
	}
	if txt := resultText(t, tk.Result); txt != "accept:true,accept:false" {
		t.Errorf("result %q", txt)
	}
}

func TestWireErrors(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), &gates{})
	c, plain := clients(s)
	ctx := ctxT(t)

	check := func(t *testing.T, r *wiretest.Response, err error, code int64, status int) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if r.Error == nil || r.Error.Code != code {
			t.Fatalf("error = %+v, want code %d", r.Error, code)
		}
		if status != 0 && r.HTTPStatus != status {
			t.Errorf("HTTP status %d, want %d", r.HTTPStatus, status)
		}
	}
	t.Run("unknown task", func(t *testing.T) {
		for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			r, err := c.Call(ctx, m, map[string]any{"taskId": "tasks-conformance-nonexistent-12345", "inputResponses": map[string]any{}}, nil)
			check(t, r, err, -32602, 400)
		}
	})
	t.Run("malformed id", func(t *testing.T) {
		r, err := c.Call(ctx, "tasks/get", map[string]any{"taskId": "../../etc/passwd"}, nil)
		check(t, r, err, -32602, 400)
		r, err = c.Call(ctx, "tasks/get", map[string]any{"taskId": strings.Repeat("a", 500)}, nil)
		check(t, r, err, -32602, 400)
	})
	t.Run("capability gate", func(t *testing.T) {
		for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			r, err := plain.Call(ctx, m, map[string]any{"taskId": "gate-test", "inputResponses": map[string]any{}}, nil)
			check(t, r, err, -32021, 400)
			var data struct {
				RequiredCapabilities struct {
					Extensions map[string]any `json:"extensions"`
				} `json:"requiredCapabilities"`
			}
			_ = json.Unmarshal(r.Error.Data, &data)
			if _, ok := data.RequiredCapabilities.Extensions["io.modelcontextprotocol/tasks"]; !ok {
				t.Errorf("%s: data = %s", m, r.Error.Data)
			}
		}
		r, err := plain.Call(ctx, "tools/call", map[string]any{"name": "only_task", "arguments": map[string]any{"label": "x"}}, nil)
		check(t, r, err, -32021, 400)
	})
	t.Run("sync without extension", func(t *testing.T) {
		tk, err := plain.CallTool(ctx, "work", map[string]any{"label": "s"})
		if err != nil {
			t.Fatal(err)
		}
		if tk.ResultType != "complete" || tk.TaskID != "" || !strings.Contains(string(tk.Content), "done s") {
			t.Fatalf("sync answer = %+v", tk)
		}
		tk, err = c.CallTool(ctx, "plain", map[string]any{"label": "p"})
		if err != nil || tk.ResultType != "complete" || tk.TaskID != "" {
			t.Fatalf("forbidden tool with extension = %+v, %v", tk, err)
		}
	})
	t.Run("removed methods", func(t *testing.T) {
		for _, m := range []string{"tasks/result", "tasks/list"} {
			r, err := c.Call(ctx, m, map[string]any{"taskId": "x"}, nil)
			check(t, r, err, -32601, 404)
		}
	})
	t.Run("Mcp-Name mismatch", func(t *testing.T) {
		h, err := c.CallTool(ctx, "work", map[string]any{"label": "n"})
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Call(ctx, "tasks/get", map[string]any{"taskId": h.TaskID}, http.Header{"Mcp-Name": {"someone-else"}})
		check(t, r, err, -32020, 400)
	})
}

// TestTaskArgumentsChecked: on 2026-07-28, a task call whose arguments
// the tool's input schema rejects is answered at once with the go-sdk's
// tool error (isError, a tool execution error as the specs want, so the
// model can correct them), and no task is created (one was, only to end
// with that error).
func TestTaskArgumentsChecked(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), &gates{})
	c, plain := clients(s)
	ctx := ctxT(t)
	for _, args := range []map[string]any{
		{"label": 5},                    // a number for a string
		{"millis": "soon"},              // a string for an integer
		{"label": "x", "unknown": true}, // a property the schema does not have
	} {
		res, err := c.CallTool(ctx, "work", args)
		if err != nil {
			t.Fatal(err)
		}
		if res.ResultType != "complete" || res.TaskID != "" || !res.IsError || !strings.Contains(string(res.Content), "validating") {
			t.Errorf("%v: %+v, want a complete isError result saying what failed validation", args, res)
		}
	}
	tasks, _, err := s.eng.List(ctx, task.AnonymousOwner(""), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 0 {
		t.Errorf("%d tasks created for calls with rejected arguments", len(tasks))
	}
	// Defaults and valid arguments pass.
	if h, err := c.CallTool(ctx, "work", map[string]any{"label": "ok"}); err != nil || h.TaskID == "" {
		t.Fatalf("a valid task call: %+v, %v", h, err)
	}
	res, err := plain.CallTool(ctx, "work", map[string]any{"label": 5})
	if err != nil || res.ResultType != "complete" || !res.IsError || !strings.Contains(string(res.Content), "validating") {
		t.Errorf("plain call with bad arguments: %+v, %v; want the go-sdk's tool error", res, err)
	}
}

func TestRestartKeepsTasks(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	g := &gates{}
	s := startServer(t, db, g)
	c, _ := clients(s)
	ctx := ctxT(t)

	done, err := c.CallTool(ctx, "work", map[string]any{"label": "before"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitFor(ctx, done.TaskID, wiretest.Terminal); err != nil {
		t.Fatal(err)
	}
	stuck, err := c.CallTool(ctx, "work", map[string]any{"millis": -1, "label": "stuck"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.CallTool(ctx, "rerunnable", map[string]any{"millis": 0, "label": "again"})
	if err != nil {
		t.Fatal(err)
	}
	_ = again
	s.close() // shutdown grace of 50ms: the stuck task is resolved by policy

	s2 := startServer(t, db, g)
	c2, _ := clients(s2)
	got, err := c2.Get(ctx, done.TaskID)
	if err != nil || got.Status != "completed" || resultText(t, got.Result) != "done before" {
		t.Fatalf("completed task after restart = %+v, %v", got, err)
	}
	got, err = c2.Get(ctx, stuck.TaskID)
	if err != nil || got.Status != "failed" || !strings.Contains(got.StatusMessage, "outcome is unknown") {
		t.Fatalf("interrupted task after restart = %+v, %v", got, err)
	}
}

// TestRecoveryPolicy starts a server on a store holding tasks that a dead
// process left working: the default policy fails them with an "outcome
// unknown" error; a re-runnable tool runs again and completes.
func TestRecoveryPolicy(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	st, err := sqlite.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	orphan := func(tool, label string) string {
		tk := task.New(task.Policy{}, task.AnonymousPrefix, tool, nil, time.Now())
		tk.Wire = "2026-07-28"
		tk.Runner = "dead-process"
		tk.Request = json.RawMessage(fmt.Sprintf(`{"name":%q,"arguments":{"label":%q}}`, tool, label))
		if err := st.Create(ctx, tk, store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return string(tk.ID)
	}
	unsafe := orphan("work", "side-effects")
	safe := orphan("rerunnable", "idempotent")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	s := startServer(t, db, &gates{})
	c, _ := clients(s)
	got, err := c.Get(ctx, unsafe)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "failed" || got.Error == nil || got.Error.Code != -32603 || !strings.Contains(got.Error.Message, "outcome is unknown") {
		t.Fatalf("non-re-runnable orphan = %+v", got)
	}
	got, err = c.WaitFor(ctx, safe, wiretest.Terminal)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "completed" || resultText(t, got.Result) != "done idempotent" {
		t.Fatalf("re-runnable orphan = %+v", got)
	}
}

// TestConcurrentTasks holds 1,000 tasks in flight at once, then lets them
// finish; each completes with its own result.
func TestConcurrentTasks(t *testing.T) {
	g := &gates{}
	s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), g)
	c, _ := clients(s)
	c.HTTP = &http.Client{Transport: &http.Transport{MaxConnsPerHost: 200, MaxIdleConnsPerHost: 200}}
	// The race detector slows the pure-Go SQLite engine many times over.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const n = 1000
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() {
			h, err := c.CallTool(ctx, "work", map[string]any{"millis": -1, "label": fmt.Sprintf("n%d", i)})
			if err != nil {
				errs <- err
				return
			}
			ids[i] = h.TaskID
		})
	}
	wg.Wait()
	for i := range n { // every task is in flight; release them all
		close(g.get(fmt.Sprintf("n%d", i)))
	}
	for i := range n {
		wg.Go(func() {
			if ids[i] == "" {
				return
			}
			got, err := c.WaitFor(ctx, ids[i], wiretest.Terminal)
			if err != nil {
				errs <- err
				return
			}
			var r struct {
				Content []struct{ Text string } `json:"content"`
			}
			_ = json.Unmarshal(got.Result, &r)
			if got.Status != "completed" || len(r.Content) == 0 || r.Content[0].Text != fmt.Sprintf("done n%d", i) {
				errs <- fmt.Errorf("task %d: %+v", i, got)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestIdempotentCall: a retried tools/call with the same idempotency key
// (mcptask's key, or the SEP-1686 draft's client task key) returns the
// same task; the work runs once.
func TestIdempotentCall(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), &gates{})
	c, _ := clients(s)
	ctx := ctxT(t)
	callWith := func(meta map[string]any, tool, label string) *wiretest.Response {
		m := c.Meta()
		for k, v := range meta {
			m[k] = v
		}
		r, err := c.Call(ctx, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{"label": label}, "_meta": m}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	call := func(meta map[string]any, tool string) *wiretest.Response { return callWith(meta, tool, "idem") }
	id := func(r *wiretest.Response) string {
		var h wiretest.Task
		if r.Error != nil || json.Unmarshal(r.Result, &h) != nil || h.TaskID == "" {
			t.Fatalf("no task handle: %+v %s", r.Error, r.Result)
		}
		return h.TaskID
	}
	for _, meta := range []map[string]any{
		{"io.mcptask/idempotency-key": "retry-1"},
		{"modelcontextprotocol.io/task": map[string]any{"taskId": "client-chosen-7"}},
	} {
		first, again := id(call(meta, "work")), id(call(meta, "work"))
		if first != again {
			t.Errorf("%v: retry created task %s, first was %s", meta, again, first)
		}
		if r := call(meta, "rerunnable"); r.Error == nil || r.Error.Code != -32602 {
			t.Errorf("%v: key reused for another tool: %+v", meta, r.Error)
		}
		// The same key with other arguments is another call, not a retry:
		// refused, naming the key, and the first task is not handed out.
		r := callWith(meta, "work", "other arguments")
		if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "idempotency key") {
			t.Errorf("%v: key reused with other arguments: %+v %s, want -32602 naming the key", meta, r.Error, r.Result)
		} else if strings.Contains(string(r.Result), first) || strings.Contains(r.Error.Message, first) {
			t.Errorf("%v: the conflict revealed the first task", meta)
		}
	}
	if r := call(map[string]any{"io.mcptask/idempotency-key": 7}, "work"); r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("non-string key: %+v", r.Error)
	}
	if a, b := id(call(nil, "work")), id(call(nil, "work")); a == b {
		t.Errorf("calls without a key share task %s", a)
	}
}

// TestDrain: the drain switch refuses new tasks (of one tool, then of
// every tool) with -32010, data.reason "draining" (in StartTask, which
// both wires share; exercised here on 2026-07-28), while a
// task created before stays readable and cancellable; lifting it lets new
// tasks in again.
func TestDrain(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), &gates{})
	c, _ := clients(s)
	ctx := ctxT(t)
	before, err := c.CallTool(ctx, "work", map[string]any{"millis": -1, "label": "before"})
	if err != nil || before.TaskID == "" {
		t.Fatalf("a task before the drain: %+v, %v", before, err)
	}
	refused := func(tool string) bool {
		t.Helper()
		r, err := c.Call(ctx, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{"label": "x"}, "_meta": c.Meta()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Error == nil {
			return false
		}
		var data struct{ Reason, Tool string }
		_ = json.Unmarshal(r.Error.Data, &data)
		if r.Error.Code != -32010 || data.Reason != "draining" || !strings.Contains(r.Error.Message, "draining") {
			t.Fatalf("%s refused with %+v, want -32010 draining", tool, r.Error)
		}
		return true
	}
	s.ts.Drain(ctx, false, []string{"work"}, "test")
	if !refused("work") || refused("rerunnable") {
		t.Fatal("draining work: want work refused, rerunnable served")
	}
	s.ts.Drain(ctx, true, nil, "test")
	if !refused("rerunnable") {
		t.Fatal("draining everything: rerunnable served")
	}
	if r, err := c.Call(ctx, "tasks/get", map[string]any{"taskId": before.TaskID}, nil); err != nil || r.Error != nil {
		t.Fatalf("tasks/get of a task created before the drain: %+v, %v", r, err)
	}
	if r, err := c.Call(ctx, "tasks/cancel", map[string]any{"taskId": before.TaskID}, nil); err != nil || r.Error != nil {
		t.Fatalf("tasks/cancel during the drain: %+v, %v", r, err)
	}
	s.ts.Drain(ctx, false, nil, "test")
	if refused("work") {
		t.Fatal("the drain was lifted, yet work is refused")
	}
}
