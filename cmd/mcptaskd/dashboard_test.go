package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// dashClient is a browser-like client of mcptaskd's dashboard: a cookie
// jar, same-origin form posts, redirects not followed.
type dashClient struct {
	t    *testing.T
	base string // the server's URL
	c    *http.Client
}

func newDashClient(t *testing.T, base string) *dashClient {
	jar, _ := cookiejar.New(nil)
	return &dashClient{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (d *dashClient) do(method, path string, form url.Values) (*http.Response, string) {
	d.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, d.base+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	resp, err := d.c.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var dashCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (d *dashClient) csrf(page string) string {
	d.t.Helper()
	m := dashCSRF.FindStringSubmatch(page)
	if m == nil {
		d.t.Fatalf("no anti-CSRF token in the page")
	}
	return m[1]
}

// TestDashboard: mcptaskd's dashboard admits the admin token and
// admin-scoped tokens only; it shows every owner's tasks with counts that
// match /metrics; an operator cancels a user's task and drains a tool
// from it, and the user sees both over MCP.
func TestDashboard(t *testing.T) {
	t.Parallel()
	const adminTok, aliceTok, bobTok = "admin-token-0123456789abcdef", "alice-token-0123456789abcdef", "bob-token-0123456789abcdefgh"
	tokens := writeTokens(t,
		map[string]any{"token": adminTok, "principal": "root", "tenant": "ops", "scopes": []string{"mcptask:admin"}},
		map[string]any{"token": aliceTok, "principal": "alice", "tenant": "acme", "scopes": []string{"tasks"}},
		map[string]any{"token": bobTok, "principal": "bob", "tenant": "acme", "scopes": []string{"tasks"}})
	app, base := serveAppOf(t, nil, "-db", filepath.Join(t.TempDir(), "tasks.db"), "-tokens", tokens)
	t.Cleanup(app.dashboard.Close)
	hs := struct{ URL string }{base}
	alice := &wiretest.Client{URL: hs.URL + "/mcp", Tasks: true, Header: http.Header{"Authorization": {"Bearer " + aliceTok}}}
	bob := &wiretest.Client{URL: hs.URL + "/mcp", Tasks: true, Header: http.Header{"Authorization": {"Bearer " + bobTok}}}
	long := map[string]any{"n": 100000, "steps": 1000, "step_delay_ms": 50}
	a1 := startTask(t, alice, "long_computation", long)
	b1 := startTask(t, bob, "long_computation", map[string]any{"n": 1000, "steps": 1, "step_delay_ms": 0})
	waitTask(t, bob, b1, 30*time.Second, "bob's task completed", func(tk *wiretest.Task) bool { return tk.Status == "completed" })

	d := newDashClient(t, hs.URL)
	if resp, _ := d.do(http.MethodGet, "/dashboard", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "./dashboard/" {
		t.Errorf("/dashboard: %s %q", resp.Status, resp.Header.Get("Location"))
	}
	if resp, _ := d.do(http.MethodGet, "/dashboard/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the dashboard without sign-in: %s", resp.Status)
	}
	if resp, _ := d.do(http.MethodPost, "/dashboard/login", url.Values{"token": {aliceTok}}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("sign-in with a token without the admin scope: %s", resp.Status)
	}
	if resp, _ := d.do(http.MethodPost, "/dashboard/login", url.Values{"token": {adminTok}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in with the admin-scoped token: %s", resp.Status)
	}
	_, list := d.do(http.MethodGet, "/dashboard/", nil)
	for _, want := range []string{"row-" + a1, "row-" + b1, "user:acme/alice", "user:acme/bob",
		`data-status="working">working <strong>1</strong>`, `data-status="completed">completed <strong>1</strong>`} {
		if !strings.Contains(list, want) {
			t.Errorf("the list lacks %q", want)
		}
	}
	// /metrics counts what the dashboard counts.
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+adminTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`(?m)^mcptask_tasks\{[^}]*status="working"[^}]*tool="long_computation"[^}]*\} 1$`).Match(m) {
		t.Errorf("/metrics does not count the one working task the dashboard shows:\n%s", grepLines(string(m), "mcptask_tasks{"))
	}

	// Cancel alice's task from its page.
	_, page := d.do(http.MethodGet, "/dashboard/tasks/"+a1, nil)
	if !strings.Contains(page, `id="task-owner">user:acme/alice<`) || !strings.Contains(page, "created") {
		t.Errorf("the task page lacks its owner or timeline")
	}
	if resp, _ := d.do(http.MethodPost, "/dashboard/tasks/"+a1+"/cancel", url.Values{"csrf": {d.csrf(page)}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel: %s", resp.Status)
	}
	tk := waitTask(t, alice, a1, 30*time.Second, "alice's task cancelled", func(tk *wiretest.Task) bool { return tk.Status == "cancelled" })
	if tk.StatusMessage != "The task was cancelled by an operator." {
		t.Errorf("alice sees %q", tk.StatusMessage)
	}

	// Drain long_computation from the list, then open it again.
	_, list = d.do(http.MethodGet, "/dashboard/", nil)
	if resp, _ := d.do(http.MethodPost, "/dashboard/drain", url.Values{"csrf": {d.csrf(list)}, "tool": {"long_computation"}, "drained": {"on"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("drain: %s", resp.Status)
	}
	if !drainRefused(t, alice, "long_computation", long) {
		t.Fatal("the tool drained from the dashboard still takes tasks")
	}
	r := adminDo(t, hs.URL, http.MethodGet, adminTok, nil, nil)
	if len(r.state.Tools) != 1 || r.state.Tools[0] != "long_computation" || r.state.By != "admin:ops/root" {
		t.Errorf("/admin/drain after the dashboard's drain: %+v", r.state)
	}
	_, list = d.do(http.MethodGet, "/dashboard/", nil)
	if resp, _ := d.do(http.MethodPost, "/dashboard/drain", url.Values{"csrf": {d.csrf(list)}, "tool": {"long_computation"}, "drained": {"off"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("undrain: %s", resp.Status)
	}
	if drainRefused(t, alice, "long_computation", map[string]any{"n": 1000, "steps": 1, "step_delay_ms": 0}) {
		t.Fatal("the tool undrained from the dashboard still refuses tasks")
	}
	if resp, _ := d.do(http.MethodPost, "/dashboard/drain", url.Values{"csrf": {d.csrf(list)}, "tool": {"no_such_tool"}, "drained": {"on"}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("draining an unknown tool: %s", resp.Status)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestDashboardOperators: an -admin-token-file that names each token's
// operator makes the audit trail name who acted (cancel, re-run, drain),
// not a shared admin token; the Tools page shows each tool's running,
// asking and waiting tasks against its queue's cap, its drain switch and
// its failures of the last hour; "Run again" makes a finished task's call
// again as a new task of its owner.
func TestDashboardOperators(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "admins.json")
	if err := os.WriteFile(tokens, []byte(`[{"token": "alice-ops-token-0123456789", "operator": "alice"},
		{"token": "bob-ops-token-0123456789ab", "operator": "bob"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	auditPath := filepath.Join(dir, "audit.jsonl")
	app, base := serveAppOf(t, nil, "-db", filepath.Join(dir, "tasks.db"), "-admin-token-file", tokens, "-audit-log", auditPath,
		"-max-active-tasks", "0", "-create-rate", "0", "-request-rate", "0")
	t.Cleanup(app.dashboard.Close)
	c := &wiretest.Client{URL: base + "/mcp", Tasks: true}
	running := startTask(t, c, "long_computation", map[string]any{"n": 100000, "steps": 1000, "step_delay_ms": 50})
	lint := startTask(t, c, "lint_report", map[string]any{"source": "x = 1  \n# TODO: fix\n", "line_delay_ms": 0})
	waitTask(t, c, lint, 30*time.Second, "lint done", terminal)

	d := newDashClient(t, base)
	if resp, _ := d.do(http.MethodPost, "/dashboard/login", url.Values{"token": {"bob-ops-token-0123456789ab"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("bob's sign-in: %s", resp.Status)
	}
	_, page := d.do(http.MethodGet, "/dashboard/tasks/"+running, nil)
	if resp, _ := d.do(http.MethodPost, "/dashboard/tasks/"+running+"/cancel", url.Values{"csrf": {d.csrf(page)}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel: %s", resp.Status)
	}
	// Run the lint again: a new task of the same owner.
	_, page = d.do(http.MethodGet, "/dashboard/tasks/"+lint, nil)
	if !strings.Contains(page, `id="rerun"`) || !strings.Contains(page, "completed · tool error") {
		t.Fatalf("the finished lint's page lacks the re-run button or its tool error")
	}
	nonce := regexp.MustCompile(`name="nonce" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if nonce == nil {
		t.Fatal("the re-run form has no nonce")
	}
	form := url.Values{"csrf": {d.csrf(page)}, "nonce": {nonce[1]}}
	resp, _ := d.do(http.MethodPost, "/dashboard/tasks/"+lint+"/rerun", form)
	loc := resp.Header.Get("Location")
	m := regexp.MustCompile(`tasks/([a-z2-7]+)\?done=rerun:1$`).FindStringSubmatch(loc)
	if resp.StatusCode != http.StatusSeeOther || m == nil || m[1] == lint {
		t.Fatalf("run again: %s %q", resp.Status, loc)
	}
	// The same form posted again (a double click) starts nothing more.
	if resp, _ := d.do(http.MethodPost, "/dashboard/tasks/"+lint+"/rerun", form); resp.Header.Get("Location") != loc {
		t.Errorf("the form posted again: %s %q, want the first re-run %q", resp.Status, resp.Header.Get("Location"), loc)
	}
	again := waitTask(t, c, m[1], 30*time.Second, "the re-run done", terminal)
	if again.Status != "completed" || !strings.Contains(string(again.Result)+string(again.Content), "TODO") {
		t.Errorf("the re-run: %+v", again)
	}
	// A running task cannot be run again.
	_, page = d.do(http.MethodGet, "/dashboard/tasks/"+m[1], nil)
	if resp, body := d.do(http.MethodPost, "/dashboard/tasks/"+startTask(t, c, "long_computation", map[string]any{"n": 100000, "steps": 1000, "step_delay_ms": 50})+"/rerun",
		url.Values{"csrf": {d.csrf(page)}}); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "it has not ended") {
		t.Errorf("run again of a running task: %s", resp.Status)
	}

	// The Tools page: the lint's failures, a drain switch at the top.
	_, tools := d.do(http.MethodGet, "/dashboard/tools", nil)
	for _, want := range []string{`id="tool-lint_report"`, `id="tool-long_computation"`, "100%", "tool errors)"} {
		if !strings.Contains(tools, want) {
			t.Errorf("the Tools page lacks %q", want)
		}
	}
	if resp, _ := d.do(http.MethodPost, "/dashboard/drain", url.Values{"csrf": {d.csrf(tools)}, "tool": {"lint_report"}, "drained": {"on"}, "back": {"tools"}}); resp.StatusCode != http.StatusSeeOther ||
		resp.Header.Get("Location") != "./tools?done=drained" {
		t.Fatalf("drain from the Tools page: %s %q", resp.Status, resp.Header.Get("Location"))
	}
	if _, tools = d.do(http.MethodGet, "/dashboard/tools", nil); !regexp.MustCompile(`id="tool-lint_report"[^>]*>\s*<td class="tool">.*?</td>\s*<td><span class="badge st-cancelled">drained`).MatchString(tools) {
		t.Errorf("the Tools page does not show lint_report drained")
	}

	trail, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{"task.cancelled", "task.rerun", "server.drain_changed"} {
		found := false
		for _, line := range strings.Split(string(trail), "\n") {
			if strings.Contains(line, `"event":"`+ev+`"`) {
				found = true
				if !strings.Contains(line, `"bob"`) || strings.Contains(line, "admin-token") {
					t.Errorf("%s does not name the operator bob: %s", ev, line)
				}
			}
		}
		if !found {
			t.Errorf("the audit trail lacks %s", ev)
		}
	}
}

// TestAdminTokenFileNamed: the named form of -admin-token-file refuses
// what would make the audit trail ambiguous or a token weak.
func TestAdminTokenFileNamed(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		`[]`:                                    "holds no token",
		`[{"token": "short", "operator": "a"}]`: "16 characters or more",
		`[{"token": "0123456789abcdefgh", "operator": ""}]`:                                                    "name its operator",
		`[{"token": "0123456789abcdefgh", "operator": "a"}, {"token": "0123456789abcdefgX", "operator": "a"}]`: `the operator "a" is named twice`,
		`[{"token": "0123456789abcdefgh", "operator": "a"}, {"token": "0123456789abcdefgh", "operator": "b"}]`: `is also "a"'s`,
		`[{"token": "0123456789abcdefgh", "operator": "a", "scope": "x"}]`:                                     "unknown field",
	} {
		p := filepath.Join(dir, "admins.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := loadAdminTokens(p); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "0123456789abcdefgh") {
			t.Errorf("%s: %v; want an error saying %q (without the token)", body, err, want)
		}
	}
}

// FuzzParseAdminTokens: any content of -admin-token-file gives tokens or
// an error, never a panic, and an error never quotes a token-like string
// of the content.
func FuzzParseAdminTokens(f *testing.F) {
	for _, s := range []string{
		"0123456789abcdefgh\n",
		`[{"token": "0123456789abcdefgh", "operator": "alice"}]`,
		`[{"token": "0123456789abcdefgh", "operator": "a"}, {"token": "0123456789abcdefgh", "operator": "b"}]`,
		`[{"token": "short"}]`, `[`, `[]`, `{}`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := parseAdminTokens("f", b)
		if err == nil && len(ts) == 0 {
			t.Fatal("no error and no token")
		}
		if err != nil {
			for _, m := range regexp.MustCompile(`"token"\s*:\s*"([^"]{16,})"`).FindAllSubmatch(b, -1) {
				if strings.Contains(err.Error(), string(m[1])) {
					t.Fatalf("the error quotes a token: %v", err)
				}
			}
		}
		for _, tk := range ts {
			if tk.operator == "" {
				t.Fatal("a token without its operator")
			}
		}
	})
}
