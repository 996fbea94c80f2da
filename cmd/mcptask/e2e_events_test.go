package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestEventsCLI: 'mcptask call' prints what the task emits while it
// runs; 'mcptask events' prints a task's outputs and status changes,
// -f follows them to the task's end, --json gives cursors that --from
// continues after.
func TestEventsCLI(t *testing.T) {
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	r := c.run("call", "long_computation", "n=3000", "steps=3", "step_delay_ms=40")
	expect(t, r, exitOK, []string{"There are 430 primes up to 3000"}, []string{`mcptask: output: {`, `"step":1`, `"step":3`, `"primes":430`})
	m := regexp.MustCompile(`task (\S+) started`).FindStringSubmatch(r.Stderr)
	if m == nil {
		t.Fatalf("no task ID in:\n%s", r.Stderr)
	}
	id := m[1]

	r = c.run("events", "--task", id)
	expect(t, r, exitOK, []string{`"step":1`, `"step":2`, `"step":3`, `"upto":3000`, `"primes":430`}, nil)
	if n := strings.Count(strings.TrimSpace(r.Stdout), "\n") + 1; n != 3 {
		t.Fatalf("%d lines, want the 3 steps:\n%s", n, r.Stdout)
	}
	r = c.run("events", "--status", "--task", id)
	expect(t, r, exitOK, []string{"working", "completed (ok)"}, nil)

	// --json cursors: continuing after the second step prints the third.
	r = c.run("--json", "events", "--task", id)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("--json: %d lines", len(lines))
	}
	cur := regexp.MustCompile(`"cursor":"([^"]*)"`).FindStringSubmatch(lines[1])
	if cur == nil || cur[1] == "" {
		t.Fatalf("no cursor in %s", lines[1])
	}
	r = c.run("events", "--task", id, "--from", cur[1])
	expect(t, r, exitOK, []string{`"step":3`}, nil)
	if strings.Contains(r.Stdout, `"step":2`) {
		t.Fatalf("--from repeated an event:\n%s", r.Stdout)
	}

	// -f follows a running task to its end; without --task lines carry
	// the task's ID.
	r = c.run("call", "--detach", "long_computation", "n=2000", "steps=2", "step_delay_ms=200")
	m = regexp.MustCompile(`(?m)^(\S{20,})\s*$`).FindStringSubmatch(r.Stdout)
	if r.Code != exitOK || m == nil {
		t.Fatalf("--detach:\n%s", r)
	}
	r = c.run("events", "-f", "--task", m[1])
	expect(t, r, exitOK, []string{`"step":1`, `"step":2`, `"of":2`}, nil)
	r = c.run("events")
	expect(t, r, exitOK, []string{id + `  {`, m[1] + `  {`}, nil)

	// Misuse is refused in words.
	r = c.run("events", "--now")
	expect(t, r, exitUsage, nil, []string{"add -f"})
	r = c.run("events", "--from", "garbage")
	expect(t, r, exitFailed, nil, []string{"cursor"})
}
