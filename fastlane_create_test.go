package mcptask_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What differs between two servers' answers to the same tools/call: the
// IDs of the tasks they create and the times.
var (
	laneTaskID = regexp.MustCompile(`\b[a-z2-7]{32}\b`)
	laneTime   = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
)

// createCorpus is the tools/call requests of the comparison of creates,
// sent in this order to each server: calls the server answers with a task
// (held, rejected, refused, retried) and calls that are not for the
// lane (plain, unknown tool, headers the go-sdk refuses).
func createCorpus(owner string) []laneRequest {
	call := func(tool, args, meta string) string {
		if meta == "" {
			meta = laneMeta
		}
		return `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,"_meta":` + meta + `}}`
	}
	keyed := func(key string) string {
		return strings.Replace(laneMeta, `{`, `{"`+wire.MetaIdempotencyKey+`":"`+key+`",`, 1)
	}
	hdr := func(tool string, h map[string]string) map[string]string {
		out := map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": tool}
		if owner != "" {
			out["Authorization"] = "Bearer " + owner
		}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	held := `{"label":"lane-create-held","millis":-1}`
	noCaps := strings.Replace(laneMeta, `"extensions":{"io.modelcontextprotocol/tasks":{}}`, ``, 1)
	return []laneRequest{
		{name: "held task", body: call("work", held, ""), header: hdr("work", nil)},
		{name: "required tool", body: call("only_task", held, ""), header: hdr("only_task", nil)},
		{name: "arguments the schema rejects", body: call("work", `{"millis":"soon"}`, ""), header: hdr("work", nil)},
		{name: "arguments not an object", body: call("work", `5`, ""), header: hdr("work", nil)},
		{name: "idempotency key", body: call("work", held, keyed("k1")), header: hdr("work", nil)},
		{name: "idempotent retry", body: call("work", held, keyed("k1")), header: hdr("work", nil)},
		{name: "idempotency conflict", body: call("work", `{"label":"other","millis":-1}`, keyed("k1")), header: hdr("work", nil)},
		{name: "empty idempotency key", body: call("work", held, keyed("")), header: hdr("work", nil)},
		{name: "trace context", body: call("work", held, strings.Replace(laneMeta, `{`, `{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",`, 1)), header: hdr("work", nil)},
		{name: "unknown params", body: strings.Replace(call("work", held, ""), `"params":{`, `"params":{"zzz":[1],`, 1), header: hdr("work", nil)},
		{name: "string id", body: strings.Replace(call("work", held, ""), `"id":9`, `"id":"nine"`, 1), header: hdr("work", nil)},
		// Not for the lane: answered by the go-sdk on both servers.
		{name: "no capability: a plain call", body: call("work", `{"label":"plain"}`, noCaps), header: hdr("work", nil)},
		{name: "required tool without capability", body: call("only_task", held, noCaps), header: hdr("only_task", nil)},
		{name: "plain tool", body: call("plain", `{"label":"p"}`, ""), header: hdr("plain", nil)},
		{name: "unknown tool", body: call("nope", `{}`, ""), header: hdr("nope", nil)},
		{name: "missing Mcp-Name", body: call("work", held, ""), header: hdr("work", map[string]string{"Mcp-Name": ""})},
		{name: "wrong Mcp-Name", body: call("work", held, ""), header: hdr("plain", nil)},
		{name: "params header tool", body: call("routed", `{"region":"eu"}`, ""), header: hdr("routed", nil)},
		{name: "name case", body: strings.Replace(call("work", held, ""), `"name":`, `"NAME":`, 1), header: hdr("work", nil)},
		{name: "params null", body: `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":null}`, header: hdr("work", nil)},
		{name: "notification", body: strings.Replace(call("work", held, ""), `"id":9,`, ``, 1), header: hdr("work", nil)},
	}
}

// createCases are the configurations of the comparisons of creates:
// anonymous with SSE and JSON answers, authenticated, and a cap of
// unfinished tasks that refuses some of the calls.
var createCases = []laneCase{
	{name: "anonymous"},
	{name: "anonymous json", json: true},
	{name: "authn", authn: true},
	{name: "capped", authn: true, limits: mcptask.Limits{MaxActiveTasks: 2}},
}

// TestFastLaneSameCreates sends a corpus of tools/call requests to two
// servers, one with the fast lane and one without, each on a store of its
// own, and compares the answers byte for byte once the task IDs and times
// are masked: the lane creates the tasks the go-sdk's path would create,
// refuses what it refuses, and leaves every other call to the go-sdk. It
// does so without and with authentication, with SSE and JSON answers, and
// with a cap of unfinished tasks that refuses some of the calls.
func TestFastLaneSameCreates(t *testing.T) {
	for _, tc := range createCases {
		t.Run(tc.name, func(t *testing.T) {
			g := &gates{}
			ho := mcp.StreamableHTTPOptions{JSONResponse: tc.json}
			opts := mcptask.Options{Limits: tc.limits}
			fast := startLanePair(t, g, opts, ho, tc.authn)
			slow := startLanePair(t, g, opts, ho, tc.authn)
			t.Cleanup(func() { close(g.get("lane-create-held")); close(g.get("other")) })
			owner := ""
			if tc.authn {
				owner = "alice"
			}
			compareCreates(t, fast, slow, createCorpus(owner))
		})
	}
}

// TestFastLaneCreatedTaskRuns: a task created on the fast lane runs its
// tool through the go-sdk's handler chain (the typed handler with its
// arguments decoded, the task's handle in its context) and ends with its
// result, on either wire.
func TestFastLaneCreatedTaskRuns(t *testing.T) {
	g := &gates{}
	p := startLanePair(t, g, mcptask.Options{}, mcp.StreamableHTTPOptions{}, false)
	c := &wiretest.Client{URL: p.fast, Tasks: true}
	ctx := ctxT(t)
	before := mcptask.FastLaneServed(p.fastTasks)
	h, err := c.CallTool(ctx, "work", map[string]any{"label": "on-lane", "millis": -1})
	if err != nil {
		t.Fatal(err)
	}
	if mcptask.FastLaneServed(p.fastTasks) == before {
		t.Fatal("the call was not answered on the fast lane")
	}
	got, err := c.WaitFor(ctx, h.TaskID, func(tk *wiretest.Task) bool { return tk.StatusMessage != "" })
	if err != nil || got.StatusMessage != "working on on-lane" {
		t.Fatalf("the task's handle in its tool: %+v %v", got, err)
	}
	close(g.get("on-lane"))
	got, err = c.WaitFor(ctx, h.TaskID, wiretest.Terminal)
	if err != nil || got.Status != "completed" || !strings.Contains(string(got.Result), "done on-lane") {
		t.Fatalf("the task's end: %+v %v", got, err)
	}

	// On a 2025-11-25 session, the task's work runs on that session.
	s := &wiretest.Session{URL: p.fast}
	if _, err := s.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	// (The lane knows a session from its first request after initialize.)
	waitAnswer25(t, ctx, s, startTask25(t, ctx, s, "work", map[string]any{"label": "warm"}), `"completed"`)
	before = mcptask.FastLaneServed(p.fastTasks)
	id := startTask25(t, ctx, s, "work", map[string]any{"label": "on-lane-25"})
	if mcptask.FastLaneServed(p.fastTasks) == before {
		t.Fatal("the 2025-11-25 call was not answered on the fast lane")
	}
	waitAnswer25(t, ctx, s, id, `"completed"`)
	res, err := s.Call(ctx, "tasks/result", map[string]any{"taskId": id})
	if err != nil || !strings.Contains(string(res), "done on-lane-25") {
		t.Fatalf("the 2025-11-25 task's result: %s %v", res, err)
	}
	// It is the anonymous session's own task: in its list.
	list, err := s.Call(ctx, "tasks/list", map[string]any{})
	if err != nil || !strings.Contains(string(list), id) {
		t.Fatalf("the session's tasks/list: %s %v; want %s", list, err, id)
	}

	// The server's own session closed (by the program, say): the next
	// task on the lane runs on a new one.
	mcptask.CloseLaneSession(p.fastTasks)
	before = mcptask.FastLaneServed(p.fastTasks)
	h, err = c.CallTool(ctx, "work", map[string]any{"label": "after-close"})
	if err != nil || mcptask.FastLaneServed(p.fastTasks) == before {
		t.Fatalf("after the lane's session closed: %+v %v (on the lane: %v)", h, err, mcptask.FastLaneServed(p.fastTasks) > before)
	}
	got, err = c.WaitFor(ctx, h.TaskID, wiretest.Terminal)
	if err != nil || got.Status != "completed" || !strings.Contains(string(got.Result), "done after-close") {
		t.Fatalf("the task after the lane's session closed: %+v %v", got, err)
	}

	// A tool whose create waits for its work's external reference is
	// left to the go-sdk: its work's notifications meanwhile belong on
	// the call's own stream.
	before = mcptask.FastLaneServed(p.fastTasks)
	if _, err := c.CallTool(ctx, "awaits_ref", nil); err != nil {
		t.Fatal(err)
	}
	if mcptask.FastLaneServed(p.fastTasks) != before {
		t.Error("a tool with AwaitExternalRef was created on the fast lane")
	}
}

// registerRouted adds the tools the fast lane leaves to the go-sdk: one
// whose create waits for its work's external reference, and one whose
// input schema declares a parameter header, which the go-sdk checks
// against the request's headers.
func registerRouted(ts *mcptask.Server) {
	mcptask.AddTool(ts, &mcp.Tool{Name: "awaits_ref"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if tk := mcptask.FromContext(ctx); tk != nil {
			_ = tk.SetExternalRef(ctx, "job-1")
		}
		return text("started"), nil, nil
	}, mcptask.ToolOptions{Support: mcptask.Optional, AwaitExternalRef: time.Second})
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
	}}
	ts.AddRawTool(&mcp.Tool{Name: "routed", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("routed"), nil
	}, mcptask.ToolOptions{Support: mcptask.Optional})
}

