package dashboard_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/dashboard"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// adminToken is the token the tests sign in with.
const adminToken = "s3cret-admin-token-0123456789"

// env is a dashboard on a real SQLite store and engine, served on
// loopback HTTP.
type env struct {
	t     *testing.T
	eng   *engine.Engine
	st    *sqlite.Store
	dash  *dashboard.Handler
	srv   *httptest.Server
	audit *syncBuffer
	// release ends the work of the tasks started with start.
	mu      sync.Mutex
	release map[task.ID]chan string
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newEnv starts a dashboard; auth makes it need the admin token.
func newEnv(t *testing.T, auth bool, mod func(*dashboard.Options)) *env {
	t.Helper()
	return newEnvHooks(t, auth, mod, nil)
}

// newEnvHooks is newEnv whose engine has hooks.
func newEnvHooks(t *testing.T, auth bool, mod func(*dashboard.Options), hooks *engine.Hooks) *env {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ab := &syncBuffer{}
	eng, err := engine.New(engine.Options{
		Store: st, InstanceID: "test-instance", SweepInterval: -1, Exclusive: true,
		Logger: slog.New(slog.DiscardHandler),
		Audit:  audit.New(slog.New(slog.NewJSONHandler(ab, nil))),
	})
	if err != nil {
		t.Fatal(err)
	}
	if hooks != nil {
		if err := eng.SetHooks(*hooks); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, eng: eng, st: st, audit: ab, release: map[task.ID]chan string{}}
	t.Cleanup(func() {
		e.mu.Lock()
		for _, ch := range e.release {
			select {
			case ch <- "":
			default:
			}
		}
		e.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		eng.Shutdown(ctx)
	})
	opts := dashboard.Options{Engine: eng, Store: st, LiveInterval: 10 * time.Millisecond}
	if auth {
		opts.Authenticate = func(_ *http.Request, tok string) (task.Owner, time.Time, bool) {
			return task.UserOwner("", "ops"), time.Time{}, tok == adminToken
		}
	}
	if mod != nil {
		mod(&opts)
	}
	d, err := dashboard.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.dash = d
	mux := http.NewServeMux()
	mux.Handle("/dash/", http.StripPrefix("/dash", d))
	mux.Handle("/dash", http.StripPrefix("/dash", d))
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	t.Cleanup(d.Close)
	return e
}

// start starts a task of owner and tool whose work sets msg as its
// status message and waits for finish (its result's text; "" fails it).
func (e *env) start(owner task.Owner, tool, msg string) *task.Task {
	e.t.Helper()
	return e.startSpec(engine.StartSpec{Owner: owner, Tool: tool, Request: json.RawMessage(`{}`)}, msg)
}

// startSpec is start for the task spec describes.
func (e *env) startSpec(spec engine.StartSpec, msg string) *task.Task {
	e.t.Helper()
	ch := make(chan string, 1)
	started := make(chan struct{})
	tk, err := e.eng.Start(context.Background(), spec,
		func(ctx context.Context) (json.RawMessage, error) {
			if msg != "" {
				engine.FromContext(ctx).SetStatusMessage(ctx, msg)
			}
			close(started)
			select {
			case s := <-ch:
				var b bytes.Buffer
				enc := json.NewEncoder(&b)
				enc.SetEscapeHTML(false) // keep hostile text as it is
				enc.Encode(map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}})
				return b.Bytes(), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	if err != nil {
		e.t.Fatal(err)
	}
	<-started
	e.mu.Lock()
	e.release[tk.ID] = ch
	e.mu.Unlock()
	return tk
}

// finish completes a task started with start, and waits for it.
func (e *env) finish(id task.ID, text string) {
	e.t.Helper()
	e.complete(id, text)
	e.waitStatus(id, task.Completed)
}

// complete lets a task started with start complete, without waiting.
func (e *env) complete(id task.ID, text string) {
	e.mu.Lock()
	ch := e.release[id]
	e.mu.Unlock()
	ch <- text // buffered: never blocks the first time
}

// waitStatus waits until the task has status s.
func (e *env) waitStatus(id task.ID, s task.Status) {
	e.t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		// Watch before reading: a change between the read and the wait
		// is not missed (the wait never ended when it was).
		changed := e.eng.Watch(id)
		tk, err := e.st.Get(context.Background(), id)
		if err == nil && tk.Status == s {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			e.t.Fatalf("task %s did not become %s: %+v, %v", id, s, tk, err)
		}
	}
}

// client returns an HTTP client with a cookie jar that does not follow
// redirects.
func (e *env) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// get fetches path (under /dash) and returns the response and its body.
func (e *env) get(c *http.Client, path string) (*http.Response, string) {
	e.t.Helper()
	resp, err := c.Get(e.srv.URL + "/dash" + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// post posts a form to path (under /dash), as the dashboard's own page
// would (same origin).
func (e *env) post(c *http.Client, path string, form url.Values, hdr map[string]string) (*http.Response, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/dash"+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the anti-CSRF token of a page.
func csrf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no anti-CSRF token in the page:\n%s", page)
	}
	return m[1]
}

// signIn signs c in with the admin token.
func (e *env) signIn(c *http.Client) {
	e.t.Helper()
	resp, body := e.post(c, "/login", url.Values{"token": {adminToken}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("sign-in: %s\n%s", resp.Status, body)
	}
}

// TestHostileFieldsEscaped: tool names, status messages and input
// requests are the input of whoever called the tool; the pages and the
// live updates show them as text, never as markup.
func TestHostileFieldsEscaped(t *testing.T) {
	e := newEnv(t, false, nil)
	const (
		tool = `<script>alert(1)</script>"onerror="alert(2)`
		msg  = `"onerror="alert(3)" <img src=x onerror=alert(4)><script>alert(5)</script>`
	)
	tk := e.start(task.UserOwner("acme", `al<b>ice`), tool, msg)
	c := e.client()
	check := func(where, body string) {
		t.Helper()
		for _, bad := range []string{"<script>alert", `"onerror=`, "<img src=x", "<b>ice"} {
			if strings.Contains(body, bad) {
				t.Errorf("%s holds %q unescaped", where, bad)
			}
		}
		if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") || !strings.Contains(body, "&lt;img src=x onerror=alert(4)&gt;") {
			t.Errorf("%s does not show the hostile text escaped:\n%s", where, body)
		}
	}
	_, list := e.get(c, "/")
	check("the list", list)
	_, page := e.get(c, "/tasks/"+string(tk.ID))
	check("the task page", page)
	_, filtered := e.get(c, "/?tool="+url.QueryEscape(tool))
	check("the filtered list", filtered)
	if !strings.Contains(filtered, "row-"+string(tk.ID)) {
		t.Errorf("the tool filter with a hostile name does not find the task")
	}

	// Live updates carry the same escaped fragments.
	ev := e.readEvents(c, "/tasks/"+string(tk.ID)+"/live", func(name, data string) bool { return name == "task" })
	check("the task page's live update", ev)
	ev = e.readEvents(c, "/live", func(name, data string) bool { return name == "row" }, func() {
		e.finish(tk.ID, "<script>alert(6)</script>")
	})
	if strings.Contains(ev, "<script>alert") || strings.Contains(ev, `"onerror=`) {
		t.Errorf("the list's live update holds hostile markup:\n%s", ev)
	}
	// The revealed result is escaped too.
	_, page = e.get(c, "/tasks/"+string(tk.ID))
	_, revealed := e.post(c, "/tasks/"+string(tk.ID)+"/reveal", url.Values{"csrf": {csrf(t, page)}}, nil)
	if !strings.Contains(revealed, `&lt;script&gt;alert(6)`) || strings.Contains(revealed, "<script>alert(6)") {
		t.Errorf("the revealed result is not escaped:\n%s", revealed)
	}
	if a := e.audit.String(); !strings.Contains(a, `"event":"task.result_retrieved"`) || !strings.Contains(a, `"method":"dashboard/reveal"`) {
		t.Errorf("the reveal is not audited:\n%s", a)
	}
	if strings.Contains(page, "alert(6)") {
		t.Errorf("the task page shows the result before it is asked for")
	}
}

// readEvents reads the SSE stream at path until stop says an event is
// the one awaited, after calling then (if any) once the stream is open;
// it returns the events read, as sent.
func (e *env) readEvents(c *http.Client, path string, stop func(name, data string) bool, then ...func()) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/dash"+path, nil)
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		e.t.Fatalf("live stream %s: %s %s", path, resp.Status, resp.Header.Get("Content-Type"))
	}
	var all strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var name string
	var data []string
	first := true
	for sc.Scan() {
		line := sc.Text()
		all.WriteString(line + "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		case line == "":
			if name != "" && stop(name, strings.Join(data, "\n")) {
				return all.String()
			}
			name, data = "", nil
			if first {
				first = false
				for _, fn := range then {
					fn()
				}
			}
		}
	}
	e.t.Fatalf("live stream %s ended before the awaited event (%v):\n%s", path, sc.Err(), all.String())
	return ""
}

