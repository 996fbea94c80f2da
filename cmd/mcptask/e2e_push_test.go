package main

import (
	"strings"
	"testing"
)

// TestPushAndNoPush: on both wires, 'mcptask call' follows the task's
// notifications that mcptaskd pushes (the verbose log says so), and with
// --no-push it polls; both print the result.
func TestPushAndNoPush(t *testing.T) {
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	const following = "following the task's notifications"
	primes := "There are 168 primes up to 1000 (computed in 3 steps)."
	for _, wire := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(wire, func(t *testing.T) {
			call := []string{"call", "--verbose", "--wire", wire, "long_computation", "n=1000", "steps=3", "step_delay_ms=50"}
			expect(t, c.run(call...), exitOK, []string{primes}, []string{following})
			noPush := append([]string{"call", "--no-push"}, call[1:]...)
			r := c.run(noPush...)
			expect(t, r, exitOK, []string{primes}, nil)
			if strings.Contains(r.Stderr, following) {
				t.Fatalf("--no-push followed the notifications\n%s", r)
			}
		})
	}
}
