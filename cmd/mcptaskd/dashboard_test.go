package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
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
	if len(r.state.Tools) != 1 || r.state.Tools[0] != "long_computation" || r.state.Source != "admin" || r.state.ChangedBy != "ops/root" {
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