// TestSecurityHeaders: every answer carries the strict CSP and its
// companions.
func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t, true, nil)
	c := e.client()
	for _, p := range []string{"/", "/login", "/static/app.js", "/tasks/nope"} {
		resp, _ := e.get(c, p)
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: Content-Security-Policy %q lacks %q", p, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: Content-Security-Policy allows unsafe code: %q", p, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", p, resp.Header)
		}
	}
	// No inline script or style in the pages (the CSP would block them).
	e.signIn(c)
	e.start("", "t", "")
	_, list := e.get(c, "/")
	if regexp.MustCompile(`<script>|<script [^>]*>[^<]|\sstyle=|\son[a-z]+=`).MatchString(list) {
		t.Errorf("the list page has inline code or style:\n%s", list)
	}
}

// TestSignIn: without a session, pages send to the sign-in form, which
// admits the admin token only and sets a hardened, signed cookie; a
// bearer token works for scripts; a forged or expired session does not.
func TestSignIn(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newEnv(t, true, func(o *dashboard.Options) { o.Now = clock; o.SessionTTL = time.Hour })
	c := e.client()
	resp, _ := e.get(c, "/tasks/abc?x=1")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "../login?next="+url.QueryEscape("tasks/abc?x=1") {
		t.Fatalf("a page without a session: %s Location %q", resp.Status, resp.Header.Get("Location"))
	}
	if resp, _ := e.get(c, "/live"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a live stream without a session: %s", resp.Status)
	}
	resp, body := e.post(c, "/login", url.Values{"token": {"wrong-token-0123456789"}}, nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not an admin token") {
		t.Errorf("a wrong token: %s", resp.Status)
	}
	resp, _ = e.post(c, "/login", url.Values{"token": {adminToken}, "next": {"https://evil.example/"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "./" {
		t.Errorf("sign-in with a foreign next: %s Location %q; want ./", resp.Status, resp.Header.Get("Location"))
	}
	var sess *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "mcptask_dashboard" {
			sess = ck
		}
	}
	if sess == nil || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Path != "" {
		t.Fatalf("session cookie: %+v", sess)
	}
	if resp, _ := e.get(c, "/"); resp.StatusCode != http.StatusOK {
		t.Errorf("the list after sign-in: %s", resp.Status)
	}
	// A forged cookie.
	forged := e.client()
	u, _ := url.Parse(e.srv.URL + "/dash/")
	forged.Jar.SetCookies(u, []*http.Cookie{{Name: "mcptask_dashboard", Value: sess.Value[:len(sess.Value)-2] + "xx"}})
	if resp, _ := e.get(forged, "/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a forged session: %s", resp.Status)
	}
	// A bearer token.
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/dash/", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if resp, err := e.client().Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("a bearer token: %v %v", resp, err)
	}
	// The session expires.
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	if resp, _ := e.get(c, "/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("an expired session: %s", resp.Status)
	}
}

