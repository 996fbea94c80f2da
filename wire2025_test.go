package mcptask_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawSession is a raw 2025-11-25 client on an in-memory connection to a
// server run with Server.Run: it sees every message, answers the server's
// requests with onRequest, and collects notifications.
type rawSession struct {
	t    *testing.T
	conn mcp.Connection
	next int64

	mu        sync.Mutex
	pending   map[int64]chan *jsonrpc.Response
	notes     []*jsonrpc.Request
	onRequest func(*jsonrpc.Request) (any, error)
}

func startRaw2025(t *testing.T, onRequest func(*jsonrpc.Request) (any, error)) *rawSession {
	t.Helper()
	return startRaw2025With(t, mcptask.Options{}, onRequest)
}

// startRaw2025With is startRaw2025 with the given server options (their
// Logger is replaced by a discarding one).
func startRaw2025With(t *testing.T, opts mcptask.Options, onRequest func(*jsonrpc.Request) (any, error)) *rawSession {
	t.Helper()
	return startRaw2025Gated(t, opts, &gates{}, onRequest)
}

// startRaw2025Gated is startRaw2025With whose test tools wait behind g.
func startRaw2025Gated(t *testing.T, opts mcptask.Options, g *gates, onRequest func(*jsonrpc.Request) (any, error)) *rawSession {
	t.Helper()
	return startRaw2025Tools(t, opts, func(ts *mcptask.Server) { registerTestTools(ts, g) }, onRequest)
}

// startRaw2025Tools is startRaw2025With whose tools register adds.
func startRaw2025Tools(t *testing.T, opts mcptask.Options, register func(*mcptask.Server), onRequest func(*jsonrpc.Request) (any, error)) *rawSession {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Options{Store: st, Logger: discard, Policy: task.Policy{MaxTTL: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ServerOptions{Logger: discard})
	opts.Logger = discard
	ts, err := mcptask.New(srv, eng, &opts)
	if err != nil {
		t.Fatal(err)
	}
	register(ts)
	if err := eng.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ct, stt := mcp.NewInMemoryTransports()
	done := make(chan struct{})
	go func() { _ = ts.Run(ctx, stt); close(done) }()
	conn, err := ct.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := &rawSession{t: t, conn: conn, pending: map[int64]chan *jsonrpc.Response{}, onRequest: onRequest}
	go s.readLoop(ctx)
	t.Cleanup(func() {
		cancel()
		<-done
		// Work still running (e.g. behind a gate never opened) is stopped
		// at once: the test is over.
		stopNow, stop := context.WithCancel(context.Background())
		stop()
		_ = eng.Shutdown(stopNow)
		_ = st.Close()
	})
	var init map[string]any
	if err := s.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"elicitation": map[string]any{}}, "clientInfo": map[string]any{"name": "raw", "version": "1"}}, &init); err != nil {
		t.Fatal(err)
	}
	caps, _ := init["capabilities"].(map[string]any)
	tasksCap, ok := caps["tasks"].(map[string]any)
	if !ok {
		t.Fatalf("initialize capabilities lack tasks: %v", init)
	}
	if exts, _ := caps["extensions"].(map[string]any); caps["events"] == nil || exts["io.modelcontextprotocol/events"] == nil {
		t.Errorf("initialize capabilities lack MCP Events (events, extensions): %v", caps)
	}
	if _, ok := tasksCap["delete"]; !ok {
		t.Errorf("capabilities.tasks lacks delete (mcptask's tasks/delete): %v", tasksCap)
	}
	if exp, _ := caps["experimental"].(map[string]any); exp[wire.ExtensionOperations] == nil {
		t.Errorf("capabilities.experimental lacks %s (a SQLite store keeps a ledger): %v", wire.ExtensionOperations, caps)
	}
	if err := conn.Write(ctx, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *rawSession) readLoop(ctx context.Context) {
	for {
		msg, err := s.conn.Read(ctx)
		if err != nil {
			return
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			id, _ := m.ID.Raw().(int64)
			s.mu.Lock()
			ch := s.pending[id]
			s.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		case *jsonrpc.Request:
			if !m.ID.IsValid() {
				s.mu.Lock()
				s.notes = append(s.notes, m)
				s.mu.Unlock()
				continue
			}
			go func() {
				res, err := s.onRequest(m)
				resp := &jsonrpc.Response{ID: m.ID}
				if err != nil {
					resp.Error = err
				} else {
					resp.Result, _ = json.Marshal(res)
				}
				_ = s.conn.Write(ctx, resp)
			}()
		}
	}
}

// call sends a request and decodes its result into out, or returns the
// JSON-RPC error.
func (s *rawSession) call(method string, params any, out any) error {
	s.mu.Lock()
	s.next++
	id := s.next
	ch := make(chan *jsonrpc.Response, 1)
	s.pending[id] = ch
	s.mu.Unlock()
	b, _ := json.Marshal(params)
	rid, _ := jsonrpc.MakeID(float64(id))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.conn.Write(ctx, &jsonrpc.Request{ID: rid, Method: method, Params: b}); err != nil {
		return err
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return r.Error
		}
		if out != nil {
			return json.Unmarshal(r.Result, out)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: no answer", method)
	}
}

