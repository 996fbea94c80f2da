package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
)

// TestResumeAfterCrash kills mcptask while it waits for a task, then
// 'mcptask resume' delivers the result without running the tool again.
func TestResumeAfterCrash(t *testing.T) {
	t.Parallel()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			d := startDaemon(t)
			c := newCLI(t, d.URL)
			p := c.start("--wire", wire, "call", "long_computation", "n=100000", "steps=20", "step_delay_ms=100")
			id := p.waitStderr(taskStarted, 30*time.Second)[1]
			p.waitStderr(regexp.MustCompile(`working: step \d+ of 20`), 30*time.Second)
			p.kill9()

			entries, err := client.ReadJournal(c.journal)
			i := slices.IndexFunc(entries, func(e client.JournalEntry) bool { return e.TaskID == id })
			if err != nil || i < 0 || entries[i].Target != d.URL || entries[i].Wire != wire || entries[i].Tool != "long_computation" {
				t.Fatalf("the journal does not hold task %s: %+v %v", id, entries, err)
			}
			expect(t, c.run("list"), exitOK, []string{id, "long_computation"}, nil)

			r := c.run("resume")
			expect(t, r, exitOK, []string{"There are 9592 primes up to 100000 (computed in 20 steps)."}, []string{"resuming 1 task(s)", id})
			if n := d.count("task created"); n != 1 {
				t.Fatalf("%d tasks created, want 1: the tool ran again\n%s", n, d.Logs())
			}
			expect(t, c.run("list"), exitOK, nil, []string{"no tasks in flight"})
			expect(t, c.run("resume"), exitOK, nil, []string{"nothing to resume"})
		})
	}
}

// TestResumeSeveral resumes tasks of several outcomes and servers at once.
func TestResumeSeveral(t *testing.T) {
	t.Parallel()
	d1, d2 := startDaemon(t), startDaemon(t)
	c := newCLI(t, d1.URL)
	other := &cli{t: t, url: d2.URL, journal: c.journal}
	var ids []string
	for _, args := range [][]string{
		{"long_computation", "n=1000", "steps=2", "step_delay_ms=100"},
		{"lint_report", "line_delay_ms=50"},
	} {
		r := c.run(append([]string{"call", "--detach"}, args...)...)
		expect(t, r, exitOK, nil, nil)
		ids = append(ids, strings.TrimSpace(r.Stdout))
	}
	r := other.run("call", "--detach", "flaky_migration", "step_delay_ms=50")
	expect(t, r, exitOK, nil, nil)
	ids = append(ids, strings.TrimSpace(r.Stdout))

	// Without --url or MCPTASK_URL, list and resume visit every server of
	// the journal.
	all := &cli{t: t, journal: c.journal}
	expect(t, all.run("list"), exitOK, append([]string{"SERVER", d1.URL, d2.URL}, ids...), nil)
	r = all.run("--json", "resume")
	var outs []struct {
		TaskID   string `json:"taskId"`
		Status   string `json:"status"`
		ExitCode int    `json:"exitCode"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &outs); err != nil || len(outs) != 3 {
		t.Fatalf("resume --json: %v\n%s", err, r)
	}
	got := map[string]int{}
	for _, o := range outs {
		got[o.TaskID] = o.ExitCode
	}
	if got[ids[0]] != exitOK || got[ids[1]] != exitToolError || got[ids[2]] != exitFailed || r.Code != exitFailed {
		t.Fatalf("resume outcomes %v (exit %d), want %s:0 %s:1 %s:2, exit 2\n%s", got, r.Code, ids[0], ids[1], ids[2], r)
	}
}

// TestListOtherURL: list and resume under a --url (or MCPTASK_URL) that
// no task of the journal has do not say "no tasks in flight" while the
// journal holds tasks of another server: they say how many, name the
// server and how to see them; nothing connects to the named server.
func TestListOtherURL(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	r := c.run("call", "--detach", "long_computation", "n=1000", "steps=2", "step_delay_ms=60000")
	expect(t, r, exitOK, nil, nil)
	id := strings.TrimSpace(r.Stdout)
	// A server that is not there: nothing of the journal is its.
	elsewhere := &cli{t: t, url: "http://127.0.0.1:1/mcp", journal: c.journal}
	for _, verb := range []string{"list", "resume"} {
		r := elsewhere.run(verb)
		expect(t, r, exitOK, nil, []string{"http://127.0.0.1:1/mcp", "1 of 1 other server", "1 task(s) in flight of " + d.URL,
			"mcptask --url " + d.URL + " " + verb, "without --url"})
		if strings.Contains(r.Stderr, "no tasks in flight") {
			t.Errorf("%s says there is nothing in flight:\n%s", verb, r)
		}
	}
	// The server's own list shows the task.
	expect(t, c.run("list"), exitOK, []string{id}, nil)
}
