package main

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// dashClientFrom is newDashClient whose connections come from the
// loopback address local.
func dashClientFrom(t *testing.T, base, local string) *dashClient {
	d := newDashClient(t, base)
	jar, _ := cookiejar.New(nil)
	c := httpClientFrom(local)
	c.Jar, c.CheckRedirect = jar, d.c.CheckRedirect
	d.c = c
	return d
}

// TestBearerGuessesLimitedPerSource (issue 25, L3): a source that sends
// refused bearer tokens gets 429 with Retry-After past
// -auth-failures-per-source, on /mcp and on the admin endpoint alike,
// while another source is served, its own bad token still a plain 401.
// (Bearer guesses were never limited.)
func TestBearerGuessesLimitedPerSource(t *testing.T) {
	dir := t.TempDir()
	const token = "holder-token-0123456789"
	base := serveApp(t, nil, "-db", filepath.Join(dir, "tasks.db"), "-tokens", writeTokensFile(t, dir, map[string]string{token: "holder"}),
		"-auth-failures-per-source", "5")
	do := func(c *http.Client, method, path, tok string) *http.Response {
		t.Helper()
		var body *strings.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`)
		} else {
			body = strings.NewReader("")
		}
		req, _ := http.NewRequest(method, base+path, body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/list")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	attacker, operator := httpClientFrom("127.0.0.3"), httpClientFrom("127.0.0.2")
	for i := range 5 {
		if resp := do(attacker, http.MethodPost, "/mcp", "guess-"+strings.Repeat("x", i+10)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i+1, resp.StatusCode)
		}
	}
	for _, path := range []string{"/mcp", "/admin/drain"} {
		method := http.MethodPost
		if path == "/admin/drain" {
			method = http.MethodGet
		}
		resp := do(attacker, method, path, "guess-after-the-budget")
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s after 5 refused tokens: %d Retry-After %q, want 429 with Retry-After", path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	// Another source: its token is served, its bad token a plain 401.
	if resp := do(operator, http.MethodPost, "/mcp", token); resp.StatusCode != http.StatusOK {
		t.Fatalf("a token holder from another source: %d", resp.StatusCode)
	}
	if resp := do(operator, http.MethodPost, "/mcp", "a-typo-of-the-token"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("one bad token from another source: %d, want 401", resp.StatusCode)
	}
}

// TestDashboardSignInLimitedPerSource (issue 25, L3): an attacker's bad
// sign-ins are refused past the limit (429) but the operator, from
// another address, signs in. (The limit was global: 30 bad sign-ins
// locked the operator out.)
func TestDashboardSignInLimitedPerSource(t *testing.T) {
	const adminTok = "admin-token-0123456789abcdef"
	tokens := writeTokens(t, map[string]any{"token": adminTok, "principal": "root", "tenant": "ops", "scopes": []string{"mcptask:admin"}})
	app, base := serveAppOf(t, nil, "-db", filepath.Join(t.TempDir(), "tasks.db"), "-tokens", tokens)
	t.Cleanup(app.dashboard.Close)
	attacker := dashClientFrom(t, base, "127.0.0.3")
	limited := false
	for i := range 30 {
		resp, _ := attacker.do(http.MethodPost, "/dashboard/login", url.Values{"token": {"guess-" + strings.Repeat("y", i+10)}})
		switch resp.StatusCode {
		case http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			limited = true
		default:
			t.Fatalf("bad sign-in %d: %s", i+1, resp.Status)
		}
	}
	if !limited {
		t.Fatal("30 bad sign-ins from one address were never limited")
	}
	operator := dashClientFrom(t, base, "127.0.0.2")
	if resp, _ := operator.do(http.MethodPost, "/dashboard/login", url.Values{"token": {adminTok}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the operator's sign-in from another address after the attacker's 30: %s", resp.Status)
	}
	if resp, _ := operator.do(http.MethodGet, "/dashboard/", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("the operator's list: %s", resp.Status)
	}
}
