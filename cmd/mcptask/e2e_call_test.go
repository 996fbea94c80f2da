package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCallOutcomes calls each demo tool on both wires and checks output
// and exit code.
func TestCallOutcomes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d.URL)
			r := c.run("--wire", wire, "call", "long_computation", "n=1000", "steps=3", "step_delay_ms=150")
			expect(t, r, exitOK, []string{"There are 168 primes up to 1000 (computed in 3 steps)."},
				[]string{"started (long_computation)", "mcptask: working: step "})

			r = c.run("--wire", wire, "call", "lint_report", "line_delay_ms=0")
			expect(t, r, exitToolError, []string{"Found 3 problems in 6 lines:"}, []string{"isError"})

			r = c.run("--wire", wire, "call", "flaky_migration", "step_delay_ms=0")
			expect(t, r, exitFailed, nil, []string{"failed at step 2 of 3", "-32603", `"failedStep":2`})

			r = c.run("--wire", wire, "call", "echo", "text=hello world")
			expect(t, r, exitOK, []string{"hello world"}, nil)

			// The value of a string property stays text even when it reads
			// as JSON.
			r = c.run("--wire", wire, "call", "echo", "text=1.50")
			expect(t, r, exitOK, []string{"1.50"}, nil)

			// Arguments as JSON: --args, a JSON object, key:=json, stdin.
			expect(t, c.run("--wire", wire, "call", "long_computation", `--args={"n": 100, "steps": 1}`, "step_delay_ms:=0"),
				exitOK, []string{"There are 25 primes up to 100 (computed in 1 steps)."}, nil)
			expect(t, c.run("--wire", wire, "call", "long_computation", `{"n": 30, "step_delay_ms": 0}`, "steps=2"),
				exitOK, []string{"There are 10 primes up to 30 (computed in 2 steps)."}, nil)
			expect(t, c.runInput(`{"n": 10, "steps": 1, "step_delay_ms": 0}`, "--wire", wire, "call", "long_computation", "--args", "-"),
				exitOK, []string{"There are 4 primes up to 10"}, nil)

			// Arguments the input schema rejects: refused before the
			// call (exit 5, on both wires), saying what is wrong in words.
			for bad, words := range map[string]string{
				"n=abc":     `n must be a whole number, not "abc"`,
				"bogus=1":   "there is no field bogus (the fields are",
				"steps=1.5": "steps must be a whole number, not 1.5",
			} {
				r := c.run("--wire", wire, "call", "long_computation", bad)
				expect(t, r, exitUsage, nil, []string{words, "nothing was called"})
				if strings.Contains(r.Stderr, "validating") {
					t.Errorf("%s: the raw validator text is shown:\n%s", bad, r.Stderr)
				}
			}
			// Arguments given as JSON are checked by the server: a tool
			// error (exit 1).
			expect(t, c.run("--wire", wire, "call", "long_computation", `--args={"n": "abc"}`), exitToolError, nil, nil)

			// Arguments the tool itself rejects: it answers with isError.
			expect(t, c.run("--wire", wire, "call", "long_computation", "n=1", "step_delay_ms=0"), exitToolError, []string{"n must be between 2"}, nil)

			// Nothing is left in the journal.
			r = c.run("list")
			expect(t, r, exitOK, nil, []string{"no tasks in flight"})
		})
	}
}

func TestUnknownTool(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := newCLI(t, d.URL).run("call", "no_such_tool")
	expect(t, r, exitFailed, nil, []string{"no_such_tool"})
}

func TestDetachThenWait(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d.URL)
			r := c.run("--wire", wire, "call", "--detach", "long_computation", "n=1000", "steps=4", "step_delay_ms=100")
			expect(t, r, exitOK, nil, []string{"wait for it with"})
			id := strings.TrimSpace(r.Stdout)
			if !regexp.MustCompile(`^[a-z2-7]{20,}$`).MatchString(id) {
				t.Fatalf("--detach printed %q, not a task ID\n%s", id, r)
			}
			expect(t, c.run("list"), exitOK, []string{id, "long_computation"}, nil)
			expect(t, c.run("status", id), exitOK, []string{"task " + id, "status:"}, nil)
			expect(t, c.run("--wire", wire, "wait", id), exitOK, []string{"There are 168 primes up to 1000 (computed in 4 steps)."}, nil)
			expect(t, c.run("list"), exitOK, nil, []string{"no tasks in flight"})
			// A task that has ended is still there to see and to wait for.
			expect(t, c.run("status", id), exitOK, nil, nil)
		})
	}
}