// createCorpus25 is createCorpus on a 2025-11-25 session sid: calls with
// the task parameter (created on the lane), and calls that are not for
// the lane.
func createCorpus25(sid, owner string) []laneRequest {
	call := func(tool, args, extra string) string {
		return `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + extra + `}}`
	}
	var hdr map[string]string
	if owner != "" {
		hdr = map[string]string{"Authorization": "Bearer " + owner}
	}
	r := func(name, body string) laneRequest {
		return laneRequest{name: name, body: body, header: hdr, session: sid}
	}
	held := `{"label":"lane-create-held","millis":-1}`
	task := `,"task":{}`
	return []laneRequest{
		r("held task", call("work", held, task)),
		r("ttl", call("work", held, `,"task":{"ttl":60000}`)),
		r("required tool", call("only_task", held, task)),
		r("task before name", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"task":{},"name":"work","arguments":`+held+`}}`),
		r("bad task parameter", call("work", held, `,"task":5`)),
		r("idempotency key", call("work", held, task+`,"_meta":{"`+wire.MetaIdempotencyKey+`":"k1"}`)),
		r("idempotent retry", call("work", held, task+`,"_meta":{"`+wire.MetaIdempotencyKey+`":"k1"}`)),
		r("idempotency conflict", call("work", `{"label":"other","millis":-1}`, task+`,"_meta":{"`+wire.MetaIdempotencyKey+`":"k1"}`)),
		r("trace context", call("work", held, task+`,"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`)),
		r("string id", strings.Replace(call("work", held, task), `"id":9`, `"id":"nine"`, 1)),
		// Not for the lane.
		r("no task: a plain call", call("work", `{"label":"plain"}`, "")),
		r("required tool without task", call("only_task", held, "")),
		r("plain tool with task", call("plain", `{"label":"p"}`, task)),
		r("unknown tool", call("nope", `{}`, task)),
		r("params header tool", call("routed", `{"region":"eu"}`, task)),
		r("protocol version in _meta", call("work", held, task+`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}`)),
		r("notification", strings.Replace(call("work", held, task), `"id":9,`, ``, 1)),
	}
}

