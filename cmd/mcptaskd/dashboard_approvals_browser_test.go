package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// TestDashboardApprovalsBrowser drives the Approvals page of an mcptaskd
// whose long_computation takes an approval (-config rollout section) in
// headless Chromium: two calls wait, listed with their arguments; the
// operator alice (named by -admin-token-file) approves one, whose work
// then runs to completion, and denies the other with a reason, which
// ends it failed naming her; and a screenshot of the page.
func TestDashboardApprovalsBrowser(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "mcptaskd.yaml")
	if err := os.WriteFile(config, []byte(`demo: true
rollout:
  long_computation:
    approval: {approvers: ["*"], expires: 1h}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "admins.json")
	if err := os.WriteFile(tokens, []byte(`[{"token": "`+dashboardToken+`", "operator": "alice"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	auditPath := filepath.Join(dir, "audit.jsonl")
	base := serveApp(t, nil, "-db", filepath.Join(dir, "tasks.db"), "-config", config, "-admin-token-file", tokens,
		"-audit-log", auditPath, "-max-active-tasks", "0", "-create-rate", "0", "-request-rate", "0", "-max-poll-interval", "0")
	c := &wiretest.Client{URL: base + "/mcp", Tasks: true, HTTP: &http.Client{Timeout: 30 * time.Second}}
	b := newBrowser(t)

	approved := startTask(t, c, "long_computation", map[string]any{"n": 1000, "steps": 2, "step_delay_ms": 0})
	denied := startTask(t, c, "long_computation", map[string]any{"n": 2000, "steps": 1, "step_delay_ms": 0})
	for _, id := range []string{approved, denied} {
		if tk, err := c.Get(t.Context(), id); err != nil || tk.Status != "working" || !strings.HasPrefix(tk.StatusMessage, "waiting for approval by *") {
			t.Fatalf("task %s before its approval: %+v %v", id, tk, err)
		}
	}

	b.signIn(base)
	b.click("#nav-approvals")
	row := func(id string) string { return `document.getElementById("approval-` + id + `")` }
	b.waitJS("the Approvals page", `location.pathname === "/dashboard/approvals" && `+row(approved)+` && `+row(denied))
	if got := js[string](b, row(approved)+`.querySelector("td.args").textContent`); got != `{"n":1000,"step_delay_ms":0,"steps":2}` {
		t.Errorf("the approval's arguments read %q", got)
	}
	if got := b.text("#operator"); !strings.Contains(got, "You decide as alice") {
		t.Errorf("the page says %q", got)
	}
	if got := b.text("#handoffs"); !strings.Contains(got, "No task waits for an operator's outcome.") {
		t.Errorf("the handoffs say %q", got)
	}
	b.setValue("#reason-"+approved, "budget ok")
	b.screenshot("dashboard-approvals.png")

	b.click("#approve-" + approved)
	b.waitJS("the approval's flash", `location.pathname === "/dashboard/approvals" && document.querySelector("#flash") && !`+row(approved))
	if got := b.text("#flash"); !strings.Contains(got, "Task "+approved+" is approved") {
		t.Errorf("the flash says %q", got)
	}
	done := waitTask(t, c, approved, browserWait, "the approved task's completion", terminal)
	if done.Status != "completed" {
		t.Fatalf("the approved task ended %s: %+v", done.Status, done.Error)
	}
	// Its page says so too (it left the Approvals page: opened directly).
	b.navigate(base + "/dashboard/tasks/" + approved)
	b.waitJS("the completed task's page", `document.querySelector("#task-status") && document.querySelector("#task-status").textContent === "completed"`)

	b.navigate(base + "/dashboard/approvals")
	b.setValue("#reason-"+denied, "too big for today")
	b.click("#deny-" + denied)
	b.waitJS("the denial's flash", `document.querySelector("#flash") && !`+row(denied)+` && document.querySelector("#approvals tr.empty")`)
	gone := waitTask(t, c, denied, browserWait, "the denied task's end", terminal)
	if gone.Status != "failed" || gone.StatusMessage != "denied by alice: too big for today" {
		t.Errorf("the denied task: %s %q", gone.Status, gone.StatusMessage)
	}
	b.noProblems()

	// The audit trail names the operator alice for both decisions.
	raw, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, `"event":"task.gate"`) && strings.Contains(line, `"principal":"alice"`) {
			for _, s := range []string{"approved", "denied"} {
				if strings.Contains(line, `"step":"`+s+`"`) {
					steps = append(steps, s)
				}
			}
		}
	}
	if strings.Join(steps, ",") != "approved,denied" {
		t.Errorf("the audit trail's decisions by alice: %v\n%s", steps, raw)
	}
}