func TestCancelEndsTheWaiter(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d.URL)
			waiter := c.start("--wire", wire, "call", "long_computation", "n=1000", "steps=5", "step_delay_ms=60000")
			id := waiter.waitStderr(taskStarted, 30*time.Second)[1]
			waiter.waitStderr(regexp.MustCompile(`step 1 of 5`), 30*time.Second)
			expect(t, c.run("--wire", wire, "cancel", id), exitOK, []string{"task " + id + ": cancelled"}, nil)
			r := waiter.wait(30 * time.Second)
			expect(t, r, exitCancelled, nil, []string{"was cancelled"})
			// Cancelling again changes nothing.
			expect(t, c.run("--wire", wire, "cancel", id), exitOK, []string{id}, nil)
		})
	}
}

// TestInterrupt stops waits with SIGINT (Ctrl-C): the task keeps running,
// or is cancelled with --cancel-on-interrupt.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	p := c.start("call", "long_computation", "n=1000", "steps=3", "step_delay_ms=500")
	id := p.waitStderr(taskStarted, 30*time.Second)[1]
	p.waitStderr(regexp.MustCompile(`working: step`), 30*time.Second)
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	expect(t, p.wait(30*time.Second), exitInterrupted, nil, []string{"interrupted; task " + id + " keeps running", "wait " + id, "resume"})
	expect(t, c.run("wait", id), exitOK, []string{"There are 168 primes up to 1000 (computed in 3 steps)."}, nil)

	p = c.start("call", "--cancel-on-interrupt", "long_computation", "n=1000", "steps=3", "step_delay_ms=60000")
	id = p.waitStderr(taskStarted, 30*time.Second)[1]
	p.waitStderr(regexp.MustCompile(`working: step`), 30*time.Second)
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	expect(t, p.wait(30*time.Second), exitCancelled, nil, []string{"task " + id + " is cancelled"})
	expect(t, c.run("status", id), exitOK, []string{"cancelled"}, nil)
	expect(t, c.run("resume"), exitOK, nil, []string{"nothing to resume"})
}

func TestDeadline(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	r := c.run("call", "--timeout", "1s", "long_computation", "n=1000", "steps=5", "step_delay_ms=60000")
	expect(t, r, exitDeadline, nil, []string{"keeps running", "wait for it again with: mcptask", " wait "})
	id := strings.TrimSpace(r.Stdout)
	if id == "" || strings.Contains(id, "\n") {
		t.Fatalf("want the task ID alone on stdout\n%s", r)
	}
	expect(t, c.run("--deadline", "200ms", "wait", id), exitDeadline, []string{id}, nil)
	expect(t, c.run("status", id), exitOK, []string{"working"}, nil)
	expect(t, c.run("--timeout", "300ms", "resume"), exitDeadline, []string{id}, nil)
	expect(t, c.run("cancel", id), exitOK, []string{"cancelled"}, nil)
	expect(t, c.run("wait", id), exitCancelled, nil, nil)
	expect(t, c.run("resume"), exitOK, nil, []string{"nothing to resume"})
}

// TestElicitation answers deploy_with_confirmation's question without a
// terminal: with --answer, --answers, and by declining.
func TestElicitation(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d.URL)
			deploy := []string{"--wire", wire, "call", "deploy_with_confirmation", "service=api", "version=2.0", "build_steps=1", "step_delay_ms=0"}

			r := c.run(append(deploy, "--answer", "confirm=true")...)
			expect(t, r, exitOK, []string{"Deployed api@2.0 to production."}, []string{"Roll it out to production now?", "answered from --answer"})

			r = c.run(deploy...)
			expect(t, r, exitOK, []string{"aborted: the user declined"}, []string{"declined: standard input is not a terminal"})

			answers := filepath.Join(t.TempDir(), "answers.json")
			if err := os.WriteFile(answers, []byte(`{"confirm": false}`), 0o600); err != nil {
				t.Fatal(err)
			}
			expect(t, c.run(append(deploy, "--answers", answers)...), exitOK, []string{"aborted: the user did not confirm"}, nil)
			expect(t, c.runInput(`{"action": "cancel"}`, append(deploy, "--answers", "-")...), exitOK, []string{`dismissed (action "cancel")`}, nil)
			expect(t, c.run(append(deploy, "--answer", "decline")...), exitOK, []string{"aborted: the user declined"}, nil)
		})
	}
}

