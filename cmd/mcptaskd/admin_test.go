package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// adminResp is one answer of /admin/drain.
type adminResp struct {
	status int
	header http.Header
	body   string
	state  drainStatus
}

// adminDo sends one request to base+/admin/drain with the bearer token
// (none if empty), a JSON body if body is not nil, and extra headers.
func adminDo(t *testing.T, base, method, token string, body any, hdr http.Header) adminResp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(body); err != nil {
				t.Fatal(err)
			}
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+"/admin/drain", rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s /admin/drain: %v", method, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := adminResp{status: resp.StatusCode, header: resp.Header, body: string(raw)}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &r.state); err != nil {
			t.Fatalf("%s /admin/drain: undecodable answer %q: %v", method, raw, err)
		}
	}
	return r
}

// wantAdmin checks an answer's HTTP status and that its body contains
// each of the strings.
func wantAdmin(t *testing.T, what string, r adminResp, status int, contains ...string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: HTTP %d %s, want %d", what, r.status, r.body, status)
	}
	for _, c := range contains {
		if !strings.Contains(r.body, c) {
			t.Fatalf("%s: the answer %q lacks %q", what, r.body, c)
		}
	}
}

// drainRefused reports whether a task-augmented call of tool over the
// 2026-07-28 wire is refused by the drain switch; any other error fails.
func drainRefused(t *testing.T, c *wiretest.Client, tool string, args map[string]any) bool {
	t.Helper()
	r, err := c.Call(context.Background(), "tools/call", map[string]any{"name": tool, "arguments": args, "_meta": c.Meta()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Error == nil {
		return false
	}
	if r.Error.Code != -32010 || !strings.Contains(string(r.Error.Data), `"draining"`) {
		t.Fatalf("tools/call %s: want a task or -32010 draining, got %+v", tool, r.Error)
	}
	return true
}

// writeTokens writes a tokens file of clear tokens: principal -> token,
// scopes.
func writeTokens(t *testing.T, entries ...map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(entries)
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAdminDrainAuthenticated: through a real mcptaskd with a tokens
// file, /admin/drain answers 401 without a token or with a wrong one, 403
// to a valid token without the admin scope, and serves one with it; the
// switch it sets refuses new tasks at once (existing ones stay readable),
// lifting it allows them again; each change is audited with by "admin"
// and the admin's principal; malformed requests get clear JSON errors and
// change nothing; no token reaches the log.
func TestAdminDrainAuthenticated(t *testing.T) {
	t.Parallel()
	const adminTok, userTok = "admin-token-0123456789abcdef", "user-token-0123456789abcdefgh"
	tokens := writeTokens(t,
		map[string]any{"token": adminTok, "principal": "root", "tenant": "ops", "scopes": []string{"mcptask:admin"}},
		map[string]any{"token": userTok, "principal": "alice", "tenant": "acme", "scopes": []string{"tasks"}})
	d := startDaemon(t, "admin-auth", filepath.Join(t.TempDir(), "tasks.db"), "-tokens", tokens)
	c := d.client(true)
	c.Header = http.Header{"Authorization": {"Bearer " + userTok}}
	args := map[string]any{"n": 1000, "steps": 2, "step_delay_ms": 0}

	r := adminDo(t, d.Base, http.MethodGet, "", nil, nil)
	wantAdmin(t, "GET without a token", r, http.StatusUnauthorized, "Bearer TOKEN")
	if got := r.header.Get("WWW-Authenticate"); got != `Bearer realm="mcptaskd-admin"` {
		t.Errorf("GET without a token: WWW-Authenticate %q", got)
	}
	r = adminDo(t, d.Base, http.MethodGet, "not-a-token-of-this-server", nil, nil)
	wantAdmin(t, "GET with a wrong token", r, http.StatusUnauthorized, "refused")
	if !strings.Contains(r.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("GET with a wrong token: WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
	}
	r = adminDo(t, d.Base, http.MethodPut, userTok, map[string]any{"all": true}, nil)
	wantAdmin(t, "PUT with a token without the admin scope", r, http.StatusForbidden, "mcptask:admin")
	if !strings.Contains(r.header.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
		t.Errorf("403: WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
	}
	if drainRefused(t, c, "long_computation", args) {
		t.Fatal("a refused admin request drained the server")
	}
	r = adminDo(t, d.Base, http.MethodGet, adminTok, nil, nil)
	wantAdmin(t, "GET by the admin", r, http.StatusOK)
	if r.state.All || len(r.state.Tools) != 0 || r.state.Fallback != "refuse" {
		t.Fatalf("GET at start: %+v", r.state)
	}

	before := startTask(t, c, "long_computation", map[string]any{"n": 100000, "steps": 500, "step_delay_ms": 50})
	r = adminDo(t, d.Base, http.MethodPut, adminTok, map[string]any{"tools": []string{"long_computation"}}, nil)
	wantAdmin(t, "PUT by the admin", r, http.StatusOK)
	if r.state.All || len(r.state.Tools) != 1 || r.state.By != "admin:ops/root" {
		t.Fatalf("PUT answer: %+v", r.state)
	}
	if !drainRefused(t, c, "long_computation", args) {
		t.Fatal("long_computation served after the admin drained it")
	}
	if drainRefused(t, c, "lint_report", nil) {
		t.Fatal("lint_report refused, but only long_computation is drained")
	}
	if tk, err := c.Get(context.Background(), before); err != nil || tk.TaskID != before {
		t.Fatalf("tasks/get of a task created before the drain: %+v %v", tk, err)
	}
	waitUntil(t, 30*time.Second, "the admin change audited", func() (bool, error) {
		for _, rec := range d.LogRecords("audit") {
			if rec["event"] == "server.drain_changed" && rec["by"] == "admin" && rec["principal"] == "root" && rec["tenant"] == "ops" {
				return true, nil
			}
		}
		return false, nil
	})

	// Malformed requests change nothing.
	for _, bad := range []struct {
		what   string
		method string
		body   any
		hdr    http.Header
		status int
		say    string
	}{
		{"an unknown field", http.MethodPut, []byte(`{"al": true}`), nil, http.StatusBadRequest, "unknown field"},
		{"an unknown tool", http.MethodPost, map[string]any{"tools": []string{"no_such_tool"}}, nil, http.StatusBadRequest, "no such tool"},
		{"a bad fallback", http.MethodPut, map[string]any{"all": true, "fallback": "maybe"}, nil, http.StatusBadRequest, "fallback"},
		{"two objects", http.MethodPut, []byte(`{"all": true} {}`), nil, http.StatusBadRequest, "one JSON object"},
		{"not JSON", http.MethodPut, []byte(`all=true`), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, http.StatusUnsupportedMediaType, "application/json"},
		{"a huge body", http.MethodPut, []byte(`{"tools": ["` + strings.Repeat("x", 70<<10) + `"]}`), nil, http.StatusRequestEntityTooLarge, "larger than"},
		{"DELETE", http.MethodDelete, nil, nil, http.StatusMethodNotAllowed, "GET reads"},
	} {
		r := adminDo(t, d.Base, bad.method, adminTok, bad.body, bad.hdr)
		wantAdmin(t, bad.what, r, bad.status, `"error"`, bad.say)
	}
	if r := adminDo(t, d.Base, http.MethodGet, adminTok, nil, nil); r.state.All || len(r.state.Tools) != 1 {
		t.Fatalf("a malformed request changed the switch: %+v", r.state)
	}

	r = adminDo(t, d.Base, http.MethodPost, adminTok, map[string]any{"all": false, "tools": []string{}}, nil)
	wantAdmin(t, "lifting the drain", r, http.StatusOK)
	if drainRefused(t, c, "long_computation", args) {
		t.Fatal("long_computation refused after the drain was lifted")
	}
	if n := strings.Count(d.Logs(), `"event":"server.drain_changed"`); n != 2 {
		t.Errorf("%d drain_changed records, want 2 (set, lifted)", n)
	}
	for _, secret := range []string{adminTok, userTok} {
		if strings.Contains(d.Logs(), secret) {
			t.Fatal("a bearer token reached the log")
		}
	}
}

// TestAdminDrainLoopback: without authentication, /admin/drain answers on
// a loopback listener only, with the same DNS-rebinding protection as
// /mcp; draining everything refuses every new task.
func TestAdminDrainLoopback(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "admin-loopback", filepath.Join(t.TempDir(), "tasks.db"))
	c := d.client(true)
	hostReq, _ := http.NewRequest(http.MethodGet, d.Base+"/admin/drain", nil)
	hostReq.Host = "rebound.example:8080"
	resp, err := http.DefaultClient.Do(hostReq)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a rebound Host: HTTP %d, want 403", resp.StatusCode)
	}
	wantAdmin(t, "a cross-origin PUT", adminDo(t, d.Base, http.MethodPut, "", map[string]any{"all": true},
		http.Header{"Origin": {"https://evil.example"}}), http.StatusForbidden)
	r := adminDo(t, d.Base, http.MethodPut, "", map[string]any{"all": true}, nil)
	wantAdmin(t, "PUT on loopback", r, http.StatusOK)
	if !r.state.All {
		t.Fatalf("PUT answer: %+v", r.state)
	}
	if !drainRefused(t, c, "long_computation", map[string]any{"n": 100}) || !drainRefused(t, c, "lint_report", nil) {
		t.Fatal("a tool served while everything is drained")
	}
	wantAdmin(t, "lifting", adminDo(t, d.Base, http.MethodPut, "", map[string]any{}, nil), http.StatusOK)
	if drainRefused(t, c, "lint_report", nil) {
		t.Fatal("refused after the drain was lifted")
	}
}

// TestAdminDrainRemoteListener: without authentication, on a non-loopback
// listener the endpoint refuses with a clear message, unless
// -admin-token-file gives it a token (then the token is required). The
// app runs in-process behind a loopback test server: its -addr is only
// what it believes it listens on, so no traffic leaves loopback.
func TestAdminDrainRemoteListener(t *testing.T) {
	t.Parallel()
	base := serveApp(t, nil, "-addr", "0.0.0.0:8080", "-allow-remote", "-db", filepath.Join(t.TempDir(), "tasks.db"))
	wantAdmin(t, "GET on a remote listener", adminDo(t, base, http.MethodGet, "", nil, nil), http.StatusForbidden, "loopback listener only", "-admin-token-file")

	const tok = "the-admin-token-of-this-test-0123"
	file := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base = serveApp(t, nil, "-addr", "0.0.0.0:8080", "-allow-remote", "-admin-token-file", file, "-db", filepath.Join(t.TempDir(), "tasks.db"))
	wantAdmin(t, "GET without the token", adminDo(t, base, http.MethodGet, "", nil, nil), http.StatusUnauthorized)
	wantAdmin(t, "GET with another token", adminDo(t, base, http.MethodGet, tok+"x", nil, nil), http.StatusUnauthorized)
	r := adminDo(t, base, http.MethodPut, tok, map[string]any{"tools": []string{"lint_report"}, "fallback": "sync"}, nil)
	wantAdmin(t, "PUT with the token", r, http.StatusOK)
	if r.state.Fallback != "sync" || r.state.By != "admin:admin-token" {
		t.Fatalf("PUT answer: %+v", r.state)
	}

	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseConfig([]string{"-admin-token-file", short, "-db", filepath.Join(t.TempDir(), "x.db")}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	logger, sdk := newLogger(io.Discard, "json", 0)
	if _, err := NewApp(cfg, logger, sdk); err == nil || !strings.Contains(err.Error(), "16 characters") {
		t.Fatalf("a short admin token: %v", err)
	}
}

// TestAdminDrainSIGHUP: the admin endpoint sets the fleet's switch, the
// file's drain section this instance's own; a SIGHUP applies the file's
// section and leaves the fleet's switch as it is, and a tool either
// drains is drained.
func TestAdminDrainSIGHUP(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "mcptaskd.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("demo: true\n")
	d := startDaemon(t, "admin-hup", filepath.Join(t.TempDir(), "tasks.db"), "-config", config)
	c := d.client(true)
	wantAdmin(t, "PUT", adminDo(t, d.Base, http.MethodPut, "", map[string]any{"all": true, "reason": "incident 12"}, nil), http.StatusOK)
	if err := d.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the SIGHUP handled", func() (bool, error) {
		return strings.Contains(d.Logs(), "this instance's drain switch applied"), nil
	})
	if !drainRefused(t, c, "lint_report", nil) {
		t.Fatal("a SIGHUP undid the fleet's drain")
	}
	if r := adminDo(t, d.Base, http.MethodGet, "", nil, nil); !r.state.All || r.state.Reason != "incident 12" || r.state.At.IsZero() || r.state.Local.All {
		t.Fatalf("GET after the SIGHUP: %+v", r.state)
	}
	write("demo: true\ndrain: {tools: [long_computation]}\n")
	if err := d.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the changed file applied", func() (bool, error) {
		r := adminDo(t, d.Base, http.MethodGet, "", nil, nil)
		return len(r.state.Local.Tools) == 1, nil
	})
	wantAdmin(t, "PUT lifting the fleet's drain", adminDo(t, d.Base, http.MethodPut, "", map[string]any{"all": false}, nil), http.StatusOK)
	if drainRefused(t, c, "lint_report", nil) || !drainRefused(t, c, "long_computation", map[string]any{"n": 100}) {
		t.Fatal("after lifting the fleet's drain: want long_computation drained by the file only")
	}
}

