package mcptask_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lanePair is two servers on one store: the same tools, options and
// handler options, one with the fast lane and one without; and a third,
// without limits, that creates the tasks they read, so that the two see
// only the requests of the comparison.
type lanePair struct {
	fast, slow, setup  string // URLs
	fastTasks, slowTas *mcptask.Server
	fastHandler        http.Handler // the fast server's Server.Handler
}

// startLanePair starts a lanePair on a new SQLite file. With authn, the
// handlers require a bearer token: "Bearer alice" and "Bearer bob" are
// two users.
func startLanePair(t *testing.T, g *gates, opts mcptask.Options, ho mcp.StreamableHTTPOptions, authn bool) *lanePair {
	return startLanePairSessions(t, g, opts, ho, authn, "")
}

// startLanePairSessions is startLanePair whose servers give every
// 2025-11-25 session the ID sid (when not ""): a session opened on each
// has the same ID, so the same anonymous owner, and the same answers.
func startLanePairSessions(t *testing.T, g *gates, opts mcptask.Options, ho mcp.StreamableHTTPOptions, authn bool, sid string) *lanePair {
	t.Helper()
	db := filepath.Join(t.TempDir(), "tasks.db")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var fastHandler http.Handler
	start := func(disable bool, opts mcptask.Options) (string, *mcptask.Server) {
		st, err := sqlite.Open(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		eng, err := engine.New(engine.Options{Store: st, Logger: logger, MaxResultBytes: 64 << 10, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		so := &mcp.ServerOptions{Logger: logger}
		if sid != "" {
			so.GetSessionID = func() string { return sid }
		}
		srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, so)
		o := opts
		o.Logger = logger
		o.FastLane = !disable
		ts, err := mcptask.New(srv, eng, &o)
		if err != nil {
			t.Fatal(err)
		}
		registerTestTools(ts, g)
		registerChatty(ts, g)
		registerRouted(ts)
		mcptask.AddTool(ts, &mcp.Tool{Name: "brief", Description: "kept 300 ms"},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return text("brief"), nil, nil
			}, mcptask.ToolOptions{Support: mcptask.Optional, MaxTTL: 300 * time.Millisecond})
		if err := ts.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		h := ts.Handler(&ho)
		if !disable {
			fastHandler = h
		}
		if authn {
			verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
				switch token {
				case "alice", "bob":
					return &auth.TokenInfo{UserID: token, Expiration: time.Now().Add(time.Hour)}, nil
				}
				return nil, auth.ErrInvalidToken
			}
			h = auth.RequireBearerToken(verify, nil)(h)
		}
		hs := httptest.NewServer(h)
		t.Cleanup(func() {
			hs.CloseClientConnections()
			hs.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = ts.Close(ctx)
			_ = st.Close()
		})
		return hs.URL, ts
	}
	p := &lanePair{}
	p.setup, _ = start(true, mcptask.Options{})
	p.fast, p.fastTasks = start(false, opts)
	p.slow, p.slowTas = start(true, opts)
	p.fastHandler = fastHandler
	return p
}

// laneRequest is one request of the corpus, sent as is.
type laneRequest struct {
	name   string
	body   string
	header map[string]string // "" deletes a default header
	host   string
	// session, when not "", makes it a request of that 2025-11-25
	// session (the default headers are then that wire's).
	session string
}