// TestDetachSaysAnswersAreNotKept: --answer with --detach would be lost
// silently (the answers live in the process that exits); mcptask says so,
// and 'mcptask wait' with the answers finishes the task.
func TestDetachSaysAnswersAreNotKept(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	r := c.run("call", "--detach", "--answer", "confirm=true", "deploy_with_confirmation", "service=api", "build_steps=1", "step_delay_ms=0")
	expect(t, r, exitOK, nil, []string{"not kept with --detach", "wait"})
	id := strings.TrimSpace(r.Stdout)
	expect(t, c.run("wait", "--answer", "confirm=true", id), exitOK, []string{"Deployed api@latest to production."}, nil)
}

// TestToolErrorSaid: a task that completed with a tool error (the tool
// reported isError: true) is said to be one by 'status' (both wires, as
// the server tells) and by 'wait', which exits 1.
func TestToolErrorSaid(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d.URL)
			r := c.run("--wire", wire, "call", "--detach", "lint_report", "line_delay_ms=0")
			expect(t, r, exitOK, nil, nil)
			id := strings.TrimSpace(r.Stdout)
			expect(t, c.run("--wire", wire, "wait", id), exitToolError, []string{"Found 3 problems in 6 lines:"},
				[]string{"completed with a tool error (isError: true)"})
			want := "status:   completed with a tool error"
			if wire == "2025-11-25" {
				want = "status:   failed (a tool error: the tool reported isError: true)"
			}
			expect(t, c.run("--wire", wire, "status", id), exitOK, []string{want}, nil)
			r = c.run("--wire", wire, "--json", "status", id)
			expect(t, r, exitOK, []string{`"outcome": "tool_error"`}, nil)
		})
	}
}

// TestAnswerCheckedBeforeSending: an answer that does not fit the
// question's requested schema is not sent (a 2025-11-25 tool would ask
// again and again, a 2026-07-28 server refuses it): mcptask says which
// field breaks which rule, in words, and exits 5; the task still waits,
// and a fitting answer later ends it, with the same final line on both
// wires.
func TestAnswerCheckedBeforeSending(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d.URL)
			r := c.run("--wire", wire, "call", "--answer", "confirm=maybe", "deploy_with_confirmation", "service=api", "build_steps=1", "step_delay_ms=0")
			expect(t, r, exitUsage, nil, []string{`confirm must be true or false, not "maybe"`, "nothing was sent, and the task still waits"})
			m := regexp.MustCompile(`the question of task ([a-z2-7]+)`).FindStringSubmatch(r.Stderr)
			if m == nil {
				t.Fatalf("no task named:\n%s", r)
			}
			r = c.run("--wire", wire, "wait", "--answer", "confirm=true", m[1])
			expect(t, r, exitOK, []string{"api"}, []string{"mcptask: completed"})
		})
	}
}

// TestDetachForbidden: --detach of a tool that forbids tasks is refused
// before anything is called (exit 5), instead of running it as a plain
// call.
func TestDetachForbidden(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	r := c.run("call", "--detach", "echo", "text=hi")
	expect(t, r, exitUsage, nil, []string{"--detach: echo runs only as a plain call (its taskSupport is forbidden)", "nothing was called"})
	if r.Stdout != "" {
		t.Errorf("the tool ran: %q", r.Stdout)
	}
}

// TestListPaced: 'mcptask list' of more journaled tasks than the
// server's request rate lets a requester read at once is paced by the
// server's retry hints: every row has its status, none is "unknown".
func TestListPaced(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "-request-rate", "20", "-request-burst", "5", "-create-rate", "0")
	c := newCLI(t, d.URL)
	for range 30 {
		expect(t, c.run("call", "--detach", "long_computation", "n=1000000", "steps=10000", "step_delay_ms=1000"), exitOK, nil, nil)
	}
	r := c.run("list")
	expect(t, r, exitOK, []string{"working"}, nil)
	if n := strings.Count(r.Stdout, "working"); n != 30 || strings.Contains(r.Stdout, "unknown") {
		t.Fatalf("list shows %d working tasks of 30:\n%s", n, r)
	}
}
