package main

import (
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/faultproxy"
)

// proxiedDaemon starts mcptaskd behind a fault proxy for the test.
func proxiedDaemon(t *testing.T) (*daemon, *faultproxy.Proxy) {
	t.Helper()
	d := startDaemon(t)
	p, err := faultproxy.New(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return d, p
}

// TestLostCreateReply: a proxy loses every answer to the tools/call that
// creates a deploy. mcptask says the outcome is unknown (exit 4, not
// "refused"), the journal and 'mcptask list' know of the call, and
// 'mcptask resume' finishes it once the network is back: one task, one
// deploy. Both wires.
func TestLostCreateReply(t *testing.T) {
	t.Parallel()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			d, p := proxiedDaemon(t)
			p.LoseReplies("tools/call", -1)
			c := newCLI(t, p.URL)
			deploy := []string{"--wire", wire, "call", "deploy_with_confirmation", "service=x", "build_steps=1", "step_delay_ms=0", "--answer", "confirm=true"}
			r := c.run(deploy...)
			expect(t, r, exitConnection, nil, []string{"outcome unknown", "resume"})
			for _, wrong := range []string{"refused", "failed"} {
				if strings.Contains(r.Stderr, wrong) {
					t.Errorf("a lost answer is reported as %q:\n%s", wrong, r.Stderr)
				}
			}
			if p.Seen() < 2 {
				t.Errorf("the create was sent %d times; want it re-sent with its key before giving up", p.Seen())
			}
			expect(t, c.run("list"), exitOK, []string{"unknown", "deploy_with_confirmation"}, nil)

			p.LoseReplies("tools/call", 0) // the network is back
			expect(t, c.run("resume", "--answer", "confirm=true"), exitOK, []string{"Deployed x@latest to production."}, nil)
			if n := d.count("task created"); n != 1 {
				t.Fatalf("%d tasks created over %d deliveries of the call, want 1\n%s", n, p.Seen(), d.Logs())
			}
			expect(t, c.run("list"), exitOK, nil, []string{"no tasks in flight"})
		})
	}
}

// TestCallRidesOutAnOutage: the server becomes unreachable while mcptask
// waits for its task (its connections cut, the notification stream with
// them); mcptask keeps polling with backoff and prints the result once it
// answers again (one failed poll ended the call, exit 4).
func TestCallRidesOutAnOutage(t *testing.T) {
	t.Parallel()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			_, p := proxiedDaemon(t)
			c := newCLI(t, p.URL)
			run := c.start("--wire", wire, "call", "long_computation", "n=100000", "steps=20", "step_delay_ms=100")
			run.waitStderr(taskStarted, 30*time.Second)
			p.SetDown(true)
			p.CutConnections()
			deadline := time.Now().Add(30 * time.Second)
			for p.Cut() < 3 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond) // polling the proxy's counter, not timing the test
			}
			p.SetDown(false)
			expect(t, run.wait(60*time.Second), exitOK, []string{"There are 9592 primes up to 100000 (computed in 20 steps)."}, nil)
			if p.Cut() < 3 {
				t.Errorf("the outage cut %d requests; want the polls to have gone on during it", p.Cut())
			}
		})
	}
}

// TestListServerUnreachable: with the server down, 'mcptask list' still
// shows the journal's tasks (status unknown, and why), instead of "no
// tasks in flight".
func TestListServerUnreachable(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	r := c.run("call", "--detach", "long_computation", "n=100000", "steps=50", "step_delay_ms=100")
	expect(t, r, exitOK, nil, nil)
	id := strings.TrimSpace(r.Stdout)
	d.Kill()
	r = c.run("list")
	expect(t, r, exitConnection, []string{id, "unknown", "long_computation", "unreachable"}, []string{"connection refused"})
	if strings.Contains(r.Stderr, "no tasks in flight") {
		t.Errorf("list says no tasks in flight while the journal holds %s:\n%s", id, r.Stderr)
	}
}

// TestCallNotSent: the tools/list that mcptask sends first (to learn
// whether the tool runs as a task) is lost, so the call is never sent.
// mcptask says so, exit 4; it said "the server refused the call ...
// rejected by transport (-32005)", exit 2, and no call had reached it.
func TestCallNotSent(t *testing.T) {
	t.Parallel()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			d, p := proxiedDaemon(t)
			p.LoseRequests("tools/list", -1)
			c := newCLI(t, p.URL)
			r := c.run("--wire", wire, "call", "long_computation", "--args", `{"n": 100}`)
			expect(t, r, exitConnection, nil, []string{"was not sent", "nothing was started"})
			if strings.Contains(r.Stderr, "refused") {
				t.Errorf("a call never sent is reported as refused:\n%s", r.Stderr)
			}
			if p.Lost() == 0 {
				t.Fatal("the proxy lost no tools/list")
			}
			if n := d.count("task created"); n != 0 {
				t.Fatalf("%d tasks created by a call never sent", n)
			}
		})
	}
}
