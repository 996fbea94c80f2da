package dashboard_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/dashboard"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// malloryToken signs in the operator mallory, who approves nothing.
const malloryToken = "mallory-operator-token-0123456789"

// gateEnv is the dashboard of a real mcptask.Server on SQLite (through
// ForServer) whose tool "deploy" takes an approval of ops or bob and
// whose tool "migrate" falls back to a handoff; requesters are named by
// their X-User header, operators by their dashboard token (adminToken:
// ops, malloryToken: mallory).
type gateEnv struct {
	*env // its srv is the dashboard's
	ts   *servertest.Server
}

// requesterOwner names a requester by its X-User header.
func requesterOwner(_ context.Context, req mcp.Request) task.Owner {
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		if u := ex.Header.Get("X-User"); u != "" {
			return task.UserOwner("", u)
		}
	}
	return task.AnonymousOwner("")
}

// gateInput is the arguments of the gate tests' tools.
type gateInput struct {
	Label string `json:"label"`
}

// newGateEnv starts the server and its dashboard.
func newGateEnv(t *testing.T) *gateEnv {
	t.Helper()
	ab := &syncBuffer{}
	work := func(_ context.Context, _ *mcp.CallToolRequest, in gateInput) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deployed " + in.Label}}}, nil, nil
	}
	s := servertest.Start(t, servertest.Options{
		Engine: engine.Options{Audit: audit.New(slog.New(slog.NewJSONHandler(ab, nil)))},
		Tasks:  mcptask.Options{Owner: requesterOwner},
		Register: func(ts *mcptask.Server) (func(), error) {
			mcptask.AddTool(ts, &mcp.Tool{Name: "deploy"}, work, mcptask.ToolOptions{Support: mcptask.Optional,
				Approval: &mcptask.Approval{Approvers: []string{"ops", "bob"}, Expires: time.Hour, Reason: "it deploys"}})
			mcptask.AddTool(ts, &mcp.Tool{Name: "migrate"}, work, mcptask.ToolOptions{Support: mcptask.Optional, Fallback: mcptask.DrainHandoff})
			return nil, nil
		},
	})
	d, err := dashboard.ForServer(s.Tasks, s.Store, dashboard.Options{
		Authenticate: func(_ *http.Request, tok string) (task.Owner, time.Time, bool) {
			switch tok {
			case adminToken:
				return task.UserOwner("", "ops"), time.Time{}, true
			case malloryToken:
				return task.UserOwner("", "mallory"), time.Time{}, true
			}
			return "", time.Time{}, false
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	mux := http.NewServeMux()
	mux.Handle("/dash/", http.StripPrefix("/dash", d))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return &gateEnv{env: &env{t: t, eng: s.Engine, dash: d, srv: hs, audit: ab}, ts: s}
}

// requester returns the MCP client of the requester user.
func (g *gateEnv) requester(user string) *wiretest.Client {
	return &wiretest.Client{URL: g.ts.URL, Tasks: true, Header: http.Header{"X-User": {user}}}
}

// call calls tool as user's task and returns its ID.
func (g *gateEnv) call(user, tool, label string) task.ID {
	g.t.Helper()
	tk, err := g.requester(user).CallTool(context.Background(), tool, map[string]any{"label": label})
	if err != nil || tk.ResultType != "task" || tk.TaskID == "" {
		g.t.Fatalf("calling %s: %+v %v", tool, tk, err)
	}
	return task.ID(tk.TaskID)
}

// wait waits until the task id has status s, and returns it.
func (g *gateEnv) wait(id task.ID, s task.Status) *task.Task {
	g.t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		changed := g.eng.Watch(id) // before the read: no change is missed
		tk, err := g.ts.Store.Get(context.Background(), id)
		if err == nil && tk.Status == s {
			return tk
		}
		select {
		case <-changed:
		case <-deadline.C:
			g.t.Fatalf("task %s did not become %s: %+v, %v", id, s, tk, err)
		}
	}
}

// get reads the task id from the store.
func (g *gateEnv) get(id task.ID) *task.Task {
	g.t.Helper()
	tk, err := g.ts.Store.Get(context.Background(), id)
	if err != nil {
		g.t.Fatal(err)
	}
	return tk
}

// signedIn returns a client signed in with tok, and the Approvals page
// as it sees it.
func (g *gateEnv) signedIn(tok string) (*http.Client, string) {
	g.t.Helper()
	c := g.client()
	resp, body := g.post(c, "/login", url.Values{"token": {tok}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		g.t.Fatalf("sign-in: %s\n%s", resp.Status, body)
	}
	resp, page := g.env.get(c, "/approvals")
	if resp.StatusCode != http.StatusOK {
		g.t.Fatalf("GET /approvals: %s\n%s", resp.Status, page)
	}
	return c, page
}

// TestApprovalsPage: the Approvals page, linked from the navigation,
// lists a task held for an approval (its link, tool, requester,
// approvers, expiry and arguments, escaped) with its Approve and Deny
// form, and a task held for a handoff with its outcome form; with none,
// it says so.
func TestApprovalsPage(t *testing.T) {
	g := newGateEnv(t)
	_, page := g.signedIn(adminToken)
	for _, want := range []string{`id="nav-approvals"`, "No task waits for an approval.", "No task waits for an operator's outcome.", "You decide as <strong>ops</strong>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the empty page lacks %q:\n%s", want, page)
		}
	}
	hostile := `<script>alert(1)</script>`
	deploy := g.call("alice", "deploy", hostile)
	if err := g.ts.Tasks.SetDrain(context.Background(), mcptask.DrainState{Tools: []string{"migrate"}}, "test", ""); err != nil {
		t.Fatal(err)
	}
	migrate := g.call("alice", "migrate", "by hand")
	_, page = g.signedIn(adminToken)
	row := func(page, id string) string {
		i := strings.Index(page, `id="`+id+`"`)
		if i < 0 {
			t.Fatalf("no row %s on the page:\n%s", id, page)
		}
		return page[i : i+strings.Index(page[i:], "</tr>")]
	}
	ar := row(page, "approval-"+string(deploy))
	for _, want := range []string{`href="./tasks/` + string(deploy) + `"`, ">deploy<", "user:/alice", "ops, bob", "in 59 min",
		`&lt;script&gt;alert(1)&lt;/script&gt;`, `action="./approvals/` + string(deploy) + `/decide"`,
		`name="approve" value="1"`, `name="approve" value="0"`, `name="reason"`} {
		if !strings.Contains(ar, want) {
			t.Errorf("the approval's row lacks %q:\n%s", want, ar)
		}
	}
	if strings.Contains(page, hostile) {
		t.Errorf("the arguments are not escaped:\n%s", ar)
	}
	// Shown without a request, the arguments' showing is audited.
	if a := g.audit.String(); !strings.Contains(a, `"event":"task.arguments_retrieved"`) || !strings.Contains(a, `"method":"dashboard/approvals"`) ||
		!strings.Contains(a, `"task":"`+string(deploy)+`"`) {
		t.Errorf("the audit trail does not record the arguments shown:\n%s", a)
	}
	hr := row(page, "handoff-"+string(migrate))
	for _, want := range []string{">migrate<", `action="./approvals/` + string(migrate) + `/handoff"`, `name="text"`, `name="failed"`, "Record"} {
		if !strings.Contains(hr, want) {
			t.Errorf("the handoff's row lacks %q:\n%s", want, hr)
		}
	}
	if strings.Contains(page, "No task waits") {
		t.Errorf("the page says none waits:\n%s", page)
	}
}

