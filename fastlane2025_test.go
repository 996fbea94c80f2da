package mcptask_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// laneSessionID is the ID every server of a 2025-11-25 comparison gives
// its sessions.
const laneSessionID = "lane-session-0123456789"

// startTask25 calls tool with args as a task on the 2025-11-25 session s
// and returns the task's ID.
func startTask25(t *testing.T, ctx context.Context, s *wiretest.Session, tool string, args map[string]any) string {
	t.Helper()
	params := map[string]any{"name": tool, "task": map[string]any{}}
	if args != nil {
		params["arguments"] = args
	}
	raw, err := s.Call(ctx, "tools/call", params)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || res.Task.TaskID == "" {
		t.Fatalf("%s: no task in %s (%v)", tool, raw, err)
	}
	return res.Task.TaskID
}

// waitAnswer25 reads the task id on s until its tasks/get answer holds
// want.
func waitAnswer25(t *testing.T, ctx context.Context, s *wiretest.Session, id, want string) {
	t.Helper()
	for {
		raw, err := s.Call(ctx, "tasks/get", map[string]any{"taskId": id})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), want) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("task %s: never %s", id, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// laneTasks25 creates, on the 2025-11-25 session s, a task of each kind
// the corpus reads, and returns their IDs by kind.
func laneTasks25(t *testing.T, s *wiretest.Session, g *gates) map[string]string {
	t.Helper()
	ctx := ctxT(t)
	ids := map[string]string{}
	start := func(kind, tool string, args map[string]any) {
		ids[kind] = startTask25(t, ctx, s, tool, args)
	}
	get := func(id string) (status, message string, raw json.RawMessage) {
		raw, err := s.Call(ctx, "tasks/get", map[string]any{"taskId": id})
		if err != nil {
			t.Fatal(err)
		}
		var tk struct {
			Status        string `json:"status"`
			StatusMessage string `json:"statusMessage"`
		}
		_ = json.Unmarshal(raw, &tk)
		return tk.Status, tk.StatusMessage, raw
	}
	wait := func(kind string, cond func(status, message string, raw json.RawMessage) bool) {
		for {
			if cond(get(ids[kind])) {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: never as expected", kind)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	start("expired", "brief", nil)
	start("completed", "work", map[string]any{"label": "c"})
	start("failed", "rpc_error", nil)
	start("tool_error", "tool_error", nil)
	start("input_required", "ask", nil)
	t.Cleanup(func() {
		close(g.get("lane25-working"))
		close(g.get("lane25-chatty"))
	})
	start("working", "work", map[string]any{"label": "lane25-working", "millis": -1})
	start("operation", "records_op", map[string]any{"label": "op"})
	start("logs", "chatty", map[string]any{"label": "lane25-chatty"})
	terminal := func(status, _ string, _ json.RawMessage) bool {
		return status == "completed" || status == "failed" || status == "cancelled"
	}
	for _, kind := range []string{"completed", "failed", "tool_error", "operation"} {
		wait(kind, terminal)
	}
	wait("input_required", func(status, _ string, _ json.RawMessage) bool { return status == "input_required" })
	wait("working", func(_, message string, _ json.RawMessage) bool { return message != "" })
	wait("logs", func(_, _ string, raw json.RawMessage) bool { return strings.Contains(string(raw), `"last":3`) })
	time.Sleep(400 * time.Millisecond) // the brief task's retention (300 ms) is over
	return ids
}

// corpus25 returns the 2025-11-25 requests of the comparison, on the
// session sid, for the tasks in ids; owner and other are the tokens of
// the session's user and of another one (none: "").
func corpus25(ids map[string]string, sid, owner, other string) []laneRequest {
	hdr := func(h map[string]string) map[string]string {
		out := map[string]string{}
		if owner != "" {
			out["Authorization"] = "Bearer " + owner
		}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	call := func(method, id string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{"taskId":"` + id + `"}}`
	}
	r := func(name, body string, h map[string]string) laneRequest {
		return laneRequest{name: name, body: body, header: hdr(h), session: sid}
	}
	done := ids["completed"]
	unknown := string(task.NewID())
	var rs []laneRequest
	for _, kind := range []string{"completed", "failed", "input_required", "working", "operation", "logs", "expired", "tool_error"} {
		rs = append(rs, r("get "+kind, call("tasks/get", ids[kind]), nil))
	}
	for _, kind := range []string{"completed", "failed", "operation", "expired", "tool_error"} {
		rs = append(rs, r("result "+kind, call("tasks/result", ids[kind]), nil))
	}
	get := call("tasks/get", done)
	rs = append(rs,
		r("get unknown", call("tasks/get", unknown), nil),
		r("result unknown", call("tasks/result", unknown), nil),
		r("get invalid ID", call("tasks/get", "../x"), nil),
		r("result invalid ID", call("tasks/result", "../x"), nil),
		r("string id", strings.Replace(get, `"id":7`, `"id":"seven"`, 1), nil),
		r("HTML in id", strings.Replace(get, `"id":7`, `"id":"<a&b>"`, 1), nil),
		r("fractional id", strings.Replace(get, `"id":7`, `"id":7.5`, 1), nil),
		r("integral float id", strings.Replace(get, `"id":7`, `"id":7.0`, 1), nil),
		r("null id", strings.Replace(get, `"id":7`, `"id":null`, 1), nil),
		r("object id", strings.Replace(get, `"id":7`, `"id":{}`, 1), nil),
		r("no id", strings.Replace(get, `"id":7,`, ``, 1), nil),
		r("jsonrpc 1.0", strings.Replace(get, `"2.0"`, `"1.0"`, 1), nil),
		r("method not a string", strings.Replace(get, `"method":"tasks/get"`, `"method":5`, 1), nil),
		r("escaped method", strings.Replace(get, `"method":"tasks/get"`, `"method":"tasks\/get"`, 1), nil),
		r("Method key case", strings.Replace(get, `"method":"tasks/get"`, `"METHOD":"tasks/get"`, 1), nil),
		r("params null", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":null}`, nil),
		r("no params", `{"jsonrpc":"2.0","id":7,"method":"tasks/get"}`, nil),
		r("params an array", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":[]}`, nil),
		r("taskId a number", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":5}}`, nil),
		r("taskId case", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"TaskId":"`+done+`"}}`, nil),
		r("unknown fields", strings.Replace(get, `"params":{`, `"params":{"zzz":[1,{"a":null}],`, 1), nil),
		r("duplicate taskId", strings.Replace(get, `"params":{`, `"params":{"taskId":"`+unknown+`",`, 1), nil),
		r("_meta", strings.Replace(get, `"params":{`, `"params":{"_meta":{"progressToken":1,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},`, 1), nil),
		r("_meta with a 2026 protocol version", strings.Replace(get, `"params":{`, `"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},`, 1), nil),
		r("_meta with a 2025 protocol version", strings.Replace(get, `"params":{`, `"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"},`, 1), nil),
		r("not JSON", `{"jsonrpc":`, nil),
		r("empty body", ``, nil),
		r("batch", `[`+get+`]`, nil),
		r("leading space", "  \n"+get, nil),
		r("trailing garbage", get+` x`, nil),
		r("trailing value", get+` {}`, nil),
		r("Accept json only", get, map[string]string{"Accept": "application/json"}),
		r("Accept */*", get, map[string]string{"Accept": "*/*"}),
		r("Content-Type text", get, map[string]string{"Content-Type": "text/plain"}),
		r("Content-Type charset", get, map[string]string{"Content-Type": "application/json; charset=utf-8"}),
		r("Last-Event-ID", get, map[string]string{"Last-Event-ID": "x_1"}),
		r("an older protocol version header", get, map[string]string{"Mcp-Protocol-Version": "2025-06-18"}),
		r("no protocol version header", get, map[string]string{"Mcp-Protocol-Version": ""}),
		r("unknown protocol version header", get, map[string]string{"Mcp-Protocol-Version": "1999-01-01"}),
		r("unknown session", get, map[string]string{"Mcp-Session-Id": "no-such-session"}),
		r("Mcp-Method header", get, map[string]string{"Mcp-Method": "tasks/cancel"}),
		r("tasks/list", `{"jsonrpc":"2.0","id":7,"method":"tasks/list","params":{}}`, nil),
		r("cancel completed", call("tasks/cancel", done), nil),
		r("ping", `{"jsonrpc":"2.0","id":7,"method":"ping"}`, nil),
		r("review: HTML taskId", call("tasks/get", "<a&b>\u2028"), nil),
		r("review: HTML taskId result", call("tasks/result", "<a&b>"), nil),
		r("review: invalid UTF-8 taskId", call("tasks/get", "\xff\xfe"), nil),
		r("review: _meta null", strings.Replace(get, `"params":{`, `"params":{"_meta":null,`, 1), nil),
		r("review: _meta string", strings.Replace(get, `"params":{`, `"params":{"_meta":"x",`, 1), nil),
		r("review: _meta pv number", strings.Replace(get, `"params":{`, `"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":5},`, 1), nil),
		r("review: _meta pv empty", strings.Replace(get, `"params":{`, `"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":""},`, 1), nil),
		r("review: big id", strings.Replace(get, `"id":7`, `"id":9007199254740993`, 1), nil),
		r("review: huge id", strings.Replace(get, `"id":7`, `"id":1e400`, 1), nil),
		r("review: exp id", strings.Replace(get, `"id":7`, `"id":7e0`, 1), nil),
		r("review: negative zero id", strings.Replace(get, `"id":7`, `"id":-0`, 1), nil),
		r("review: no jsonrpc", strings.Replace(get, `"jsonrpc":"2.0",`, ``, 1), nil),
		r("review: error field", strings.Replace(get, `"id":7,`, `"id":7,"error":{"code":1,"message":"x"},`, 1), nil),
		r("review: result field", strings.Replace(get, `"id":7,`, `"id":7,"result":{},`, 1), nil),
		r("review: duplicate id key", strings.Replace(get, `"id":7,`, `"id":7,"id":8,`, 1), nil),
		r("review: duplicate method key", strings.Replace(get, `"method":"tasks/get",`, `"method":"ping","method":"tasks/get",`, 1), nil),
		r("review: duplicate params key", strings.Replace(get, `"params":{`, `"params":{"taskId":5},"params":{`, 1), nil),
		r("review: trailing newline", get+"\n", nil),
		r("review: BOM", "\ufeff"+get, nil),
		r("review: two Accept headers", get, map[string]string{"Accept": "application/json;q=0, text/event-stream"}),
		r("review: Accept application/*", get, map[string]string{"Accept": "application/*, text/*"}),
		r("review: Content-Type caps", get, map[string]string{"Content-Type": "Application/JSON"}),
		r("review: pv header lowercase value", get, map[string]string{"Mcp-Protocol-Version": "2025-11-25 "}),
		r("review: 2026 pv header with session", get, map[string]string{"Mcp-Protocol-Version": "2026-07-28"}),
		r("review: taskId null", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":null}}`, nil),
		r("review: params empty", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{}}`, nil),
		r("review: result params empty", `{"jsonrpc":"2.0","id":7,"method":"tasks/result","params":{}}`, nil),
		r("review: result with _meta progressToken", strings.Replace(call("tasks/result", done), `"params":{`, `"params":{"_meta":{"progressToken":"p"},`, 1), nil),
		r("review: result with related task meta", strings.Replace(call("tasks/result", done), `"params":{`, `"params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"x"}},`, 1), nil),
	)
	foreign := r("foreign Host", get, nil)
	foreign.host = "evil.example"
	rs = append(rs, foreign)
	if other != "" {
		rs = append(rs,
			r("another user", get, map[string]string{"Authorization": "Bearer " + other}),
			r("another user's result", call("tasks/result", done), map[string]string{"Authorization": "Bearer " + other}),
			r("no token", get, map[string]string{"Authorization": ""}),
			r("bad token", get, map[string]string{"Authorization": "Bearer mallory"}),
		)
	}
	return rs
}

// TestFastLaneSameAnswers2025 is TestFastLaneSameAnswers for 2025-11-25
// sessions: the same session (by ID) on a server with the fast lane and
// one without, the same requests, answers compared byte for byte; then
// the session deleted on both, and its requests answered 404 by both.
func TestFastLaneSameAnswers2025(t *testing.T) {
	for _, tc := range laneCases(40) {
		t.Run(tc.name, func(t *testing.T) {
			g := &gates{}
			p := startLanePairSessions(t, g, mcptask.Options{Limits: tc.limits}, mcp.StreamableHTTPOptions{JSONResponse: tc.json}, tc.authn, laneSessionID)
			ctx := ctxT(t)
			owner, other := "", ""
			var hdr http.Header
			if tc.authn {
				owner, other = "alice", "bob"
				hdr = http.Header{"Authorization": {"Bearer alice"}}
			}
			sessions := map[string]*wiretest.Session{}
			for name, url := range map[string]string{"setup": p.setup, "fast": p.fast, "slow": p.slow} {
				s := &wiretest.Session{URL: url, Header: hdr}
				if _, err := s.Initialize(ctx); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if s.ID != laneSessionID {
					t.Fatalf("%s: session %q", name, s.ID)
				}
				sessions[name] = s
			}
			ids := laneTasks25(t, sessions["setup"], g)
			rs := corpus25(ids, laneSessionID, owner, other)
			if tc.limits.RequestRate > 0 {
				rs = append(rs, rs...) // past the burst: the rest are refused
			}
			compare := func(rs []laneRequest) {
				for _, r := range rs {
					fast, slow := r.send(t, p.fast), r.send(t, p.slow)
					if tc.limits.RequestRate > 0 {
						fast, slow = retryMillis.ReplaceAllString(fast, "${1}N"), retryMillis.ReplaceAllString(slow, "${1}N")
					}
					if fast != slow {
						t.Errorf("%s: the fast lane answered\n%s\n\nthe go-sdk answered\n%s", r.name, fast, slow)
					}
				}
			}
			compare(rs)
			served := mcptask.FastLaneServed(p.fastTasks)
			if served == 0 {
				t.Error("the fast lane answered nothing")
			} else {
				t.Logf("%d of %d requests on the fast lane", served, len(rs))
			}
			if n := mcptask.FastLaneServed(p.slowTas); n != 0 {
				t.Errorf("the server without FastLane answered %d on the fast lane", n)
			}

			// The session deleted: the lane answers it no more.
			for _, url := range []string{p.fast, p.slow} {
				req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
				req.Header.Set("Mcp-Session-Id", laneSessionID)
				if owner != "" {
					req.Header.Set("Authorization", "Bearer "+owner)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					t.Fatalf("DELETE: HTTP %d", resp.StatusCode)
				}
			}
			after := corpus25(ids, laneSessionID, owner, "")[:3]
			compare(after)
			if !strings.HasPrefix(after[0].send(t, p.fast), "HTTP 404") {
				t.Error("a deleted session was answered")
			}
			if n := mcptask.FastLaneServed(p.fastTasks); n != served {
				t.Errorf("the fast lane answered %d requests of a deleted session", n-served)
			}
		})
	}
}

// TestFastLane2025SessionTimeout: a session polled by tasks/get alone,
// which the fast lane answers without the go-sdk, stays open past the
// go-sdk's idle timeout (the lane sends a request to the go-sdk now and
// then); once left idle, it closes, and the lane does not answer it.
func TestFastLane2025SessionTimeout(t *testing.T) {
	g := &gates{}
	const timeout = 2 * time.Second
	p := startLanePair(t, g, mcptask.Options{}, mcp.StreamableHTTPOptions{SessionTimeout: timeout}, false)
	ctx := ctxT(t)
	s := &wiretest.Session{URL: p.fast}
	if _, err := s.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	taskID := startTask25(t, ctx, s, "work", map[string]any{"label": "t"})
	// Polled for 2.5 timeouts.
	before := mcptask.FastLaneServed(p.fastTasks)
	gets := 0
	for end := time.Now().Add(5 * timeout / 2); time.Now().Before(end); gets++ {
		if _, err := s.Call(ctx, "tasks/get", map[string]any{"taskId": taskID}); err != nil {
			t.Fatalf("after %d gets: %v", gets, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fast := mcptask.FastLaneServed(p.fastTasks) - before
	if fast == 0 || fast == uint64(gets) {
		t.Errorf("%d of %d gets on the fast lane: want most, not all", fast, gets)
	}
	t.Logf("%d of %d gets on the fast lane", fast, gets)
	// Left idle, the session closes; then neither lane answers it.
	for {
		_, err := s.Call(ctx, "tasks/get", map[string]any{"taskId": taskID})
		if err != nil && strings.Contains(err.Error(), "HTTP 404") {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the idle session never closed")
		}
		time.Sleep(timeout + timeout/4)
	}
}

// TestFastLane2025DuplicateID: a tasks/get whose ID is that of a call
// still in flight on the session (a tasks/result waiting for its task,
// on the slow lane) is refused as a duplicate, as the go-sdk refuses it.
func TestFastLane2025DuplicateID(t *testing.T) {
	for _, json := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", json), func(t *testing.T) { testDuplicateID(t, json) })
	}
}

func testDuplicateID(t *testing.T, jsonResponse bool) {
	g := &gates{}
	p := startLanePairSessions(t, g, mcptask.Options{}, mcp.StreamableHTTPOptions{JSONResponse: jsonResponse}, false, laneSessionID)
	ctx := ctxT(t)
	setup := &wiretest.Session{URL: p.setup}
	if _, err := setup.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	taskID := startTask25(t, ctx, setup, "ask", nil)
	waitAnswer25(t, ctx, setup, taskID, `"input_required"`)
	answers := map[string]string{}
	for _, url := range []string{p.fast, p.slow} {
		s := &wiretest.Session{URL: url}
		if _, err := s.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		if jsonResponse {
			// The question is held with the answer: nothing tells that
			// the call is in flight. A call records the session on the
			// fast lane before it is answered (notifications/initialized
			// is answered 202 before it is handled, so it need not have),
			// as any call on the lane would have.
			if _, err := s.Call(ctx, "tasks/get", map[string]any{"taskId": taskID}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// tasks/result waits for the task, and asks its question on its
		// stream: once the question is there, the call is in flight. Its
		// ID is 2 (the session's second call, after initialize).
		rctx, cancel := context.WithCancel(ctx)
		msgs, err := s.CallStream(rctx, "tasks/result", map[string]any{"taskId": taskID})
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := <-msgs; !ok || m.Method != "elicitation/create" {
			t.Fatalf("tasks/result: %+v, want the question", m)
		}
		dup := laneRequest{name: "duplicate", session: laneSessionID,
			body: `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"` + taskID + `"}}`}
		answers[url] = dup.send(t, url)
		cancel()
		for range msgs {
		}
	}
	if jsonResponse {
		// As the go-sdk answers it (the SSE case above, less the stream's
		// Connection header).
		answers[p.slow] = "HTTP 400\nContent-Type: [\"application/json\"]\nCache-Control: [\"no-cache, no-transform\"]\nConnection: []\n" +
			"Content-Length: [\"93\"]\nAllow: []\nWww-Authenticate: []\nX-Content-Type-Options: []\nTransfer-Encoding: []\n\n" +
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"duplicate in-flight request ID 2"}}`
	} else if answers[p.fast] != answers[p.slow] || !strings.Contains(answers[p.fast], "duplicate in-flight request ID 2") {
		t.Errorf("the fast lane answered\n%s\n\nthe go-sdk answered\n%s", answers[p.fast], answers[p.slow])
	}
	// A call in flight on the fast lane: the lane refuses its duplicate as
	// the go-sdk refuses one (above).
	end := mcptask.MarkFastLaneCall(p.fastHandler, laneSessionID, 3)
	dup := laneRequest{name: "duplicate", session: laneSessionID,
		body: `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"` + taskID + `"}}`}
	got := dup.send(t, p.fast)
	end()
	if want := strings.NewReplacer(`"id":2,`, `"id":3,`, "request ID 2", "request ID 3").Replace(answers[p.slow]); got != want {
		t.Errorf("a duplicate of a call on the fast lane: answered\n%s\n\nwant\n%s", got, want)
	}
	if got := dup.send(t, p.fast); !strings.HasPrefix(got, "HTTP 200") {
		t.Errorf("once the call ended:\n%s", got)
	}
}
