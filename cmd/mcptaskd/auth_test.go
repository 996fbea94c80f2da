package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// TestAuthentication serves mcptaskd in-process with a tokens file: /mcp
// needs a bearer token (401 with an RFC 6750 challenge otherwise),
// /healthz does not, each task is visible to its creator only (to anyone
// else it is exactly an unknown task), and a token that expires while its
// task runs stops working without stopping the task.
func TestAuthentication(t *testing.T) {
	dir := t.TempDir()
	hash := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	const (
		aliceToken = "alice-token-0123456789"
		shortToken = "alice-short-lived-0123"
		bobToken   = "bob-token-0123456789ab"
	)
	shortExpiry := time.Now().Add(3 * time.Second)
	tokens := `[
		{"token_sha256": "` + hash(aliceToken) + `", "principal": "alice", "tenant": "acme", "scopes": ["tasks"]},
		{"token": "` + shortToken + `", "principal": "alice", "tenant": "acme", "expires": "` + shortExpiry.Format(time.RFC3339Nano) + `"},
		{"token_sha256": "` + hash(bobToken) + `", "principal": "bob", "tenant": "globex"}
	]`
	if err := os.WriteFile(filepath.Join(dir, "tokens.json"), []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	base := serveApp(t, nil, "-db", filepath.Join(dir, "tasks.db"), "-tokens", filepath.Join(dir, "tokens.json"))
	ctx := context.Background()

	client := func(token string) *wiretest.Client {
		return &wiretest.Client{URL: base + "/mcp", Tasks: true, Header: http.Header{"Authorization": {"Bearer " + token}}}
	}
	alice, short, bob := client(aliceToken), client(shortToken), client(bobToken)

	// post sends a tools/list with the given Authorization header.
	post := func(authz string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/list")
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	t.Run("no token", func(t *testing.T) {
		resp := post("")
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Bearer realm="mcptaskd"` {
			t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	})
	t.Run("bad token", func(t *testing.T) {
		for _, authz := range []string{"Bearer not-a-known-token", "Bearer " + aliceToken + "x", "Bearer a.b.c"} {
			resp := post(authz)
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Bearer realm="mcptaskd", error="invalid_token"` {
				t.Fatalf("%q: %d %q", authz, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		}
	})
	t.Run("good token", func(t *testing.T) {
		if err := bob.Result(ctx, "tools/list", nil, nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("healthz needs no token", func(t *testing.T) {
		resp, err := http.Get(base + "/healthz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%v %v", resp, err)
		}
		resp.Body.Close()
	})

	t.Run("tasks are bound to their creator", func(t *testing.T) {
		deploy := startTask(t, alice, "deploy_with_confirmation", map[string]any{"service": "api", "build_steps": 1, "step_delay_ms": 0})
		long := startTask(t, alice, "long_computation", map[string]any{"n": 1000, "steps": 5, "step_delay_ms": 60000})
		bobs := startTask(t, bob, "long_computation", map[string]any{"n": 1000, "steps": 5, "step_delay_ms": 60000})
		tk := waitTask(t, alice, deploy, 30*time.Second, "input_required", func(tk *wiretest.Task) bool { return tk.Status == "input_required" || terminal(tk) })
		key := elicitKey(t, tk, "api")

		// call sends method on id's behalf and returns its JSON-RPC error
		// with id replaced by "ID", to compare with an unknown task's.
		call := func(c *wiretest.Client, method, id string) (int64, string) {
			t.Helper()
			params := map[string]any{"taskId": id}
			if method == "tasks/update" {
				params["inputResponses"] = map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}
			}
			resp, err := c.Call(ctx, method, params, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Error == nil {
				return 0, string(resp.Result)
			}
			return resp.Error.Code, strings.ReplaceAll(resp.Error.Message, id, "ID") + string(resp.Error.Data)
		}
		unknown := "tsk_" + strings.Repeat("0", 32)
		for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			wantCode, wantMsg := call(bob, method, unknown)
			if wantCode != -32602 {
				t.Fatalf("%s of an unknown task: %d %s, want -32602", method, wantCode, wantMsg)
			}
			for _, c := range []struct {
				who    string
				client *wiretest.Client
				id     string
			}{{"bob on alice's deploy", bob, deploy}, {"bob on alice's computation", bob, long}, {"alice on bob's computation", alice, bobs}} {
				if code, msg := call(c.client, method, c.id); code != wantCode || msg != wantMsg {
					t.Errorf("%s, %s: %d %q, want exactly the unknown task's %d %q", c.who, method, code, msg, wantCode, wantMsg)
				}
			}
		}
		// Nothing changed: alice's deploy still waits, her computation runs.
		if tk, err := alice.Get(ctx, deploy); err != nil || tk.Status != "input_required" {
			t.Fatalf("deploy after bob's attempts: %+v %v", tk, err)
		}
		if tk, err := alice.Get(ctx, long); err != nil || tk.Status != "working" {
			t.Fatalf("computation after bob's attempts: %+v %v", tk, err)
		}
		// The owners succeed.
		if code, msg := call(alice, "tasks/update", deploy); code != 0 {
			t.Fatalf("alice's update: %d %s", code, msg)
		}
		r := resultOf(t, waitTask(t, alice, deploy, 30*time.Second, "terminal", terminal))
		if r.text() != "Deployed api@latest to production." {
			t.Fatalf("deploy result %q", r.text())
		}
		for _, c := range []struct {
			client *wiretest.Client
			id     string
		}{{alice, long}, {bob, bobs}} {
			if code, msg := call(c.client, "tasks/cancel", c.id); code != 0 {
				t.Fatalf("owner's cancel: %d %s", code, msg)
			}
			if tk, err := c.client.Get(ctx, c.id); err != nil || tk.Status != "cancelled" {
				t.Fatalf("after cancel: %+v %v", tk, err)
			}
		}
	})

	t.Run("token expiring mid-task", func(t *testing.T) {
		if time.Until(shortExpiry) < time.Second {
			t.Skip("the short-lived token expired before the test could use it (slow machine)")
		}
		id := startTask(t, short, "long_computation", map[string]any{"n": 1000, "steps": 4, "step_delay_ms": 1500})
		time.Sleep(time.Until(shortExpiry) + 100*time.Millisecond)
		resp, err := short.Call(ctx, "tasks/get", map[string]any{"taskId": id}, nil)
		if err == nil || !strings.Contains(err.Error(), "HTTP 401") {
			t.Fatalf("tasks/get with the expired token: %+v %v, want HTTP 401", resp, err)
		}
		if resp := post("Bearer " + shortToken); resp.StatusCode != http.StatusUnauthorized ||
			resp.Header.Get("WWW-Authenticate") != `Bearer realm="mcptaskd", error="invalid_token"` {
			t.Fatalf("expired token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		// The task kept running; the same principal's other token sees it finish.
		tk, err := alice.Get(ctx, id)
		if err != nil || terminal(tk) {
			t.Fatalf("task after its token expired: %+v %v, want it still running", tk, err)
		}
		r := resultOf(t, waitTask(t, alice, id, 30*time.Second, "terminal", terminal))
		if !strings.Contains(r.text(), "There are 168 primes up to 1000") {
			t.Fatalf("result %q", r.text())
		}
		// And it stays invisible to bob.
		if _, err := bob.Get(ctx, id); err == nil || !strings.Contains(err.Error(), "-32602") {
			t.Fatalf("bob's get: %v", err)
		}
	})
}

// TestAuthFlags checks the binary: a bad tokens file stops it with a clear
// error, and with authentication a non-loopback address needs no
// -allow-remote.
func TestAuthFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`[{"token": "short", "principal": "p"}]`), 0o600)
	out, err := exec.Command(daemonBin, "-addr", "0.0.0.0:0", "-db", filepath.Join(dir, "x.db"), "-tokens", bad).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "tokens file") || !strings.Contains(string(out), "at least 16 bytes") ||
		strings.Contains(string(out), "-allow-remote") {
		t.Fatalf("bad tokens file: want exit status 1 naming the problem, got %v: %s", err, out)
	}
}

// TestRequiredScope: with -required-scope, a valid token without the
// scope gets 403 insufficient_scope and creates nothing; one with it is
// served. Without the flag, scopes are not required (documented).
func TestRequiredScope(t *testing.T) {
	dir := t.TempDir()
	const (
		scoped   = "scoped-token-0123456789"
		unscoped = "unscoped-token-0123456"
	)
	tokens := `[
		{"token": "` + scoped + `", "principal": "alice", "tenant": "acme", "scopes": ["tasks", "other"]},
		{"token": "` + unscoped + `", "principal": "bob", "tenant": "acme", "scopes": []}
	]`
	if err := os.WriteFile(filepath.Join(dir, "tokens.json"), []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	base := serveApp(t, nil, "-db", filepath.Join(dir, "tasks.db"), "-tokens", filepath.Join(dir, "tokens.json"), "-required-scope", "tasks")
	call := func(token string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := call(unscoped)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "insufficient_scope") {
		t.Errorf("a token without the scope: %d %q %s; want 403 insufficient_scope", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
	}
	c := &wiretest.Client{URL: base + "/mcp", Header: http.Header{"Authorization": {"Bearer " + scoped}}}
	if _, err := c.CallTool(context.Background(), "echo", map[string]any{"text": "hi"}); err != nil {
		t.Errorf("a token with the scope: %v; want it served", err)
	}
}