// TestApproveStartsTheWork: Approve starts the held task's work, which
// completes; the page says so; the decision is audited naming the
// operator; deciding it again the other way is the page's error, not a
// server error.
func TestApproveStartsTheWork(t *testing.T) {
	g := newGateEnv(t)
	id := g.call("alice", "deploy", "v2")
	c, page := g.signedIn(adminToken)
	resp, body := g.post(c, "/approvals/"+string(id)+"/decide", url.Values{"csrf": {csrf(t, page)}, "approve": {"1"}, "reason": {"ship it"}}, nil)
	want := "../../approvals?done=approved&task=" + string(id)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
		t.Fatalf("approve: %s Location %q, want %q\n%s", resp.Status, resp.Header.Get("Location"), want, body)
	}
	tk := g.wait(id, task.Completed)
	if !strings.Contains(string(tk.Result), "deployed v2") {
		t.Errorf("the approved task's result: %s", tk.Result)
	}
	_, page = g.env.get(c, "/approvals?done=approved&task="+string(id))
	if !strings.Contains(page, `id="flash"`) || !strings.Contains(page, "Task "+string(id)+" is approved: its work has started.") {
		t.Errorf("the page lacks the approval's flash:\n%s", page)
	}
	if !strings.Contains(page, "No task waits for an approval.") {
		t.Errorf("the approved task is still listed:\n%s", page)
	}
	if a := g.audit.String(); !strings.Contains(a, `"event":"task.gate"`) || !strings.Contains(a, `"principal":"ops"`) {
		t.Errorf("the audit trail does not record ops's approval:\n%s", a)
	}
	// Denying it now changes nothing, and says why.
	resp, body = g.post(c, "/approvals/"+string(id)+"/decide", url.Values{"csrf": {csrf(t, page)}, "approve": {"0"}}, nil)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, `id="error"`) || !strings.Contains(body, "no longer waiting for an approval") {
		t.Errorf("denying an approved task: %s\n%s", resp.Status, body)
	}
	if got := g.get(id); got.Status != task.Completed {
		t.Errorf("the refused denial changed the task: %s", got.Status)
	}
}

