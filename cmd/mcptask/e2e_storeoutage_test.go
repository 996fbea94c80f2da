package main

import (
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/faultproxy"
	"github.com/mcptask/mcptask/internal/testkit/pgtest"
)

// TestCallRidesOutAStoreOutage: mcptaskd's PostgreSQL becomes unreachable
// for it (a TCP proxy in front of the real server cuts and refuses its
// connections, as a database restart does) while mcptask waits for a
// task. mcptaskd answers the polls "store unavailable, try again"
// (-32010 with a retry delay) and mcptask keeps waiting; the task, which
// runs on, completes once the database is back. (The polls were answered
// -32603 "internal error", which ended the wait with exit 4.)
func TestCallRidesOutAStoreOutage(t *testing.T) {
	t.Parallel()
	dsn := os.Getenv("MCPTASK_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("PostgreSQL only: set MCPTASK_TEST_POSTGRES_DSN (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run it")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.NewTCP(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	u.Host = proxy.Addr
	schema := pgtest.Schema(t, dsn, "mcptask_cli_outage_")
	d := startDaemon(t, "-postgres", u.String(), "-postgres-schema", schema)
	c := newCLI(t, d.URL)
	for _, wire := range wires {
		// Polling (--no-push): the polls are what the outage must not end;
		// a pushed wait sends none.
		run := c.start("--wire", wire, "call", "--no-push", "long_computation", "n=100000", "steps=20", "step_delay_ms=100")
		run.waitStderr(taskStarted, 30*time.Second)
		before := d.count("task store briefly unavailable")
		proxy.SetDown(true)
		deadline := time.Now().Add(30 * time.Second)
		for d.count("task store briefly unavailable") < before+2 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // polling the daemon's log, not timing the test
		}
		proxy.SetDown(false)
		if d.count("task store briefly unavailable") < before+2 {
			t.Fatalf("%s: mcptaskd never answered a poll with 'store unavailable' during the outage", wire)
		}
		expect(t, run.wait(2*time.Minute), exitOK, []string{"There are 9592 primes up to 100000 (computed in 20 steps)."}, nil)

		// Following the pushed notifications instead: the outage holds
		// them back (the server cannot read the task), and the wait ends
		// with the result once the database is back.
		run = c.start("--wire", wire, "call", "long_computation", "n=100000", "steps=20", "step_delay_ms=100")
		run.waitStderr(taskStarted, 30*time.Second)
		// The task's next status message meets the outage.
		before = d.count("task write failed on a transient store error; trying again within the lease")
		proxy.SetDown(true)
		deadline = time.Now().Add(30 * time.Second)
		for d.count("task write failed on a transient store error; trying again within the lease") <= before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // polling the daemon's log, not timing the test
		}
		proxy.SetDown(false)
		expect(t, run.wait(2*time.Minute), exitOK, []string{"There are 9592 primes up to 100000 (computed in 20 steps)."}, nil)
	}
}
