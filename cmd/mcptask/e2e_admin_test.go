package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminDrain: 'mcptask admin drain' against a real mcptaskd with a
// tokens file: --status, --tool, --all with --fallback, --off; a token
// without the admin scope is refused (exit 4, 403) and one with it works;
// a drained tool's call is refused by the server, and served again once
// lifted; the admin URL is derived from --url or given by --admin-url.
func TestAdminDrain(t *testing.T) {
	t.Parallel()
	const adminTok, userTok = "cli-admin-token-5e1f0a9b7c3d", "cli-user-token-8a2b4c6d0e1f"
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokens, []byte(`[{"token": "`+adminTok+`", "principal": "root", "tenant": "ops", "scopes": ["mcptask:admin"]},
		{"token": "`+userTok+`", "principal": "alice", "tenant": "acme"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "-tokens", tokens)
	c := newCLI(t, d.URL)
	c.env = []string{"MCPTASK_TOKEN=" + adminTok}
	user := newCLI(t, d.URL)
	user.env = []string{"MCPTASK_TOKEN=" + userTok}
	call := []string{"call", "long_computation", "n=1000", "steps=2", "step_delay_ms=0"}

	expect(t, c.run("admin", "drain", "--status"), exitOK, []string{"not draining"}, nil)
	expect(t, user.run("admin", "drain", "--all"), exitConnection, nil, []string{"HTTP 403", "mcptask:admin", "MCPTASK_TOKEN"})
	noToken := newCLI(t, d.URL)
	expect(t, noToken.run("admin", "drain"), exitConnection, nil, []string{"HTTP 401", "--token-file"})

	expect(t, c.run("admin", "drain", "--tool", "long_computation", "--tool", "lint_report"), exitOK,
		[]string{"fleet: draining lint_report, long_computation", "set by admin:ops/root at ", "local: not draining", "instance "}, nil)
	expect(t, user.run(call...), exitFailed, nil, []string{"draining"})

	r := c.run("--json", "admin", "drain", "--all", "--fallback", "sync", "--reason", "incident 7")
	expect(t, r, exitOK, []string{`"all":true`, `"fallback":"sync"`, `"reason":"incident 7"`, `"by":"admin:ops/root"`, `"local":{`, `"instance":`}, nil)
	// Sync fallback: long_computation (optional) answers synchronously.
	expect(t, user.run(call...), exitOK, []string{"There are 168 primes up to 1000"}, nil)

	// --admin-url names the endpoint; --url's path does not matter.
	other := newCLI(t, "")
	other.env = []string{"MCPTASK_TOKEN=" + adminTok}
	base := strings.TrimSuffix(d.URL, "/mcp")
	expect(t, other.run("--url", base+"/somewhere/else", "admin", "drain", "--off"), exitOK, []string{"not draining"}, nil)
	expect(t, user.run(call...), exitOK, []string{"There are 168 primes up to 1000"}, nil)
	expect(t, other.run("admin", "drain", "--admin-url", base+"/admin/drain", "--status"), exitOK, []string{"not draining"}, nil)

	expect(t, c.run("admin", "drain", "--all", "--off"), exitUsage, nil, []string{"one of"})
	expect(t, c.run("admin", "drain", "--all", "--fallback", "later"), exitUsage, nil, []string{"refuse, sync, handoff or jobs"})
	expect(t, c.run("admin", "nothing"), exitUsage, nil, []string{"mcptask admin drain"})
	if strings.Contains(d.Logs(), adminTok) || strings.Contains(d.Logs(), userTok) {
		t.Fatal("a token reached the daemon's log")
	}
}