// TestFastLaneSameCreates2025 is TestFastLaneSameCreates on a 2025-11-25
// session: the two servers give their session the same ID.
func TestFastLaneSameCreates2025(t *testing.T) {
	for _, tc := range createCases {
		t.Run(tc.name, func(t *testing.T) {
			g := &gates{}
			ho := mcp.StreamableHTTPOptions{JSONResponse: tc.json}
			opts := mcptask.Options{Limits: tc.limits}
			fast := startLanePairSessions(t, g, opts, ho, tc.authn, laneSessionID)
			slow := startLanePairSessions(t, g, opts, ho, tc.authn, laneSessionID)
			t.Cleanup(func() { close(g.get("lane-create-held")); close(g.get("other")) })
			ctx := ctxT(t)
			owner := ""
			var hdr http.Header
			if tc.authn {
				owner = "alice"
				hdr = http.Header{"Authorization": {"Bearer alice"}}
			}
			for _, url := range []string{fast.fast, slow.slow} {
				s := &wiretest.Session{URL: url, Header: hdr}
				if _, err := s.Initialize(ctx); err != nil {
					t.Fatal(err)
				}
			}
			compareCreates(t, fast, slow, createCorpus25(laneSessionID, owner))
		})
	}
}

// compareCreates sends each request of corpus to the fast server of the
// pair fast and to the slow one of the pair slow (each pair on a store of
// its own), and compares their answers once task IDs and times are
// masked.
func compareCreates(t *testing.T, fast, slow *lanePair, corpus []laneRequest) {
	t.Helper()
	mask := func(s string) string {
		return laneTime.ReplaceAllString(laneTaskID.ReplaceAllString(s, "ID"), "TIME")
	}
	var lanes int
	for _, r := range corpus {
		before := mcptask.FastLaneServed(fast.fastTasks)
		a, b := r.send(t, fast.fast), r.send(t, slow.slow)
		if mcptask.FastLaneServed(fast.fastTasks) > before {
			lanes++
		}
		if mask(a) != mask(b) {
			t.Errorf("%s: the fast lane answered\n%s\n\nthe go-sdk answered\n%s", r.name, a, b)
		}
	}
	if lanes == 0 {
		t.Error("the fast lane created nothing")
	}
	t.Logf("%d calls answered on the fast lane", lanes)
	if n := mcptask.FastLaneServed(slow.slowTas); n != 0 {
		t.Errorf("the server without FastLane answered %d on the fast lane", n)
	}
}