type task2025 struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

func (s *rawSession) callTask(t *testing.T, tool string, args map[string]any, ttl any) task2025 {
	t.Helper()
	var res struct {
		Task task2025 `json:"task"`
	}
	p := map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": ttl}}
	if err := s.call("tools/call", p, &res); err != nil {
		t.Fatalf("tools/call %s as task: %v", tool, err)
	}
	// Work that ends within the engine's FinishWithin is answered
	// already terminal.
	if res.Task.TaskID == "" || !slices.Contains([]string{"working", "completed", "failed"}, res.Task.Status) {
		t.Fatalf("CreateTaskResult = %+v", res)
	}
	return res.Task
}

func (s *rawSession) waitStatus(t *testing.T, id string, want ...string) task2025 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got task2025
		if err := s.call("tasks/get", map[string]any{"taskId": id}, &got); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if got.Status == w {
				return got
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still %s, want %v", id, got.Status, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func rpcCode(err error) int64 {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Code
	}
	return 0
}

func noRequests(*jsonrpc.Request) (any, error) { return nil, errors.New("unexpected request") }

func Test2025Lifecycle(t *testing.T) {
	g := &gates{}
	s := startRaw2025Gated(t, mcptask.Options{}, g, noRequests)

	var tools struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	if err := s.call("tools/list", map[string]any{}, &tools); err != nil {
		t.Fatal(err)
	}
	support := map[string]string{}
	for _, tl := range tools.Tools {
		support[tl.Name] = tl.Execution.TaskSupport
	}
	if support["plain"] != "forbidden" || support["work"] != "optional" || support["only_task"] != "required" {
		t.Fatalf("execution.taskSupport = %v", support)
	}

	tk := s.callTask(t, "work", map[string]any{"label": "v1"}, 60000)
	if tk.TTL == nil || *tk.TTL != 60000 || tk.PollInterval <= 0 {
		t.Errorf("task = %+v", tk)
	}
	var res struct {
		Content []struct{ Text string }      `json:"content"`
		Meta    map[string]map[string]string `json:"_meta"`
	}
	if err := s.call("tasks/result", map[string]any{"taskId": tk.TaskID}, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 || res.Content[0].Text != "done v1" || res.Meta["io.modelcontextprotocol/related-task"]["taskId"] != tk.TaskID {
		t.Fatalf("tasks/result = %+v", res)
	}
	if got := s.waitStatus(t, tk.TaskID, "completed"); got.TaskID != tk.TaskID {
		t.Fatalf("tasks/get = %+v", got)
	}

	// A task's status notifications tell the client of the changes after
	// the state it was answered with. Work that ends within the engine's
	// FinishWithin is answered terminal in its CreateTaskResult and gets
	// none (docs/wire-2025-11-25.md): the task above may be such a task.
	// A task held behind a gate is answered working; its notifications
	// reach the client, ending with completed (they are written
	// asynchronously: wait for it).
	tk = s.callTask(t, "work", map[string]any{"label": "gated", "millis": -1}, 60000)
	if tk.Status != "working" {
		t.Fatalf("CreateTaskResult of a task behind a gate: %+v", tk)
	}
	close(g.get("gated"))
	var last task2025
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		for _, n := range s.notes {
			var n2 task2025
			if n.Method == "notifications/tasks/status" && json.Unmarshal(n.Params, &n2) == nil && n2.TaskID == tk.TaskID {
				last = n2
			}
		}
		s.mu.Unlock()
		if last.Status == "completed" || time.Now().After(deadline) {
			break
		}
	}
	if last.TaskID != tk.TaskID || last.Status != "completed" {
		t.Errorf("last status notification = %+v", last)
	}

	var list struct {
		Tasks      []task2025 `json:"tasks"`
		NextCursor string     `json:"nextCursor"`
	}
	if err := s.call("tasks/list", map[string]any{}, &list); err != nil || len(list.Tasks) != 2 || !slices.ContainsFunc(list.Tasks, func(l task2025) bool { return l.TaskID == tk.TaskID }) {
		t.Fatalf("tasks/list = %+v, %v", list, err)
	}
}

func Test2025Outcomes(t *testing.T) {
	s := startRaw2025(t, noRequests)
	// A tool-level error shows failed on this wire; tasks/result returns the result.
	tk := s.callTask(t, "tool_error", nil, nil)
	s.waitStatus(t, tk.TaskID, "failed")
	var res struct{ IsError bool }
	if err := s.call("tasks/result", map[string]any{"taskId": tk.TaskID}, &res); err != nil || !res.IsError {
		t.Fatalf("tasks/result of an isError task = %+v, %v", res, err)
	}
	// A JSON-RPC error is returned by tasks/result exactly.
	tk = s.callTask(t, "rpc_error", nil, nil)
	err := s.call("tasks/result", map[string]any{"taskId": tk.TaskID}, nil)
	if rpcCode(err) != -32001 || !strings.Contains(err.Error(), "backend unavailable") {
		t.Fatalf("tasks/result of a failed task: %v", err)
	}
}