// TestDrainFallbackSync: with drain fallback sync, a task-augmented call
// of a drained tool whose task support is optional is answered
// synchronously on both wires (2026-07-28 and 2025-11-25), while a
// required tool is still refused; the admin endpoint switches the
// fallback back to refuse.
func TestDrainFallbackSync(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "mcptaskd.yaml")
	if err := os.WriteFile(config, []byte("demo: true\ndrain: {all: true, fallback: sync}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "drain-sync", filepath.Join(t.TempDir(), "tasks.db"), "-config", config)
	args := map[string]any{"n": 1000, "steps": 2, "step_delay_ms": 0}
	const primes = "There are 168 primes up to 1000"

	t.Run("2026-07-28", func(t *testing.T) {
		c := d.client(true)
		r, err := c.Call(context.Background(), "tools/call", map[string]any{"name": "long_computation", "arguments": args, "_meta": c.Meta()}, nil)
		if err != nil || r.Error != nil {
			t.Fatalf("tools/call: %+v %v", r, err)
		}
		var res struct {
			ResultType string `json:"resultType"`
			TaskID     string `json:"taskId"`
		}
		if err := json.Unmarshal(r.Result, &res); err != nil || res.ResultType == "task" || res.TaskID != "" || !strings.Contains(string(r.Result), primes) {
			t.Fatalf("want a synchronous result, got %s", r.Result)
		}
		if !drainRefused(t, c, "deploy_with_confirmation", map[string]any{"service": "api"}) {
			t.Fatal("a required tool was not refused while drained")
		}
	})
	t.Run("2025-11-25", func(t *testing.T) {
		p := &secPrincipal{srv: &secServer{url: d.URL, logs: &lockedBuffer{}, bodies: map[string][]string{}}, principal: "anonymous", token: "unused"}
		s := p.open25(t)
		r := s.call(t, "tools/call", map[string]any{"name": "long_computation", "arguments": args, "task": map[string]any{"ttl": 60000}})
		var res struct {
			Task    json.RawMessage `json:"task"`
			Content []any           `json:"content"`
		}
		if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.Task != nil || !strings.Contains(string(r.Result), primes) {
			t.Fatalf("want a synchronous CallToolResult, got HTTP %d %s", r.HTTPStatus, r.Body)
		}
		r = s.call(t, "tools/call", map[string]any{"name": "deploy_with_confirmation", "arguments": map[string]any{"service": "api"}, "task": map[string]any{"ttl": 60000}})
		if r.Error == nil || r.Error.Code != -32010 || !strings.Contains(string(r.Error.Data), "draining") {
			t.Fatalf("a required tool while drained: want -32010 draining, got HTTP %d %s", r.HTTPStatus, r.Body)
		}
	})
	t.Run("admin sets refuse", func(t *testing.T) {
		r := adminDo(t, d.Base, http.MethodGet, "", nil, nil)
		if r.state.All || !r.state.Local.All || r.state.Local.Fallback != "sync" {
			t.Fatalf("GET: %+v", r.state)
		}
		r = adminDo(t, d.Base, http.MethodPut, "", map[string]any{"all": true, "fallback": "refuse"}, nil)
		wantAdmin(t, "PUT fallback refuse", r, http.StatusOK, `"fallback":"refuse"`)
		if !drainRefused(t, d.client(true), "long_computation", args) {
			t.Fatal("long_computation answered with the fallback refuse")
		}
	})
}

// TestDrainAndJobConfigErrors: a bad drain.fallback or jobTools.prefix is
// an error naming its line and field.
func TestDrainAndJobConfigErrors(t *testing.T) {
	t.Parallel()
	_, err := parseFileConfig([]byte("demo: true\ndrain:\n  all: true\n  fallback: later\njobTools:\n  enabled: true\n  prefix: \"job start \"\n"), func(string) string { return "" })
	if err == nil {
		t.Fatal("a bad drain.fallback and jobTools.prefix were accepted")
	}
	for _, want := range []string{`4: drain.fallback: "later": want refuse, sync, handoff or jobs`, `7: jobTools.prefix: "job start "`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the errors lack %q:\n%v", want, err)
		}
	}
	fc, err := parseFileConfig([]byte("drain: {tools: [echo], fallback: sync}\njobTools: {enabled: true, prefix: \"\"}\n"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if st := fc.drainState(); st.Fallback != "sync" || !st.Active() || fc.JobTools.prefix() != "" {
		t.Fatalf("parsed: %+v, prefix %q", st, fc.JobTools.prefix())
	}
}