// TestActionsNeedCSRF: an action without the page's token, with another
// session's token, or from another site changes nothing; with it, the
// task is cancelled and the audit trail names the operator.
func TestActionsNeedCSRF(t *testing.T) {
	e := newEnv(t, true, nil)
	tk := e.start(task.UserOwner("acme", "alice"), "deploy", "building")
	c := e.client()
	e.signIn(c)
	other := e.client()
	e.signIn(other)
	_, page := e.get(c, "/tasks/"+string(tk.ID))
	_, otherPage := e.get(other, "/tasks/"+string(tk.ID))
	path := "/tasks/" + string(tk.ID) + "/cancel"
	for _, tc := range []struct {
		name string
		form url.Values
		hdr  map[string]string
	}{
		{"no token", url.Values{}, nil},
		{"another session's token", url.Values{"csrf": {csrf(t, otherPage)}}, nil},
		{"a cross-site request", url.Values{"csrf": {csrf(t, page)}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"another origin", url.Values{"csrf": {csrf(t, page)}}, map[string]string{"Sec-Fetch-Site": "", "Origin": "https://evil.example"}},
	} {
		if resp, _ := e.post(c, path, tc.form, tc.hdr); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s; want 403", tc.name, resp.Status)
		}
	}
	if cur, _ := e.st.Get(context.Background(), tk.ID); cur.Status != task.Working {
		t.Fatalf("a refused action changed the task: %s", cur.Status)
	}
	resp, _ := e.post(c, path, url.Values{"csrf": {csrf(t, page)}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "../../tasks/"+string(tk.ID)+"?done=cancelled:1" {
		t.Fatalf("cancel: %s Location %q", resp.Status, resp.Header.Get("Location"))
	}
	cur, _ := e.st.Get(context.Background(), tk.ID)
	if cur.Status != task.Cancelled || cur.StatusMessage != "The task was cancelled by an operator." {
		t.Fatalf("after cancel: %s %q", cur.Status, cur.StatusMessage)
	}
	if a := e.audit.String(); !strings.Contains(a, `"event":"task.cancelled"`) || !strings.Contains(a, `"principal":"ops"`) {
		t.Errorf("the audit trail does not record the operator's cancel:\n%s", a)
	}
	// The timeline names the instance that cancelled it.
	_, page = e.get(c, "/tasks/"+string(tk.ID))
	if !strings.Contains(page, "→ <span class=\"badge st-cancelled\">cancelled</span>") || !strings.Contains(page, "on test-instance") {
		t.Errorf("the timeline lacks the cancellation:\n%s", page)
	}
}

// TestCancelRefused: an operator's cancel that the system doing the work
// refuses (engine.Hooks.Cancel) leaves the task working; the page says
// the cancel was refused, the task's status message why, and the audit
// trail records the refusal.
func TestCancelRefused(t *testing.T) {
	links := func(t *dashboard.Options) {
		t.Links = func(*task.Task) map[string]string {
			return map[string]string{"build": "https://ci.example.com/#/builds/57", "evil": "javascript:alert(1)"}
		}
	}
	e := newEnvHooks(t, true, links, &engine.Hooks{Cancel: func(_ context.Context, t *task.Task) error {
		if t.Tool == "deploy" {
			return errors.New("the job API refused the cancel of job 7: HTTP 400: not a JSON-RPC 2.0 request")
		}
		return nil
	}})
	tk := e.start(task.UserOwner("acme", "alice"), "deploy", "building")
	other := e.start(task.UserOwner("acme", "alice"), "lint", "linting")
	c := e.client()
	e.signIn(c)
	_, page := e.get(c, "/tasks/"+string(tk.ID))
	resp, _ := e.post(c, "/tasks/"+string(tk.ID)+"/cancel", url.Values{"csrf": {csrf(t, page)}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "../../tasks/"+string(tk.ID)+"?done=refused:1" {
		t.Fatalf("cancel: %s Location %q", resp.Status, resp.Header.Get("Location"))
	}
	cur, _ := e.st.Get(context.Background(), tk.ID)
	want := "cancel refused: the job API refused the cancel of job 7: HTTP 400: not a JSON-RPC 2.0 request"
	if cur.Status != task.Working || cur.StatusMessage != want {
		t.Fatalf("after the refused cancel: %s %q", cur.Status, cur.StatusMessage)
	}
	_, page = e.get(c, "/tasks/"+string(tk.ID)+"?done=refused:1")
	if !strings.Contains(page, "was refused by the system doing the work") || !strings.Contains(page, "HTTP 400: not a JSON-RPC 2.0 request") {
		t.Errorf("the task page does not say the cancel was refused, and why:\n%s", page)
	}
	if !strings.Contains(page, `<a href="https://ci.example.com/#/builds/57"`) || strings.Contains(page, "javascript:") {
		t.Errorf("the task page's links: want the build's, and no other scheme:\n%s", page)
	}
	if a := e.audit.String(); !strings.Contains(a, `"event":"task.cancel_refused"`) || !strings.Contains(a, "HTTP 400") {
		t.Errorf("the audit trail does not record the refusal:\n%s", a)
	}
	// In bulk: the one refused is counted, the other cancelled.
	_, list := e.get(c, "/")
	resp, _ = e.post(c, "/cancel", url.Values{"csrf": {csrf(t, list)}, "id": {string(tk.ID), string(other.ID)}}, nil)
	if loc := resp.Header.Get("Location"); !strings.Contains(loc, "done=refused%3A1") {
		t.Errorf("bulk cancel: Location %q; want the refusal counted", loc)
	}
	if cur, _ := e.st.Get(context.Background(), other.ID); cur.Status != task.Cancelled {
		t.Errorf("the other task: %s", cur.Status)
	}
}

// TestBulkCancel: the selected tasks are cancelled; ended ones are
// skipped; the list keeps its filters.
func TestBulkCancel(t *testing.T) {
	e := newEnv(t, false, nil)
	a := e.start("", "build", "")
	b := e.start("", "build", "")
	done := e.start("", "build", "")
	e.finish(done.ID, "ok")
	keep := e.start("", "build", "")
	c := e.client()
	_, list := e.get(c, "/?tool=build")
	resp, _ := e.post(c, "/cancel", url.Values{
		"csrf": {csrf(t, list)}, "back": {"tool=build"},
		"id": {string(a.ID), string(b.ID), string(done.ID), "no-such-task"},
	}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "./?done=skipped%3A2&tool=build" {
		t.Fatalf("bulk cancel: %s Location %q", resp.Status, resp.Header.Get("Location"))
	}
	for id, want := range map[task.ID]task.Status{a.ID: task.Cancelled, b.ID: task.Cancelled, done.ID: task.Completed, keep.ID: task.Working} {
		if cur, _ := e.st.Get(context.Background(), id); cur.Status != want {
			t.Errorf("task %s: %s; want %s", id, cur.Status, want)
		}
	}
	_, after := e.get(c, "/?done=skipped:2&tool=build")
	if !strings.Contains(after, "Cancelled 2 tasks; the others had already ended or are gone.") {
		t.Errorf("no outcome message")
	}
}

// TestListPagesAndFilters: pages of 50 over every task, newest first,
// without a gap or a repeat; filters by status, tool, owner and time;
// counts per status under the other filters; the ID search.
func TestListPagesAndFilters(t *testing.T) {
	e := newEnv(t, false, nil)
	var ids []task.ID
	for i := range 120 {
		tool := "a"
		if i%3 == 0 {
			tool = "b"
		}
		owner := task.UserOwner("acme", "alice")
		if i%2 == 0 {
			owner = task.UserOwner("acme", "bob")
		}
		tk := e.start(owner, tool, "")
		ids = append(ids, tk.ID)
	}
	for _, id := range ids[:10] {
		e.finish(id, "ok")
	}
	c := e.client()
	rowRe := regexp.MustCompile(`<tr id="row-([a-z0-9]+)"`)
	nextRe := regexp.MustCompile(`id="next-page"|href="(\?[^"]*cursor=[^"]+)" id="next-page"`)
	seen := map[string]bool{}
	path := "/"
	pages := 0
	for {
		_, body := e.get(c, path)
		pages++
		for _, m := range rowRe.FindAllStringSubmatch(body, -1) {
			if seen[m[1]] {
				t.Fatalf("task %s shown twice", m[1])
			}
			seen[m[1]] = true
		}
		m := nextRe.FindStringSubmatch(body)
		if m == nil {
			break
		}
		path = "/" + strings.ReplaceAll(m[1], "&amp;", "&")
		if pages > 5 {
			t.Fatal("too many pages")
		}
	}
	if len(seen) != 120 || pages != 3 {
		t.Fatalf("%d tasks over %d pages; want 120 over 3", len(seen), pages)
	}
	count := func(body string) int { return len(rowRe.FindAllString(body, -1)) }
	_, body := e.get(c, "/?status=completed")
	if n := count(body); n != 10 {
		t.Errorf("status=completed: %d rows; want 10", n)
	}
	if !strings.Contains(body, `data-status="working">working <strong>110</strong>`) {
		t.Errorf("the counts under a status filter do not show every status")
	}
	_, body = e.get(c, "/?tool=b&owner="+url.QueryEscape(string(task.UserOwner("acme", "bob"))))
	if n := count(body); n != 20 {
		t.Errorf("tool=b, owner bob: %d rows; want 20", n)
	}
	future := time.Now().UTC().Add(time.Hour).Format("2006-01-02T15:04")
	if _, body = e.get(c, "/?after="+future); count(body) != 0 {
		t.Errorf("created after an hour from now: %d rows", count(body))
	}
	if _, body = e.get(c, "/?before="+future); count(body) != 50 {
		t.Errorf("created before an hour from now: %d rows", count(body))
	}
	if resp, _ := e.get(c, "/?id="+string(ids[7])); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "./tasks/"+string(ids[7]) {
		t.Errorf("ID search: %s %q", resp.Status, resp.Header.Get("Location"))
	}
	if resp, body := e.get(c, "/?cursor=garbage"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "cursor is not valid") {
		t.Errorf("a bad cursor: %s", resp.Status)
	}
	if resp, body := e.get(c, "/?after=yesterday"); resp.StatusCode != http.StatusOK || !strings.Contains(body, "is not a date and time") {
		t.Errorf("a bad time: %s", resp.Status)
	}
}

// TestLiveTaskPage: the task page's stream sends the task as it moves
// from working to completed.
func TestLiveTaskPage(t *testing.T) {
	e := newEnv(t, false, nil)
	tk := e.start("", "long", "step 1")
	c := e.client()
	ev := e.readEvents(c, "/tasks/"+string(tk.ID)+"/live", func(name, data string) bool {
		return name == "task" && strings.Contains(data, `id="task-status">completed<`)
	}, func() { e.finish(tk.ID, "done") })
	if !strings.Contains(ev, `id="task-status">working<`) {
		t.Errorf("the stream did not start with the working task:\n%s", ev)
	}
}

// TestBehindProxyPrefix: behind a reverse proxy that adds a prefix, every
// link, form and redirect stays under it.
func TestBehindProxyPrefix(t *testing.T) {
	e := newEnv(t, true, nil)
	target, _ := url.Parse(e.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	front := http.NewServeMux()
	front.Handle("/ops/", http.StripPrefix("/ops", rp)) // /ops/dash/... → /dash/...
	proxy := httptest.NewServer(front)
	defer proxy.Close()
	c := e.client()
	resp, err := c.Get(proxy.URL + "/ops/dash")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := resp.Location()
	if loc == nil || loc.Path != "/ops/dash/" {
		t.Fatalf("/ops/dash redirects to %v; want /ops/dash/", loc)
	}
	resp, _ = c.Get(proxy.URL + "/ops/dash/")
	loc, _ = resp.Location()
	if loc == nil || loc.Path != "/ops/dash/login" {
		t.Fatalf("the list redirects to %v; want /ops/dash/login", loc)
	}
	req, _ := http.NewRequest(http.MethodPost, proxy.URL+"/ops/dash/login", strings.NewReader(url.Values{"token": {adminToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ = resp.Location()
	if loc == nil || loc.Path != "/ops/dash/" {
		t.Fatalf("sign-in redirects to %v", loc)
	}
	// The cookie is scoped to the prefix the browser saw.
	u, _ := url.Parse(proxy.URL + "/ops/dash/")
	if len(c.Jar.Cookies(u)) != 1 {
		t.Fatalf("no session cookie for %s", u)
	}
	tk := e.start("", "t", "")
	resp, err = c.Get(proxy.URL + "/ops/dash/tasks/" + string(tk.ID))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	for _, ref := range regexp.MustCompile(`(?:href|action|src|data-live)="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		abs := u.ResolveReference(&url.URL{Path: "tasks/" + string(tk.ID)})
		r, _ := url.Parse(strings.ReplaceAll(ref[1], "&amp;", "&"))
		if got := abs.ResolveReference(r); !strings.HasPrefix(got.Path, "/ops/dash/") {
			t.Errorf("the task page's %q leads to %s, outside the prefix", ref[1], got.Path)
		}
	}
	// The page's live stream, through the proxy, sends the task as it
	// completes.
	live := regexp.MustCompile(`data-live="([^"]*)"`).FindStringSubmatch(page)
	if live == nil {
		t.Fatal("the task page has no live stream")
	}
	liveRef, err := url.Parse(strings.ReplaceAll(live[1], "&amp;", "&"))
	if err != nil {
		t.Fatal(err)
	}
	streamURL := u.ResolveReference(&url.URL{Path: "tasks/" + string(tk.ID)}).ResolveReference(liveRef)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, streamURL.String(), nil)
	resp, err = c.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the live stream through the proxy (%s): %v %v", streamURL, resp, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	// The stream sends nothing until the task changes from what the
	// page shows: finish it now.
	e.complete(tk.ID, "done")
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, `id="task-status">completed<`) {
			return
		}
	}
	t.Fatalf("the stream through the proxy ended before the task completed: %v", sc.Err())
}

// TestTaskPageParts: a task's page shows its pending question, its log's
// tail and its ledger operation with the receipt, apart from its status;
// the live view follows it to completed.
func TestTaskPageParts(t *testing.T) {
	e := newEnv(t, false, nil)
	asked := make(chan struct{})
	tk, err := e.eng.Start(context.Background(), engine.StartSpec{Owner: task.UserOwner("acme", "alice"), Tool: "deploy", Request: json.RawMessage(`{}`),
		Correlation: map[string]string{"claudecode/toolUseId": "toolu_01<b>x</b>"}},
		func(ctx context.Context) (json.RawMessage, error) {
			h := engine.FromContext(ctx)
			h.Log("stdout", "building api\nstep 2 <b>bold</b>")
			h.FlushLog()
			op, err := h.RecordOperation(ctx, engine.OperationSpec{Object: "service/api", ObjectVersion: "v42", Effect: "deploy api to production"})
			if err != nil {
				return nil, err
			}
			if err := op.Submitted(ctx, "deploy-7781"); err != nil {
				return nil, err
			}
			close(asked)
			if _, err := h.RequestInput(ctx, json.RawMessage(`{"method":"elicitation/create","params":{"message":"Deploy api to <production>?","requestedSchema":{"type":"object"}}}`)); err != nil {
				return nil, err
			}
			if err := op.Confirmed(ctx, "healthy"); err != nil {
				return nil, err
			}
			return json.RawMessage(`{"content":[]}`), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	<-asked
	e.waitStatus(tk.ID, task.InputRequired)
	c := e.client()
	_, page := e.get(c, "/tasks/"+string(tk.ID))
	for _, want := range []string{
		`id="task-status">input_required<`,
		"<strong>elicitation/create</strong>", "Deploy api to &lt;production&gt;?",
		"building api", "step 2 &lt;b&gt;bold&lt;/b&gt;",
		"deploy api to production", "service/api v42", `<span class="badge op-submitted">submitted</span>`, "<code>deploy-7781</code>",
		`<span class="badge st-working">working</span> → <span class="badge st-input-required">input_required</span>`,
		"work started (run 1)",
		"<dt>Host call</dt>", "claudecode/toolUseId <code>toolu_01&lt;b&gt;x&lt;/b&gt;</code>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the task page lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("the page:\n%s", page)
	}
}

// ended starts a task of tool whose work ends at once with result (a
// CallToolResult), or fails when result is nil, and waits for its end.
func (e *env) ended(tool string, args string, result json.RawMessage) *task.Task {
	e.t.Helper()
	tk, err := e.eng.Start(context.Background(), engine.StartSpec{Owner: "", Tool: tool,
		Request: json.RawMessage(`{"name":"` + tool + `","arguments":` + args + `}`)},
		func(ctx context.Context) (json.RawMessage, error) {
			if result == nil {
				return nil, errors.New("the runner is gone")
			}
			return result, nil
		})
	if err != nil {
		e.t.Fatal(err)
	}
	want := task.Completed
	if result == nil {
		want = task.Failed
	}
	e.waitStatus(tk.ID, want)
	return tk
}

// TestToolErrors: a task that completed with isError: true is shown as a
// tool error (not a green "completed"), counted in its own pill, found by
// the "failed or tool error" filter, and its revealed result is shown as
// text; its arguments are revealed on request, audited.
func TestToolErrors(t *testing.T) {
	e := newEnv(t, false, nil)
	ok := json.RawMessage(`{"content":[{"type":"text","text":"all 12 tests passed"}]}`)
	bad := json.RawMessage(`{"content":[{"type":"text","text":"3 tests failed:\n  TestA\n  TestB"}],"isError":true}`)
	for range 3 {
		e.ended("test_suite", `{"suite":"unit"}`, ok)
	}
	toolErr := e.ended("test_suite", `{"suite":"integration <b>"}`, bad)
	e.ended("test_suite", `{"suite":"e2e"}`, bad)
	e.ended("ci_build", `{}`, nil)
	c := e.client()
	rowRe := regexp.MustCompile(`<tr id="row-([a-z0-9]+)"`)
	count := func(body string) int { return len(rowRe.FindAllString(body, -1)) }

	_, body := e.get(c, "/")
	for _, want := range []string{
		`data-status="tool_error">tool error <strong>2</strong>`,
		`data-status="completed">completed <strong>5</strong>`,
		`data-status="failed">failed <strong>1</strong>`,
		`id="row-` + string(toolErr.ID) + `" data-id="` + string(toolErr.ID) + `" data-status="completed" data-outcome="tool_error"`,
		`completed · tool error`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the list lacks %q", want)
		}
	}
	for q, want := range map[string]int{
		"status=tool_error":                  2,
		"status=failed&status=tool_error":    3,
		"status=completed":                   5,
		"status=completed&status=tool_error": 5,
		"status=working&status=tool_error":   2,
	} {
		if _, body := e.get(c, "/?"+q); count(body) != want {
			t.Errorf("%s: %d rows; want %d", q, count(body), want)
		}
	}
	if _, body := e.get(c, "/?tool=ci_build"); !strings.Contains(body, `data-status="failed">failed <strong>1</strong>`) {
		t.Errorf("the failed pill of ci_build does not count its failure")
	}

	_, page := e.get(c, "/tasks/"+string(toolErr.ID))
	if !strings.Contains(page, `id="task-status" title="the tool ran and reported an error (isError: true)">completed · tool error`) {
		t.Errorf("the task page does not show the tool error")
	}
	tok := csrf(t, page)
	_, rev := e.post(c, "/tasks/"+string(toolErr.ID)+"/reveal", url.Values{"csrf": {tok}}, nil)
	if !strings.Contains(rev, "<pre class=\"text\">3 tests failed:\n  TestA\n  TestB</pre>") {
		t.Errorf("the revealed result is not shown as text:\n%s", rev)
	}
	_, rev = e.post(c, "/tasks/"+string(toolErr.ID)+"/reveal", url.Values{"csrf": {tok}, "what": {"arguments"}}, nil)
	if !strings.Contains(rev, `&#34;suite&#34;: &#34;integration \u003cb\u003e&#34;`) && !strings.Contains(rev, `&#34;suite&#34;: &#34;integration &lt;b&gt;&#34;`) {
		t.Errorf("the revealed arguments are not shown (escaped):\n%s", rev)
	}
	trail := e.audit.String()
	for _, ev := range []string{audit.EventResultRetrieved, audit.EventArgumentsRetrieved} {
		if !strings.Contains(trail, `"event":"`+ev+`"`) {
			t.Errorf("the audit trail lacks %s:\n%s", ev, trail)
		}
	}
}

// TestPagerRange: the list says which tasks a page shows out of how
// many, and goes back a page as well as forward.
func TestPagerRange(t *testing.T) {
	e := newEnv(t, false, nil)
	for range 120 {
		e.start("", "a", "")
	}
	c := e.client()
	link := func(body, id string) string {
		m := regexp.MustCompile(`href="([^"]*)" id="` + id + `"`).FindStringSubmatch(body)
		if m == nil {
			return ""
		}
		return "/" + strings.TrimPrefix(strings.ReplaceAll(m[1], "&amp;", "&"), "./")
	}
	_, p1 := e.get(c, "/")
	if !strings.Contains(p1, `id="range" class="range">1–50 of 120<`) || link(p1, "prev-page") != "" {
		t.Fatalf("first page: range or previous link wrong")
	}
	_, p2 := e.get(c, link(p1, "next-page"))
	_, p3 := e.get(c, link(p2, "next-page"))
	if !strings.Contains(p2, `>51–100 of 120<`) || !strings.Contains(p3, `>101–120 of 120<`) || link(p3, "next-page") != "" {
		t.Fatalf("later pages: ranges wrong")
	}
	_, back := e.get(c, link(p3, "prev-page"))
	_, first := e.get(c, link(back, "prev-page"))
	rows := regexp.MustCompile(`<tr id="row-([a-z0-9]+)"`)
	if !strings.Contains(back, `>51–100 of 120<`) || rows.FindString(back) != rows.FindString(p2) ||
		!strings.Contains(first, `>1–50 of 120<`) || rows.FindString(first) != rows.FindString(p1) {
		t.Fatalf("previous pages are not the pages before")
	}
}