// TestDenyWithReason: Deny ends the held task failed, naming the
// operator and the reason, without running its work.
func TestDenyWithReason(t *testing.T) {
	g := newGateEnv(t)
	id := g.call("alice", "deploy", "v3")
	c, page := g.signedIn(adminToken)
	resp, body := g.post(c, "/approvals/"+string(id)+"/decide", url.Values{"csrf": {csrf(t, page)}, "approve": {"0"}, "reason": {"not this week"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "../../approvals?done=denied&task="+string(id) {
		t.Fatalf("deny: %s Location %q\n%s", resp.Status, resp.Header.Get("Location"), body)
	}
	tk := g.wait(id, task.Failed)
	if tk.StatusMessage != "denied by ops: not this week" || tk.Error == nil || !strings.Contains(string(tk.Error.Data), `"detail":"not this week"`) {
		t.Errorf("the denied task: %q %+v", tk.StatusMessage, tk.Error)
	}
	if tk.Attempts != 0 {
		t.Errorf("the denied task's work ran (%d attempts)", tk.Attempts)
	}
	_, page = g.env.get(c, "/approvals?done=denied&task="+string(id))
	if !strings.Contains(page, "Task "+string(id)+" is denied") {
		t.Errorf("the page lacks the denial's flash:\n%s", page)
	}
}

// TestNotAnApprover: an operator who is not an approver, or who made
// the call, gets the page's error saying why (not a server error), and
// the task stays held.
func TestNotAnApprover(t *testing.T) {
	g := newGateEnv(t)
	id := g.call("alice", "deploy", "v4")
	c, page := g.signedIn(malloryToken)
	if !strings.Contains(page, "You decide as <strong>mallory</strong>") {
		t.Errorf("the page does not name mallory:\n%s", page)
	}
	resp, body := g.post(c, "/approvals/"+string(id)+"/decide", url.Values{"csrf": {csrf(t, page)}, "approve": {"1"}}, nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `id="error"`) ||
		!strings.Contains(body, "mallory is not an approver of deploy (approvers: ops, bob)") {
		t.Fatalf("mallory's approval: %s\n%s", resp.Status, body)
	}
	// The page answered at the action's URL still links right, and still
	// lists the task with its form.
	if !strings.Contains(body, `action="../../approvals/`+string(id)+`/decide"`) || !strings.Contains(body, `href="../../static/app.css"`) {
		t.Errorf("the error page's links are not relative to the action's URL:\n%s", body)
	}
	// ops made this call: it may not approve it either.
	own := g.call("ops", "deploy", "mine")
	c, page = g.signedIn(adminToken)
	resp, body = g.post(c, "/approvals/"+string(own)+"/decide", url.Values{"csrf": {csrf(t, page)}, "approve": {"1"}}, nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "ops made this call and may not approve it") {
		t.Fatalf("a self-approval: %s\n%s", resp.Status, body)
	}
	for _, tid := range []task.ID{id, own} {
		if tk := g.get(tid); tk.Status != task.Working || tk.Attempts != 0 || !strings.HasPrefix(tk.StatusMessage, "waiting for approval") {
			t.Errorf("a refused approval changed task %s: %s %q", tid, tk.Status, tk.StatusMessage)
		}
	}
	// An unknown task.
	resp, body = g.post(c, "/approvals/no-such-task/decide", url.Values{"csrf": {csrf(t, page)}, "approve": {"1"}}, nil)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "no task no-such-task") {
		t.Errorf("an unknown task: %s\n%s", resp.Status, body)
	}
}

// TestRecordHandoff: the outcome recorded on the page becomes the
// handed-off task's result (or, checked failed, its failure), once.
func TestRecordHandoff(t *testing.T) {
	g := newGateEnv(t)
	if err := g.ts.Tasks.SetDrain(context.Background(), mcptask.DrainState{Tools: []string{"migrate"}}, "test", ""); err != nil {
		t.Fatal(err)
	}
	ok, bad := g.call("alice", "migrate", "one"), g.call("alice", "migrate", "two")
	c, page := g.signedIn(adminToken)
	tok := csrf(t, page)
	resp, body := g.post(c, "/approvals/"+string(ok)+"/handoff", url.Values{"csrf": {tok}, "text": {"  "}}, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "say what the outcome is") {
		t.Errorf("an empty outcome: %s\n%s", resp.Status, body)
	}
	resp, body = g.post(c, "/approvals/"+string(ok)+"/handoff", url.Values{"csrf": {tok}, "text": {"migrated by hand: 12 rows"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "../../approvals?done=handoff&task="+string(ok) {
		t.Fatalf("record: %s Location %q\n%s", resp.Status, resp.Header.Get("Location"), body)
	}
	tk := g.wait(ok, task.Completed)
	if !strings.Contains(string(tk.Result), "migrated by hand: 12 rows") || tk.StatusMessage != "outcome recorded by hand by ops" {
		t.Errorf("the handed-off task: %q %s", tk.StatusMessage, tk.Result)
	}
	resp, body = g.post(c, "/approvals/"+string(bad)+"/handoff", url.Values{"csrf": {tok}, "text": {"the table is locked"}, "failed": {"1"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "../../approvals?done=handoff_failed&task="+string(bad) {
		t.Fatalf("record a failure: %s Location %q\n%s", resp.Status, resp.Header.Get("Location"), body)
	}
	if tk := g.wait(bad, task.Failed); tk.Error == nil || tk.Error.Message != "the table is locked" {
		t.Errorf("the failed handoff: %+v", tk.Error)
	}
	_, page = g.env.get(c, "/approvals?done=handoff&task="+string(ok))
	if !strings.Contains(page, "The outcome of task "+string(ok)+" is recorded: it completed") || !strings.Contains(page, "No task waits for an operator's outcome.") {
		t.Errorf("the page after the handoffs:\n%s", page)
	}
	// Twice: the page's error names the outcome already recorded.
	resp, body = g.post(c, "/approvals/"+string(ok)+"/handoff", url.Values{"csrf": {tok}, "text": {"again"}}, nil)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "not waiting for a handoff") {
		t.Errorf("recording twice: %s\n%s", resp.Status, body)
	}
}

// TestApprovalActionsNeedCSRF: a decision or a handoff without the
// session's anti-CSRF token, or from another site, is refused and
// changes nothing.
func TestApprovalActionsNeedCSRF(t *testing.T) {
	g := newGateEnv(t)
	id := g.call("alice", "deploy", "v5")
	if err := g.ts.Tasks.SetDrain(context.Background(), mcptask.DrainState{Tools: []string{"migrate"}}, "test", ""); err != nil {
		t.Fatal(err)
	}
	ho := g.call("alice", "migrate", "x")
	c, page := g.signedIn(adminToken)
	for _, tc := range []struct {
		name, path string
		form       url.Values
		hdr        map[string]string
	}{
		{"approve without a token", "/approvals/" + string(id) + "/decide", url.Values{"approve": {"1"}}, nil},
		{"deny with a wrong token", "/approvals/" + string(id) + "/decide", url.Values{"approve": {"0"}, "csrf": {"forged"}}, nil},
		{"approve from another site", "/approvals/" + string(id) + "/decide", url.Values{"approve": {"1"}, "csrf": {csrf(t, page)}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"handoff without a token", "/approvals/" + string(ho) + "/handoff", url.Values{"text": {"done"}}, nil},
	} {
		if resp, _ := g.post(c, tc.path, tc.form, tc.hdr); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s; want 403", tc.name, resp.Status)
		}
	}
	if tk := g.get(id); tk.Status != task.Working || !strings.HasPrefix(tk.StatusMessage, "waiting for approval") {
		t.Errorf("a refused action decided the approval: %s %q", tk.Status, tk.StatusMessage)
	}
	if tk := g.get(ho); tk.Status != task.Working {
		t.Errorf("a refused action recorded the handoff: %s %q", tk.Status, tk.StatusMessage)
	}
}

// TestNoGates: without Options.Gates there is no Approvals page, nor a
// link to it.
func TestNoGates(t *testing.T) {
	e := newEnv(t, false, nil)
	c := e.client()
	_, page := e.get(c, "/")
	if strings.Contains(page, "nav-approvals") {
		t.Errorf("the navigation links to the Approvals page of a dashboard without gates")
	}
	if resp, _ := e.get(c, "/approvals"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /approvals: %s; want 404", resp.Status)
	}
	if resp, _ := e.post(c, "/approvals/abc/decide", url.Values{"csrf": {csrf(t, page)}, "approve": {"1"}}, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST decide: %s; want 404", resp.Status)
	}
}

// TestToolsPageFleet: the Tools page shows each tool's canary and
// rollback (its fallback and its reconciliation's counts) from the
// fleet's switches, and who drained a tool, when and why, next to its
// drain switch.
func TestToolsPageFleet(t *testing.T) {
	g := newGateEnv(t)
	ctx := context.Background()
	c, _ := g.signedIn(adminToken)
	_, page := g.env.get(c, "/tools")
	for _, want := range []string{`id="canaries"`, "No canary", `id="rollbacks"`, "No tool is rolled back."} {
		if !strings.Contains(page, want) {
			t.Errorf("the Tools page lacks %q:\n%s", want, page)
		}
	}
	if err := g.ts.Tasks.SetCanary(ctx, "deploy", &mcptask.Canary{Percent: 25, Tenants: []string{"acme"}, Principals: []string{"alice", "<b>eve</b>"}}, "admin", task.UserOwner("", "bob"), "canary 1"); err != nil {
		t.Fatal(err)
	}
	if err := g.ts.Tasks.SetDrain(ctx, mcptask.DrainState{Tools: []string{"deploy"}, Reason: "incident 7"}, "admin", task.UserOwner("", "carol")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.ts.Tasks.Rollback(ctx, "migrate", "admin", task.UserOwner("", "dave"), "bad release"); err != nil {
		t.Fatal(err)
	}
	_, page = g.env.get(c, "/tools")
	section := func(id string) string {
		i := strings.Index(page, `id="`+id+`"`)
		if i < 0 {
			t.Fatalf("no %s on the Tools page:\n%s", id, page)
		}
		return page[i : i+strings.Index(page[i:], "</tr>")]
	}
	cr := section("canary-deploy")
	for _, want := range []string{"25%", "acme", "alice, &lt;b&gt;eve&lt;/b&gt;", "admin:bob", "canary 1"} {
		if !strings.Contains(cr, want) {
			t.Errorf("the canary's row lacks %q:\n%s", want, cr)
		}
	}
	rr := section("rollback-migrate")
	for _, want := range []string{">handoff<", "admin:dave", "bad release", `<td class="num" title="">0</td>`} {
		if !strings.Contains(rr, want) {
			t.Errorf("the rollback's row lacks %q:\n%s", want, rr)
		}
	}
	tr := section("tool-deploy")
	for _, want := range []string{"drained", "drained by admin:carol, just now: incident 7", "canary 25%", `href="#canary-deploy"`} {
		if !strings.Contains(tr, want) {
			t.Errorf("deploy's row lacks %q:\n%s", want, tr)
		}
	}
	if mr := section("tool-migrate"); !strings.Contains(mr, "rolled back: handoff") {
		t.Errorf("migrate's row lacks its rollback:\n%s", mr)
	}
}