// send sends r to url and returns the parts of the answer compared:
// status, the headers the go-sdk sets (and those of the HTTP framing),
// and the body.
func (r laneRequest) send(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if r.session != "" {
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Mcp-Session-Id", r.session)
	} else {
		req.Header.Set("Mcp-Protocol-Version", ext2026.Version)
		req.Header.Set("Mcp-Method", "tasks/get")
	}
	for k, v := range r.header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	if r.host != "" {
		req.Host = r.host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d\n", resp.StatusCode)
	for _, k := range []string{"Content-Type", "Cache-Control", "Connection", "Content-Length", "Allow", "Www-Authenticate", "X-Content-Type-Options"} {
		fmt.Fprintf(&b, "%s: %q\n", k, resp.Header.Values(k))
	}
	fmt.Fprintf(&b, "Transfer-Encoding: %q\n\n%s", resp.TransferEncoding, body)
	return b.String()
}

// retryMillis matches the times to retry of a refusal by the request
// rate, which depend on when each server received the request.
var retryMillis = regexp.MustCompile(`(retry in |"retryAfterMs":)\d+`)

// laneMeta is the _meta of the corpus's requests, with the tasks
// extension declared.
const laneMeta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"lane","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// corpus returns the tasks/get requests of the comparison, for the tasks
// named in ids (by kind) and the token of their owner (none: "").
func corpus(ids map[string]string, owner, other string) []laneRequest {
	get := func(id string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"` + id + `","_meta":` + laneMeta + `}}`
	}
	withName := func(id string, h map[string]string) map[string]string {
		out := map[string]string{"Mcp-Name": id}
		if owner != "" {
			out["Authorization"] = "Bearer " + owner
		}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	done := ids["completed"]
	var rs []laneRequest
	for _, kind := range []string{"completed", "failed", "input_required", "working", "operation", "logs", "expired", "tool_error"} {
		rs = append(rs, laneRequest{name: kind, body: get(ids[kind]), header: withName(ids[kind], nil)})
	}
	unknown := string(task.NewID())
	rs = append(rs,
		laneRequest{name: "unknown task", body: get(unknown), header: withName(unknown, nil)},
		laneRequest{name: "invalid task ID", body: get("../x"), header: withName("../x", nil)},
		laneRequest{name: "string id", body: strings.Replace(get(done), `"id":7`, `"id":"seven"`, 1), header: withName(done, nil)},
		laneRequest{name: "no id", body: strings.Replace(get(done), `"id":7,`, ``, 1), header: withName(done, nil)},
		laneRequest{name: "missing Mcp-Name", body: get(done), header: withName(done, map[string]string{"Mcp-Name": ""})},
		laneRequest{name: "wrong Mcp-Name", body: get(done), header: withName(done, map[string]string{"Mcp-Name": unknown})},
		laneRequest{name: "Mcp-Name with spaces", body: get(done), header: withName(done, map[string]string{"Mcp-Name": " " + done + " "})},
		laneRequest{name: "missing Mcp-Method", body: get(done), header: withName(done, map[string]string{"Mcp-Method": ""})},
		laneRequest{name: "other Mcp-Method", body: get(done), header: withName(done, map[string]string{"Mcp-Method": "tasks/cancel"})},
		laneRequest{name: "no _meta", body: `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"` + done + `"}}`, header: withName(done, nil)},
		laneRequest{name: "no capability", body: strings.Replace(get(done), `"extensions":{"io.modelcontextprotocol/tasks":{}}`, ``, 1), header: withName(done, nil)},
		laneRequest{name: "no clientCapabilities", body: strings.Replace(get(done), `,"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, ``, 1), header: withName(done, nil)},
		laneRequest{name: "bad clientCapabilities", body: strings.Replace(get(done), `"extensions":{"io.modelcontextprotocol/tasks":{}}`, `"extensions":5`, 1), header: withName(done, nil)},
		laneRequest{name: "bad clientInfo", body: strings.Replace(get(done), `{"name":"lane","version":"1"}`, `"lane"`, 1), header: withName(done, nil)},
		laneRequest{name: "other _meta version", body: strings.Replace(get(done), `"protocolVersion":"2026-07-28"`, `"protocolVersion":"2026-07-29"`, 1), header: withName(done, nil)},
		laneRequest{name: "trace context", body: strings.Replace(get(done), `"_meta":{`, `"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",`, 1), header: withName(done, nil)},
		laneRequest{name: "requestState and unknown fields", body: strings.Replace(get(done), `"params":{`, `"params":{"requestState":"abc","zzz":[1,{"a":null}],`, 1), header: withName(done, nil)},
		laneRequest{name: "taskId a number", body: `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":5,"_meta":` + laneMeta + `}}`, header: withName("5", nil)},
		laneRequest{name: "taskId case", body: `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"TaskId":"` + done + `","_meta":` + laneMeta + `}}`, header: withName(done, nil)},
		laneRequest{name: "params an array", body: `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":[]}`, header: withName(done, nil)},
		laneRequest{name: "params null", body: `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":null}`, header: withName(done, nil)},
		laneRequest{name: "no params", body: `{"jsonrpc":"2.0","id":7,"method":"tasks/get"}`, header: withName(done, nil)},
		laneRequest{name: "not JSON", body: `{"jsonrpc":`, header: withName(done, nil)},
		laneRequest{name: "empty body", body: ``, header: withName(done, nil)},
		laneRequest{name: "batch", body: `[` + get(done) + `]`, header: withName(done, nil)},
		laneRequest{name: "leading space", body: "  \n" + get(done), header: withName(done, nil)},
		laneRequest{name: "Accept json only", body: get(done), header: withName(done, map[string]string{"Accept": "application/json"})},
		laneRequest{name: "Accept */*", body: get(done), header: withName(done, map[string]string{"Accept": "*/*"})},
		laneRequest{name: "Content-Type text", body: get(done), header: withName(done, map[string]string{"Content-Type": "text/plain"})},
		laneRequest{name: "Content-Type charset", body: get(done), header: withName(done, map[string]string{"Content-Type": "application/json; charset=utf-8"})},
		laneRequest{name: "Last-Event-ID", body: get(done), header: withName(done, map[string]string{"Last-Event-ID": "x_1"})},
		laneRequest{name: "foreign Host", body: get(done), header: withName(done, nil), host: "evil.example"},
		laneRequest{name: "other protocol version header", body: get(done), header: withName(done, map[string]string{"Mcp-Protocol-Version": "2026-07-29"})},
		laneRequest{name: "fractional id", body: strings.Replace(get(done), `"id":7`, `"id":7.5`, 1), header: withName(done, nil)},
		laneRequest{name: "null id", body: strings.Replace(get(done), `"id":7`, `"id":null`, 1), header: withName(done, nil)},
		laneRequest{name: "object id", body: strings.Replace(get(done), `"id":7`, `"id":{}`, 1), header: withName(done, nil)},
		laneRequest{name: "jsonrpc 1.0", body: strings.Replace(get(done), `"2.0"`, `"1.0"`, 1), header: withName(done, nil)},
		laneRequest{name: "method not a string", body: strings.Replace(get(done), `"method":"tasks/get"`, `"method":5`, 1), header: withName(done, nil)},
		laneRequest{name: "escaped method", body: strings.Replace(get(done), `"method":"tasks/get"`, `"method":"tasks\/get"`, 1), header: withName(done, nil)},
		laneRequest{name: "duplicate taskId", body: strings.Replace(get(done), `"params":{`, `"params":{"taskId":"`+unknown+`",`, 1), header: withName(done, nil)},
		laneRequest{name: "trailing garbage", body: get(done) + ` x`, header: withName(done, nil)},
		laneRequest{name: "trailing value", body: get(done) + ` {}`, header: withName(done, nil)},
		laneRequest{name: "Method key case", body: strings.Replace(get(done), `"method":"tasks/get"`, `"METHOD":"tasks/get"`, 1), header: withName(done, nil)},
		laneRequest{name: "_meta key case", body: strings.Replace(get(done), `"_meta":`, `"_META":`, 1), header: withName(done, nil)},
		laneRequest{name: "HTML in id", body: strings.Replace(get(done), `"id":7`, `"id":"<a&b>"`, 1), header: withName(done, nil)},
	)
	// The other methods of the lane, on requests whose answers do not
	// depend on which server answers first.
	call := func(method, id, extra string) string {
		return `{"jsonrpc":"2.0","id":8,"method":"` + method + `","params":{"taskId":"` + id + `"` + extra + `,"_meta":` + laneMeta + `}}`
	}
	method := func(m, id string) map[string]string { return withName(id, map[string]string{"Mcp-Method": m}) }
	rs = append(rs,
		laneRequest{name: "cancel completed", body: call("tasks/cancel", done, ""), header: method("tasks/cancel", done)},
		laneRequest{name: "cancel unknown", body: call("tasks/cancel", unknown, ""), header: method("tasks/cancel", unknown)},
		laneRequest{name: "cancel wrong Mcp-Name", body: call("tasks/cancel", done, ""), header: method("tasks/cancel", unknown)},
		laneRequest{name: "update completed", body: call("tasks/update", done, `,"inputResponses":{"k":{"action":"decline"}}`), header: method("tasks/update", done)},
		laneRequest{name: "update unknown key", body: call("tasks/update", ids["input_required"], `,"inputResponses":{"nokey":{"action":"decline"}}`), header: method("tasks/update", ids["input_required"])},
		laneRequest{name: "update unknown task", body: call("tasks/update", unknown, `,"inputResponses":{}`), header: method("tasks/update", unknown)},
		laneRequest{name: "update bad inputResponses", body: call("tasks/update", done, `,"inputResponses":5`), header: method("tasks/update", done)},
		laneRequest{name: "update no capability", body: strings.Replace(call("tasks/update", done, `,"inputResponses":{}`), `"extensions":{"io.modelcontextprotocol/tasks":{}}`, ``, 1), header: method("tasks/update", done)},
		laneRequest{name: "delete working", body: call("tasks/delete", ids["working"], ""), header: method("tasks/delete", ids["working"])},
		laneRequest{name: "delete unknown", body: call("tasks/delete", unknown, ""), header: method("tasks/delete", unknown)},
		laneRequest{name: "delete invalid ID", body: call("tasks/delete", "../x", ""), header: method("tasks/delete", "../x")},
	)
	if other != "" {
		rs = append(rs,
			laneRequest{name: "cancel other owner's", body: call("tasks/cancel", ids["working"], ""), header: withName(ids["working"], map[string]string{"Mcp-Method": "tasks/cancel", "Authorization": "Bearer " + other})},
			laneRequest{name: "delete other owner's", body: call("tasks/delete", done, ""), header: withName(done, map[string]string{"Mcp-Method": "tasks/delete", "Authorization": "Bearer " + other})},
			laneRequest{name: "other owner's task", body: get(done), header: withName(done, map[string]string{"Authorization": "Bearer " + other})},
			laneRequest{name: "no token", body: get(done), header: withName(done, map[string]string{"Authorization": ""})},
			laneRequest{name: "bad token", body: get(done), header: withName(done, map[string]string{"Authorization": "Bearer mallory"})},
		)
	}
	return rs
}

