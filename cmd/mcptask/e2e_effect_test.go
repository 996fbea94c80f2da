package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEffectShownApart: the task's status and its domain outcome (the
// operation deploy_with_confirmation records on the ledger for its
// rollout) are shown apart, on both wires: 'call' ends with a line
// "task: completed · effect: confirmed (receipt …)", 'status' has an
// effect row, --json an operation. A server killed -9 during the rollout
// leaves the task failed and the effect unknown, and every command that
// shows the task says so: "reconcile before retrying".
func TestEffectShownApart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			c := newCLI(t, d.URL)
			r := c.run("--wire", wire, "call", "--answer", "confirm=true", "deploy_with_confirmation", "service=api", "build_steps=1", "step_delay_ms=0")
			expect(t, r, exitOK, []string{"Deployed api@latest"}, []string{"task: completed · effect: confirmed (receipt rollout-"})
			id := taskIDOf(t, r)
			expect(t, c.run("--wire", wire, "status", id), exitOK, []string{"effect:   confirmed (receipt rollout-"}, nil)
			r = c.run("--wire", wire, "--json", "status", id)
			var st struct {
				Status    string `json:"status"`
				Operation struct {
					State, Receipt, Effect string
				} `json:"operation"`
			}
			if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil || st.Status != "completed" || st.Operation.State != "confirmed" ||
				!strings.HasPrefix(st.Operation.Receipt, "rollout-") || st.Operation.Effect != "roll out api@latest to production" {
				t.Errorf("--json status: %+v, %v\n%s", st, err, r.Stdout)
			}
			// Declined: nothing rolled out, no operation, no effect line.
			r = c.run("--wire", wire, "call", "--answer", "confirm=false", "deploy_with_confirmation", "service=db", "build_steps=1", "step_delay_ms=0")
			expect(t, r, exitOK, []string{"aborted"}, nil)
			if strings.Contains(r.Stderr, "effect:") {
				t.Errorf("a deployment that did nothing shows an effect:\n%s", r.Stderr)
			}
		})
	}

	// kill -9 during the rollout: the effect is unknown.
	db := filepath.Join(t.TempDir(), "tasks.db")
	d = startDaemon(t, "-db", db)
	c := newCLI(t, d.URL)
	r := c.run("call", "--detach", "deploy_with_confirmation", "service=web", "build_steps=1", "step_delay_ms=8000")
	expect(t, r, exitOK, nil, nil)
	id := strings.TrimSpace(r.Stdout)
	deadline := time.Now().Add(60 * time.Second)
	for {
		// Each short wait answers the question once it is asked; then
		// the rollout (8 s) runs.
		c.run("wait", id, "--answer", "confirm=true", "--timeout", "1s")
		r = c.run("--json", "status", id)
		var st struct {
			Operation *struct{ State string } `json:"operation"`
		}
		if json.Unmarshal([]byte(r.Stdout), &st) == nil && st.Operation != nil && st.Operation.State == "submitted" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rollout never showed as submitted: %s", r)
		}
	}
	d.Kill()
	d = startDaemon(t, "-db", db)
	c = newCLI(t, d.URL)
	expect(t, c.run("status", id), exitOK, []string{"status:   failed", "effect:   unknown (receipt rollout-", "reconcile before retrying"}, nil)
	expect(t, c.run("wait", id), exitFailed, nil, []string{"task: failed · effect: unknown (receipt rollout-", "reconcile before retrying"})
	expect(t, c.run("ops", "--state", "unknown"), exitOK, []string{"unknown", id, "roll out web@latest to production"}, nil)

	// Calling the tool again is refused while that effect is unknown;
	// --despite-unknown says so explicitly.
	r = c.run("call", "--answer", "confirm=true", "deploy_with_confirmation", "service=web", "build_steps=1", "step_delay_ms=0")
	expect(t, r, exitFailed, nil, []string{"left its effect unknown", id, "reconcile it", "--despite-unknown"})
	r = c.run("call", "--despite-unknown", "--answer", "confirm=true", "deploy_with_confirmation", "service=web", "build_steps=1", "step_delay_ms=0")
	expect(t, r, exitOK, []string{"Deployed web@latest"}, []string{"effect: confirmed"})
}

// taskIDOf returns the task ID a call's notes name ("task ID started").
func taskIDOf(t *testing.T, r result) string {
	t.Helper()
	for _, f := range strings.Fields(r.Stderr) {
		if len(f) == 32 && strings.Trim(f, "abcdefghijklmnopqrstuvwxyz0123456789") == "" {
			return f
		}
	}
	t.Fatalf("no task ID in the call's output:\n%s", r.Stderr)
	return ""
}
