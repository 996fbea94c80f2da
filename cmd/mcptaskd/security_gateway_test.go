package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSecurityGatewayLateRequests: a hostile upstream, over stdio and over
// HTTP, answers alice's call at once and later, on the same connection,
// sends a log message and an elicitation about alice's data, while bob
// (another tenant) has a call of the same upstream in flight. Nothing of
// it reaches bob (his task never asks for input, his log and every answer
// he gets are clean), the late elicitation is refused, and mcptaskd's log
// does not carry its payload.
func TestSecurityGatewayLateRequests(t *testing.T) {
	up := mcp.NewServer(&mcp.Implementation{Name: "web", Version: "1"}, nil)
	addHostileTools(up)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(hs.Close)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "mcptaskd.yaml")
	body := fmt.Sprintf(`demo: false
mcpServers:
  up:
    command: %q
    env:
      %s: %q
    maxSessions: 2
  web:
    url: %q
    prefix: web_
    maxSessions: 2
`, exe, upstreamEnv, filepath.Join(dir, "pids"), hs.URL)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, ps := startSecServerArgs(t, []string{"-config", config}, "alice@a", "bob@b")
	alice, bob := ps[0], ps[1]
	for _, prefix := range []string{"", "web_"} {
		kind := map[string]string{"": "stdio", "web_": "http"}[prefix]
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			late, block := filepath.Join(dir, "late"), filepath.Join(dir, "block")
			id := alice.start26(t, prefix+"late", map[string]any{"marker": late}, nil)
			if tk := alice.wait26(t, id, "terminal", terminal); tk.Status != "completed" {
				t.Fatalf("alice's call: %+v", tk)
			}
			bid := bob.start26(t, prefix+"block", map[string]any{"marker": block}, nil)
			waitUntil(t, 30*time.Second, "bob's call running upstream", func() (bool, error) {
				_, err := os.Stat(block + ".started")
				return err == nil, nil
			})
			if err := os.WriteFile(late+".go", nil, 0o600); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 30*time.Second, "the late elicitation answered", func() (bool, error) {
				if tk := bob.get26(t, bid); tk.Status == "input_required" {
					t.Fatalf("bob's task asks for input: alice's question reached another tenant: %+v", tk)
				}
				_, err := os.Stat(late)
				return err == nil, nil
			})
			if out, _ := os.ReadFile(late); !strings.HasPrefix(string(out), "refused:") {
				t.Errorf("the late elicitation: %s; want it refused", out)
			}
			if r := bob.call26(t, "tasks/cancel", map[string]any{"taskId": bid}); r.Error != nil {
				t.Fatalf("bob's cancel: %s", r.Body)
			}
			bob.wait26(t, bid, "terminal", func(tk *wiretest.Task) bool { return terminal(tk) })
			r := bob.call26(t, "resources/read", map[string]any{"uri": "mcptask://tasks/" + bid + "/log"})
			if strings.Contains(r.Body, "alice-private-data") {
				t.Errorf("bob's task log: %s", r.Body)
			}
		})
	}
	for _, b := range srv.received(bob) {
		if strings.Contains(b, "alice-private-data") {
			t.Errorf("bob received alice's data: %s", b)
		}
	}
	if l := srv.logs.String(); strings.Contains(l, "alice-private-data") {
		t.Errorf("mcptaskd's log carries the refused request's payload")
	}
}
