package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/upstreamtest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// writeConfig writes body as a configuration file of the test and returns
// its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	config := filepath.Join(t.TempDir(), "mcptaskd.yaml")
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return config
}

// TestPostgresTakeoverReattach: two mcptaskd processes on one PostgreSQL
// schema re-export the tools of an upstream that speaks tasks itself and
// outlives them (an mcptask server on its own SQLite file, on loopback
// HTTP, in this process). A task created through instance A becomes an
// upstream task; A is killed (SIGKILL) while the upstream works on it;
// after A's lease lapses instance B takes the task over and re-attaches to
// the upstream task instead of calling the tool again: the task's status
// message says so, the upstream tool ran once, and once the test lets the
// upstream work end, the task completes with the upstream's result,
// readable through B.
func TestPostgresTakeoverReattach(t *testing.T) {
	t.Parallel()
	dsn := pgDSN(t)
	schema := pgSchema(t, dsn)
	up := upstreamtest.New(t)
	config := writeConfig(t, fmt.Sprintf("demo: false\nmcpServers:\n  up:\n    url: %q\n", up.URL+"/mcp"))
	const lease = 2 * time.Second
	ds := startTogether(t, []string{"A", "B"}, append(pgFlags(t, dsn, schema, lease), "-config", config)...)
	a, b := ds[0], ds[1]
	ca, cb := a.client(true), b.client(true)
	if !strings.Contains(a.Logs(), "the upstream speaks tasks") {
		t.Fatalf("instance A did not see that the upstream speaks tasks:\n%s", a.Logs())
	}

	// The create is answered once the upstream task's ID is durable
	// (AwaitExternalRef): from then on a crash can find it.
	id := startTask(t, ca, "work", map[string]any{"label": "build"})
	waitTask(t, cb, id, 60*time.Second, "the upstream's status, relayed by A", func(tk *wiretest.Task) bool {
		if terminal(tk) {
			t.Fatalf("the task ended before A was killed: %+v", tk)
		}
		return tk.StatusMessage == "upstream working on build"
	})
	if !logged(a, "task created", id) {
		t.Fatalf("the task was not created (and so run) by instance A")
	}
	if n := up.Runs.Load(); n != 1 {
		t.Fatalf("the upstream tool ran %d times before the crash, want once", n)
	}

	a.kill9()
	killed := time.Now()

	// B takes the task over after the lease and re-attaches; the upstream
	// task still runs (the test has not released it), so the message
	// stays until the upstream says something new.
	tk := waitTask(t, cb, id, 30*lease, "re-attached by B", func(tk *wiretest.Task) bool {
		if terminal(tk) {
			t.Fatalf("the task ended before the upstream work was released: %+v (error %+v)", tk, tk.Error)
		}
		return strings.HasPrefix(tk.StatusMessage, "re-attached to the task ")
	})
	t.Logf("instance B re-attached %v after SIGKILL of A (lease %v): %q", time.Since(killed).Round(time.Millisecond), lease, tk.StatusMessage)
	if !strings.Contains(tk.StatusMessage, "of upstream up") {
		t.Errorf("status message after the takeover: %q; want it to name the upstream", tk.StatusMessage)
	}
	// B relays the upstream task's status again, still saying it
	// re-attached (the upstream's message has not changed since A).
	waitTask(t, cb, id, 60*time.Second, "the upstream's status, relayed by B", func(tk *wiretest.Task) bool {
		if terminal(tk) {
			t.Fatalf("the task ended before the upstream work was released: %+v (error %+v)", tk, tk.Error)
		}
		return strings.HasPrefix(tk.StatusMessage, "re-attached to the task ") && strings.HasSuffix(tk.StatusMessage, " of upstream up: upstream working on build")
	})
	if !logged(b, "task re-run after restart", id) || !logged(b, "re-attaching to an upstream task", id) {
		t.Errorf("instance B did not log the takeover and the re-attachment of the task")
	}
	if n := up.Runs.Load(); n != 1 {
		t.Errorf("the upstream tool ran %d times after the takeover, want once", n)
	}

	up.Release()
	tk = waitTask(t, cb, id, 60*time.Second, "terminal", terminal)
	if r := resultOf(t, tk); r.text() != "build done, run 1" || r.IsError {
		t.Errorf("result through B: %q (isError %v), want the upstream's first and only run", r.text(), r.IsError)
	}
	if n := up.Runs.Load(); n != 1 {
		t.Errorf("the upstream tool ran %d times, want once", n)
	}
	if !logged(b, "task completed", id) {
		t.Errorf("the task did not complete on instance B")
	}
}
