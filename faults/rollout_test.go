package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
)

// adminPost sends a JSON body (nil: a GET) to an admin endpoint of d (on
// loopback, no token) and returns the status and the body.
func adminPost(t *testing.T, d *daemon, path string, body any) (int, string) {
	t.Helper()
	method, rd := http.MethodGet, io.Reader(nil)
	if body != nil {
		b, _ := json.Marshal(body)
		method, rd = http.MethodPost, bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(d.URL, "/mcp")+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// refused reports whether a task-augmented call of tool through c is
// refused by a drain switch.
func refused(t *testing.T, c *client.Client, tool string, args map[string]any) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.CallTool(ctx, tool, args)
	return err != nil && strings.Contains(err.Error(), "draining")
}

// TestRolloutPostgresRestart: the fleet's switches and pending approvals
// through a restart of the PostgreSQL server and a kill -9. Two mcptaskd
// share a schema; A drains lint_report (fleet-wide) and B holds a call of
// the approval-gated long_computation; PostgreSQL restarts: B still
// refuses lint_report (the switches last read stay applied while the
// store is away, and are read again after), the approval is still
// pending, and approving it on A runs the work once to completion. A is
// killed with SIGKILL while a second approval waits; B approves it. B
// lifts the drain and A, restarted, serves lint_report again.
func TestRolloutPostgresRestart(t *testing.T) {
	dsn := pgDSN(t)
	schema := ownSchema(t, dsn)
	config := filepath.Join(t.TempDir(), "mcptaskd.yaml")
	if err := os.WriteFile(config, []byte("demo: true\nrollout:\n  long_computation:\n    approval: {approvers: [\"*\"]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	extra := []string{"-config", config, "-lease", "3s", "-db", filepath.Join(t.TempDir(), "unused.db")}
	a := postgresDaemon(t, dsn, schema, extra...)
	b := postgresDaemon(t, dsn, schema, extra...)
	ca, cb := dial(t, a.URL, wires[0], nil), dial(t, b.URL, wires[1], nil)
	lint := map[string]any{"source": "ok"}
	small := map[string]any{"n": 1000, "steps": 2, "step_delay_ms": 0}

	if code, body := adminPost(t, a, "/admin/drain", map[string]any{"tools": []string{"lint_report"}, "reason": "fault round"}); code != http.StatusOK {
		t.Fatalf("drain on A: %d %s", code, body)
	}
	waitFor(t, "B applying the fleet's drain", 5*time.Second, func() bool { return refused(t, cb, "lint_report", lint) })
	ctx := context.Background()
	held, err := cb.CallTool(ctx, "long_computation", small)
	if err != nil || held.Task == nil || !strings.Contains(held.Task.StatusMessage, "waiting for approval") {
		t.Fatalf("the gated call on B: %+v %v", held, err)
	}

	t.Logf("restarting the PostgreSQL server at %s", hostOf(t, dsn))
	out, err := exec.Command("sh", "-c", "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main restart").CombinedOutput()
	if err != nil {
		t.Skipf("SKIPPED: restarting PostgreSQL failed, so this round cannot run here: %v\n%s", err, out)
	}
	counts.faults.Add(1)
	waitFor(t, "PostgreSQL to accept connections again", 60*time.Second, func() bool { return pgPing(dsn) == nil })
	if !refused(t, cb, "lint_report", lint) {
		t.Fatal("B serves the drained tool after the PostgreSQL restart")
	}
	waitFor(t, "the approval on A after the restart", 60*time.Second, func() bool {
		code, _ := adminPost(t, a, "/admin/decide", map[string]any{"taskId": held.Task.ID, "approve": true, "reason": "after the restart"})
		return code == http.StatusOK
	})
	res, err := cb.Wait(ctx, held.Task.ID, nil)
	if err != nil || !strings.Contains(toolResultText(res), "168 primes") {
		t.Fatalf("the approved task: %+v %v", res, err)
	}

	// A pending approval through a kill -9 of the instance that took it.
	second, err := ca.CallTool(ctx, "long_computation", small)
	if err != nil || second.Task == nil {
		t.Fatalf("the second gated call: %+v %v", second, err)
	}
	a.kill9()
	if code, body := adminPost(t, b, "/admin/decide", map[string]any{"taskId": second.Task.ID, "approve": true}); code != http.StatusOK {
		t.Fatalf("approving on B after A's kill -9: %d %s", code, body)
	}
	if res, err := cb.Wait(ctx, second.Task.ID, nil); err != nil || !strings.Contains(toolResultText(res), "168 primes") {
		t.Fatalf("the task approved after the kill: %+v %v", res, err)
	}
	if code, body := adminPost(t, b, "/admin/drain", map[string]any{"all": false, "reason": "round over"}); code != http.StatusOK {
		t.Fatalf("lifting on B: %d %s", code, body)
	}
	a.start()
	ca = dial(t, a.URL, wires[0], nil)
	waitFor(t, "A serving lint_report again", 5*time.Second, func() bool { return !refused(t, ca, "lint_report", lint) })
	counts.tasks.Add(2)
}