func Test2025BadInput(t *testing.T) {
	s := startRaw2025(t, noRequests)
	for _, ttl := range []any{-1, "60000", "abc", 1.5, map[string]any{}} {
		err := s.call("tools/call", map[string]any{"name": "work", "arguments": map[string]any{}, "task": map[string]any{"ttl": ttl}}, nil)
		if rpcCode(err) != -32602 {
			t.Errorf("ttl %v: %v, want -32602", ttl, err)
		}
	}
	huge := s.callTask(t, "work", map[string]any{}, 1e18)
	if huge.TTL == nil || *huge.TTL != time.Hour.Milliseconds() {
		t.Errorf("huge ttl granted as %v, want the 1h cap", huge.TTL)
	}
	if err := s.call("tools/call", map[string]any{"name": "plain", "arguments": map[string]any{}, "task": map[string]any{}}, nil); rpcCode(err) != -32601 {
		t.Errorf("task call to a forbidden tool: %v", err)
	}
	if err := s.call("tools/call", map[string]any{"name": "only_task", "arguments": map[string]any{}}, nil); rpcCode(err) != -32601 {
		t.Errorf("plain call to a required tool: %v", err)
	}
	if err := s.call("tasks/result", map[string]any{"taskId": "nope"}, nil); rpcCode(err) != -32602 {
		t.Errorf("tasks/result of an unknown task: %v", err)
	}
	if err := s.call("tasks/list", map[string]any{"cursor": "forged"}, nil); rpcCode(err) != -32602 {
		t.Errorf("tasks/list with a tampered cursor: %v", err)
	}
	tk := s.callTask(t, "work", map[string]any{"millis": -1, "label": "held"}, nil)
	var cancelled task2025
	if err := s.call("tasks/cancel", map[string]any{"taskId": tk.TaskID}, &cancelled); err != nil || cancelled.Status != "cancelled" {
		t.Fatalf("tasks/cancel = %+v, %v", cancelled, err)
	}
	if err := s.call("tasks/cancel", map[string]any{"taskId": tk.TaskID}, nil); rpcCode(err) != -32602 {
		t.Errorf("second tasks/cancel: %v", err)
	}
	if err := s.call("tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": map[string]any{}}, nil); rpcCode(err) != -32601 {
		t.Errorf("tasks/update on the 2025 wire: %v", err)
	}
}

func Test2025InputRequired(t *testing.T) {
	var asked []string
	var mu sync.Mutex
	s := startRaw2025(t, func(r *jsonrpc.Request) (any, error) {
		var p struct {
			Message string                       `json:"message"`
			Meta    map[string]map[string]string `json:"_meta"`
		}
		_ = json.Unmarshal(r.Params, &p)
		mu.Lock()
		asked = append(asked, r.Method+"|"+p.Message+"|"+p.Meta["io.modelcontextprotocol/related-task"]["taskId"])
		n := len(asked)
		mu.Unlock()
		return map[string]any{"action": "accept", "content": map[string]any{"ok": n == 1}}, nil
	})
	tk := s.callTask(t, "ask", nil, nil)
	if got := askedResult(t, s, tk.TaskID); got != "accept:true,accept:false" {
		t.Fatalf("result = %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"elicitation/create|question 0|" + tk.TaskID, "elicitation/create|question 1|" + tk.TaskID}
	if fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Fatalf("server requests = %v, want %v", asked, want)
	}
}

// askedResult waits until the "ask" task id asks, then returns the text
// of its tasks/result (the questions are answered meanwhile by the
// session's handler).
func askedResult(t *testing.T, s *rawSession, id string) string {
	t.Helper()
	s.waitStatus(t, id, "input_required")
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := s.call("tasks/result", map[string]any{"taskId": id}, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("result = %+v", res)
	}
	return res.Content[0].Text
}

// Test2025BadAnswerAskedAgain: an answer to elicitation/create outside the
// requested schema is not delivered to the task (it would fail the tool on
// it): the server asks the same question again, and the valid answer that
// follows goes through.
func Test2025BadAnswerAskedAgain(t *testing.T) {
	var asked []string
	var mu sync.Mutex
	s := startRaw2025(t, func(r *jsonrpc.Request) (any, error) {
		var p struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(r.Params, &p)
		mu.Lock()
		asked = append(asked, p.Message)
		n := len(asked)
		mu.Unlock()
		if n == 1 {
			return map[string]any{"action": "accept", "content": map[string]any{"ok": "yes"}}, nil // not a boolean
		}
		return map[string]any{"action": "accept", "content": map[string]any{"ok": true}}, nil
	})
	tk := s.callTask(t, "ask", nil, nil)
	if got := askedResult(t, s, tk.TaskID); got != "accept:true,accept:true" {
		t.Fatalf("result = %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"question 0", "question 0", "question 1"}; fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Fatalf("questions asked = %v, want %v (the badly answered one again)", asked, want)
	}
}