// laneCase is one configuration of a fast-lane comparison.
type laneCase struct {
	name   string
	authn  bool
	json   bool
	limits mcptask.Limits
}

// laneCases are the configurations of the comparisons: without and with
// authentication, SSE and JSON answers, and a request rate that lets
// burst requests through and refuses the rest.
func laneCases(burst int) []laneCase {
	return []laneCase{
		{name: "anonymous"},
		{name: "anonymous json", json: true},
		{name: "authn", authn: true},
		{name: "authn json", authn: true, json: true},
		{name: "limited", authn: true, limits: mcptask.Limits{RequestRate: 0.001, RequestBurst: burst}},
	}
}

// TestFastLaneSameAnswers sends a corpus of tasks/get requests to two
// servers on one store, one with the fast lane and one without, over
// loopback HTTP, and compares the answers byte for byte: status, headers
// and body. It does so without and with authentication, with SSE and
// with JSON answers, and with the limits on (the request rate refusing
// some requests, the poll interval raised).
func TestFastLaneSameAnswers(t *testing.T) {
	for _, tc := range laneCases(30) {
		t.Run(tc.name, func(t *testing.T) {
			g := &gates{}
			p := startLanePair(t, g, mcptask.Options{Limits: tc.limits}, mcp.StreamableHTTPOptions{JSONResponse: tc.json}, tc.authn)
			owner, other := "", ""
			c := &wiretest.Client{URL: p.setup, Tasks: true}
			if tc.authn {
				owner, other = "alice", "bob"
				c.Header = http.Header{"Authorization": {"Bearer alice"}}
			}
			ids := laneTasks(t, c, g)
			rs := corpus(ids, owner, other)
			if tc.limits.RequestRate > 0 {
				// Past the burst: the rest are refused.
				rs = append(rs, rs...)
			}
			for _, r := range rs {
				fast, slow := r.send(t, p.fast), r.send(t, p.slow)
				if tc.limits.RequestRate > 0 {
					fast, slow = retryMillis.ReplaceAllString(fast, "${1}N"), retryMillis.ReplaceAllString(slow, "${1}N")
				}
				if fast != slow {
					t.Errorf("%s: the fast lane answered\n%s\n\nthe go-sdk answered\n%s", r.name, fast, slow)
				}
			}
			if n := mcptask.FastLaneServed(p.fastTasks); n == 0 {
				t.Error("the fast lane answered nothing")
			} else {
				t.Logf("%d of %d requests on the fast lane", n, len(rs))
			}
			if n := mcptask.FastLaneServed(p.slowTas); n != 0 {
				t.Errorf("the server without FastLane answered %d on the fast lane", n)
			}
		})
	}
}

// laneTasks creates, through c, a task of each kind the corpus reads, and
// returns their IDs by kind.
func laneTasks(t *testing.T, c *wiretest.Client, g *gates) map[string]string {
	t.Helper()
	ctx := ctxT(t)
	ids := map[string]string{}
	start := func(kind, tool string, args map[string]any) string {
		h, err := c.CallTool(ctx, tool, args)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		ids[kind] = h.TaskID
		return h.TaskID
	}
	wait := func(kind string, cond func(*wiretest.Task) bool) {
		if _, err := c.WaitFor(ctx, ids[kind], cond); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
	}
	start("expired", "brief", nil)
	start("completed", "work", map[string]any{"label": "c"})
	start("failed", "rpc_error", nil)
	start("tool_error", "tool_error", nil)
	start("input_required", "ask", nil)
	t.Cleanup(func() {
		close(g.get("lane-working"))
		close(g.get("lane-chatty"))
	})
	start("working", "work", map[string]any{"label": "lane-working", "millis": -1})
	start("operation", "records_op", map[string]any{"label": "op"})
	start("logs", "chatty", map[string]any{"label": "lane-chatty"})
	// (The brief task is not waited for: it may have expired already.)
	for _, kind := range []string{"completed", "failed", "tool_error", "operation"} {
		wait(kind, wiretest.Terminal)
	}
	wait("input_required", func(tk *wiretest.Task) bool { return tk.Status == "input_required" })
	wait("working", func(tk *wiretest.Task) bool { return tk.StatusMessage != "" })
	// The log lines reach the store within the engine's flush interval.
	for {
		res, err := c.Call(ctx, "tasks/get", map[string]any{"taskId": ids["logs"]}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(res.Result, []byte(`"last":3`)) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal(errors.New("the log never had 3 lines"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The brief task's retention (300 ms) is over.
	time.Sleep(400 * time.Millisecond)
	return ids
}

// TestFastLaneOffWithOwner: a server with its own Owner function has no
// fast lane (Owner may look at the request's session, which the lane does
// not make); its answers are the go-sdk's.
func TestFastLaneOffWithOwner(t *testing.T) {
	g := &gates{}
	owner := func(context.Context, mcp.Request) task.Owner { return task.TokenOwner("carol") }
	p := startLanePair(t, g, mcptask.Options{Owner: owner}, mcp.StreamableHTTPOptions{}, false)
	c := &wiretest.Client{URL: p.fast, Tasks: true}
	ctx := ctxT(t)
	h, err := c.CallTool(ctx, "work", map[string]any{"label": "owner"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal); err != nil {
		t.Fatal(err)
	}
	if n := mcptask.FastLaneServed(p.fastTasks); n != 0 {
		t.Errorf("a server with an Owner function answered %d requests on the fast lane", n)
	}
}
