package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// rolloutConfigFile writes an mcptaskd configuration file with body and
// returns its path.
func rolloutConfigFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcptaskd.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// detach calls tool with args as a detached task and returns its ID.
func (c *cli) detach(tool string, args ...string) string {
	c.t.Helper()
	r := c.run(append([]string{"call", "--detach", tool}, args...)...)
	expect(c.t, r, exitOK, nil, nil)
	id := strings.TrimSpace(r.Stdout)
	if id == "" || strings.ContainsAny(id, " \n") {
		c.t.Fatalf("call --detach printed no task ID\n%s", r)
	}
	return id
}

// smallCall is a short task-augmented call of long_computation.
var smallCall = []string{"call", "long_computation", "n=1000", "steps=2", "step_delay_ms=0"}

// TestRolloutCanary: 'mcptask admin canary' limits a tool's new tasks to
// a canary that 'mcptask admin fleet' shows (who, why); a requester
// outside it is refused with data.reason "canary"; --off lifts it.
func TestRolloutCanary(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)

	expect(t, c.run("admin", "fleet"), exitOK, []string{"drain: not draining", "local drain: not draining", "canaries: none", "rollbacks: none", "switches version"}, nil)
	expect(t, c.run("admin", "canary", "long_computation", "--percent", "0", "--principal", "someone-else", "--tenant", "acme", "--reason", "canary 1"), exitOK,
		[]string{"long_computation: canary: tasks for 0% of requesters; tenants acme; principals someone-else", "set by admin:anonymous", "reason: canary 1"}, nil)
	expect(t, c.run("admin", "fleet"), exitOK,
		[]string{"canaries:\n  long_computation: tasks for 0% of requesters; tenants acme; principals someone-else", "set by admin:anonymous at ", "reason: canary 1", "rollbacks: none"}, nil)
	// The anonymous requester is outside the canary: refused, and its
	// manifest says so before any call.
	expect(t, c.run(smallCall...), exitFailed, nil, []string{"canary", `"reason":"canary"`})
	expect(t, c.run("manifest"), exitOK, []string{"long_computation", "no (canary: refuse)"}, nil)
	expect(t, c.run("manifest", "--require", "long_computation:task"), exitUnmet, []string{"requirements: NOT met"}, nil)
	// Another tool is not in any canary.
	expect(t, c.run("call", "lint_report", "source=ok"), exitOK, nil, nil)

	r := c.run("--json", "admin", "fleet")
	expect(t, r, exitOK, nil, nil)
	var f adminFleet
	if err := json.Unmarshal([]byte(r.Stdout), &f); err != nil || f.Canaries["long_computation"].Percent != 0 ||
		strings.Join(f.Canaries["long_computation"].Principals, ",") != "someone-else" || f.Canaries["long_computation"].Reason != "canary 1" {
		t.Fatalf("--json admin fleet: %+v %v\n%s", f, err, r)
	}

	// Admitting the anonymous principal serves it again.
	expect(t, c.run("admin", "canary", "long_computation", "--percent", "0", "--principal", "anonymous"), exitOK, []string{"principals anonymous"}, nil)
	expect(t, c.run("manifest", "--require", "long_computation:task"), exitOK, []string{"requirements: met"}, nil)
	expect(t, c.run(smallCall...), exitOK, []string{"There are 168 primes up to 1000"}, nil)

	// Promotion: the canary lifted.
	expect(t, c.run("admin", "canary", "long_computation", "--off", "--reason", "promoted"), exitOK, []string{"long_computation: no canary"}, nil)
	expect(t, c.run("admin", "fleet"), exitOK, []string{"canaries: none"}, nil)
	expect(t, c.run(smallCall...), exitOK, []string{"There are 168 primes up to 1000"}, nil)

	// Mistakes.
	expect(t, c.run("admin", "canary", "long_computation"), exitUsage, nil, []string{"--percent", "--off"})
	expect(t, c.run("admin", "canary", "long_computation", "--off", "--percent", "5"), exitUsage, nil, []string{"--off lifts the canary"})
	expect(t, c.run("admin", "canary", "long_computation", "--percent", "101"), exitUsage, nil, []string{"0 to 100"})
	expect(t, c.run("admin", "canary", "--percent", "5"), exitUsage, nil, []string{"name one tool"})
	expect(t, c.run("admin", "canary", "nonesuch", "--percent", "5"), exitConnection, nil, []string{"HTTP 400", "no such tool"})
}

// TestRolloutRollback: 'mcptask admin rollback' rolls a tool back and
// reports the task left running; new calls are refused with data.reason
// "rollback" meanwhile, 'mcptask admin fleet' shows it, and --undo lifts
// it.
func TestRolloutRollback(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	inflight := c.detach("long_computation", "n=100000", "steps=1000", "step_delay_ms=50")

	expect(t, c.run("admin", "rollback", "long_computation", "--reason", "bad release"), exitOK,
		[]string{"long_computation rolled back: its new task-augmented calls get the fallback refuse", "set by admin:anonymous",
			"reason: bad release", "tasks left running: 1 (" + inflight + ")", "held for an approval or a handoff: 0",
			"operations confirmed: 0", "operations rejected: 0", "operations unknown: 0"}, nil)
	expect(t, c.run(smallCall...), exitFailed, nil, []string{"rolled back", `"reason":"rollback"`})
	expect(t, c.run("admin", "fleet"), exitOK,
		[]string{"rollbacks:\n  long_computation: fallback refuse; running 1, confirmed 0, rejected 0, unknown 0", "reason: bad release"}, nil)
	// The task in flight goes on.
	expect(t, c.run("status", inflight), exitOK, []string{"working"}, nil)

	// Again, for a script: the same report.
	r := c.run("--json", "admin", "rollback", "long_computation", "--reason", "bad release")
	expect(t, r, exitOK, nil, nil)
	var rep adminRollback
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil || rep.Fallback != "refuse" || len(rep.Running) != 1 || rep.Running[0] != inflight {
		t.Fatalf("--json admin rollback: %+v %v\n%s", rep, err, r)
	}

	expect(t, c.run("admin", "rollback", "long_computation", "--undo", "--reason", "fixed"), exitOK, []string{"rollback undone"}, nil)
	expect(t, c.run("admin", "fleet"), exitOK, []string{"rollbacks: none"}, nil)
	expect(t, c.run(smallCall...), exitOK, []string{"There are 168 primes up to 1000"}, nil)

	expect(t, c.run("admin", "rollback"), exitUsage, nil, []string{"name one tool"})
	expect(t, c.run("admin", "rollback", "nonesuch"), exitConnection, nil, []string{"HTTP 400", "no such tool"})
	expect(t, c.run("cancel", inflight), exitOK, nil, nil)
}

// TestRolloutApprovals: a tool whose rollout section asks for an
// approval: its call is held, listed by 'mcptask approvals'; 'mcptask
// approve' starts it and it completes; a second call denied with a
// reason fails naming it, denying again is no error, approving it then is
// refused (exit 2); an operator who is no approver of the tool may not
// approve it (exit 2). (Without authentication the operator and every
// requester are "anonymous": an anonymous call is nobody's own, so it
// needs no selfApproval.)
func TestRolloutApprovals(t *testing.T) {
	t.Parallel()
	config := rolloutConfigFile(t, `demo: true
rollout:
  long_computation:
    approval: {approvers: ["*"], expires: 1h, reason: "prod"}
  flaky_migration:
    approval: {approvers: ["alice"], reason: "changes data"}
`)
	d := startDaemon(t, "-config", config)
	c := newCLI(t, d.URL)

	expect(t, c.run("approvals"), exitOK, nil, []string{"no task is waiting for an approval or an operator"})
	id := c.detach("long_computation", "n=1000", "steps=2", "step_delay_ms=0")
	expect(t, c.run("status", id), exitOK, []string{"working", "waiting for approval by *", "prod"}, nil)
	expect(t, c.run("approvals"), exitOK, []string{"KIND", "APPROVERS", "approval", id, "long_computation", "anonymous", "*", `"n":1000`}, nil)
	expect(t, c.run("approvals", "--kind", "handoff"), exitOK, nil, []string{"no task is waiting for an operator"})
	r := c.run("--json", "approvals", "--kind", "approval")
	expect(t, r, exitOK, nil, nil)
	var held []adminHeld
	if err := json.Unmarshal([]byte(r.Stdout), &held); err != nil || len(held) != 1 || held[0].TaskID != id || held[0].ExpiresAt.IsZero() {
		t.Fatalf("--json approvals: %+v %v\n%s", held, err, r)
	}

	expect(t, c.run("approve", id, "--reason", "looks fine"), exitOK, []string{"task " + id + " is working"}, nil)
	expect(t, c.run("wait", id), exitOK, []string{"There are 168 primes up to 1000"}, nil)
	expect(t, c.run("approve", id), exitOK, []string{"task " + id + " is completed"}, nil) // already approved: no error
	expect(t, c.run("approvals", "--kind", "approval"), exitOK, nil, []string{"no task is waiting for an approval"})

	id2 := c.detach("long_computation", "n=1000", "steps=2", "step_delay_ms=0")
	expect(t, c.run("deny", id2, "--reason", "not this week"), exitOK, []string{"task " + id2 + " is failed", "denied by anonymous: not this week"}, nil)
	expect(t, c.run("status", id2), exitOK, []string{"failed", "denied by anonymous: not this week"}, nil)
	expect(t, c.run("deny", id2), exitOK, []string{"failed"}, nil) // idempotent
	expect(t, c.run("approve", id2), exitFailed, nil, []string{"cannot approve task " + id2, "no longer waiting for an approval"})

	// flaky_migration's approver is alice, not this operator.
	id3 := c.detach("flaky_migration")
	expect(t, c.run("approve", id3), exitFailed, nil, []string{"you may not approve task " + id3, "anonymous is not an approver of flaky_migration"})
	expect(t, c.run("approvals"), exitOK, []string{id3, "flaky_migration"}, nil)

	expect(t, c.run("approve"), exitUsage, nil, []string{"give one task ID"})
	expect(t, c.run("approvals", "--kind", "other"), exitUsage, nil, []string{"approval or handoff"})
	expect(t, c.run("deny", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), exitConnection, nil, []string{"the server does not know task aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})
}

// TestRolloutHandoff: a tool whose fallback is a handoff, drained with
// 'mcptask admin drain --tool': its call becomes a task waiting for an
// operator, listed by 'mcptask approvals --kind handoff'; 'mcptask admin
// handoff' records its outcome, which 'mcptask wait' prints; a second
// outcome is refused (exit 2).
func TestRolloutHandoff(t *testing.T) {
	t.Parallel()
	config := rolloutConfigFile(t, "demo: true\nrollout:\n  long_computation: {fallback: handoff}\n")
	d := startDaemon(t, "-config", config)
	c := newCLI(t, d.URL)

	expect(t, c.run("admin", "drain", "--tool", "long_computation", "--reason", "maintenance"), exitOK,
		[]string{"fleet: draining long_computation", "set by admin:anonymous", "reason: maintenance", "local: not draining", "instance "}, nil)
	id := c.detach("long_computation", "n=1000", "steps=2", "step_delay_ms=0")
	expect(t, c.run("status", id), exitOK, []string{"working", "waiting for an operator"}, nil)
	expect(t, c.run("approvals", "--kind", "handoff"), exitOK, []string{"handoff", id, "long_computation"}, nil)
	expect(t, c.run("approvals", "--kind", "approval"), exitOK, nil, []string{"no task is waiting for an approval"})

	expect(t, c.run("admin", "handoff", id), exitUsage, nil, []string{"--text"})
	expect(t, c.run("admin", "handoff", id, "--text", "x", "--structured", "{bad"), exitUsage, nil, []string{"--structured must be JSON"})
	expect(t, c.run("admin", "handoff", id, "--text", "done", "--structured", `{"primes": 168}`), exitOK,
		[]string{"task " + id + " is completed", "outcome recorded by hand by anonymous"}, nil)
	expect(t, c.run("wait", id), exitOK, []string{"done"}, nil)
	expect(t, c.run("admin", "handoff", id, "--text", "twice"), exitFailed, nil, []string{"cannot record the outcome of task " + id, "not waiting for a handoff"})
	expect(t, c.run("approvals"), exitOK, nil, []string{"no task is waiting"})
	expect(t, c.run("admin", "handoff", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "--text", "x"), exitConnection, nil, []string{"the server does not know task"})

	expect(t, c.run("admin", "drain", "--off"), exitOK, []string{"fleet: not draining"}, nil)
	expect(t, c.run(smallCall...), exitOK, []string{"There are 168 primes up to 1000"}, nil)
}

// shadowJobs is a job API on loopback HTTP whose jobs the test sets.
type shadowJobs struct {
	mu   sync.Mutex
	jobs map[string]string // state by job ID
}

// set sets the state of job id.
func (s *shadowJobs) set(id, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs[id] = state
}

// TestRolloutShadowReport: 'mcptask admin shadow-report' against an
// observe tool of a job API: exit 0 while the tasks agree with the API,
// 1 once a job's state moved away from what its task projects, and a
// table naming it.
func TestRolloutShadowReport(t *testing.T) {
	t.Parallel()
	api := &shadowJobs{jobs: map[string]string{"J1": "succeeded", "J2": "running"}}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/jobs/")
		api.mu.Lock()
		state, known := api.jobs[id]
		api.mu.Unlock()
		if r.Method != http.MethodGet || !ok || !known {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"state": %q}`, state)
	}))
	t.Cleanup(hs.Close)
	config := rolloutConfigFile(t, fmt.Sprintf(`demo: true
httpJobs:
  shadow_build:
    observe: true
    status: {url: "%s/jobs/{jobId}", state: /state, working: [running], completed: [succeeded], failed: [failed]}
    pollInterval: 50ms
`, hs.URL))
	d := startDaemon(t, "-config", config)
	c := newCLI(t, d.URL)

	r := c.run("admin", "shadow-report", "shadow_build")
	expect(t, r, exitOK, []string{"shadow_build: 0 tasks, 0 match, 0 mismatch, 0 errors"}, []string{"no task of shadow_build follows a job yet"})
	j1 := c.detach("shadow_build", "jobId=J1")
	j2 := c.detach("shadow_build", "jobId=J2")
	expect(t, c.run("wait", j1), exitOK, nil, nil)
	r = c.run("admin", "shadow-report", "shadow_build")
	expect(t, r, exitOK, []string{"TASK ID", "PROJECTED", j1, "J1", "completed", j2, "J2", "working", "shadow_build: 2 tasks, 2 match, 0 mismatch, 0 errors"}, nil)

	// The job system changed its mind about J1: the task projected
	// completed.
	api.set("J1", "failed")
	r = c.run("admin", "shadow-report", "shadow_build")
	expect(t, r, exitToolError, []string{"NO", "1 match, 1 mismatch, 0 errors"}, nil)
	r = c.run("--json", "admin", "shadow-report", "shadow_build")
	expect(t, r, exitToolError, nil, nil)
	var rep adminShadowReport
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil || rep.Mismatch != 1 || rep.Tasks != 2 {
		t.Fatalf("--json admin shadow-report: %+v %v\n%s", rep, err, r)
	}
	// A job the API no longer knows: an error. (Its task is cancelled
	// first: it would fail on its own, racing with the report.)
	expect(t, c.run("cancel", j2), exitOK, nil, nil)
	api.mu.Lock()
	delete(api.jobs, "J2")
	api.mu.Unlock()
	expect(t, c.run("admin", "shadow-report", "shadow_build"), exitToolError, []string{"error: ", "1 errors"}, nil)

	expect(t, c.run("admin", "shadow-report", "nonesuch"), exitConnection, nil, []string{"HTTP 400", "no shadow tool"})
	expect(t, c.run("admin", "shadow-report", "long_computation"), exitConnection, nil, []string{"HTTP 400", "no shadow tool"})
}

// TestAdminURLs: the admin commands find their endpoints from --url, or
// from an --admin-url naming any admin endpoint or their base; --stdio
// has none.
func TestAdminURLs(t *testing.T) {
	for _, tc := range []struct {
		url, adminURL, path, want string
	}{
		{"http://h:1/mcp", "", adminFleetPath, "http://h:1/admin/fleet"},
		{"http://h:1/mcp?x=1", "", adminDrainPath, "http://h:1/admin/drain"},
		{"", "https://ops/x/admin/drain", adminFleetPath, "https://ops/x/admin/fleet"},
		{"", "https://ops/x/admin/", adminDecidePath, "https://ops/x/admin/decide"},
		{"", "https://ops/x/admin", adminShadowPath, "https://ops/x/admin/shadow-report"},
		{"", "https://ops/custom-drain", adminDrainPath, "https://ops/custom-drain"},
	} {
		a := &app{}
		a.g.url, a.cmd.admin.url = tc.url, tc.adminURL
		got, err := a.adminURL(tc.path, nil)
		if err != nil || got != tc.want {
			t.Errorf("--url %q --admin-url %q, %s: %q %v; want %q", tc.url, tc.adminURL, tc.path, got, err, tc.want)
		}
	}
	a := &app{}
	a.g.url, a.g.stdio = defaultURL, "mcptaskd -stdio"
	if _, err := a.adminURL(adminFleetPath, nil); err == nil || !strings.Contains(err.Error(), "--stdio") {
		t.Errorf("--stdio: %v", err)
	}
	// The subcommands' help and usage.
	for _, args := range [][]string{{"help", "admin"}, {"admin", "--help"}} {
		code, out, _ := runApp(args...)
		if code != exitOK || !strings.Contains(out, "admin shadow-report") || !strings.Contains(out, "mcptask help admin COMMAND") {
			t.Errorf("%q: exit %d\n%s", args, code, out)
		}
	}
	for _, args := range [][]string{{"help", "admin", "rollback"}, {"admin", "rollback", "--help"}} {
		code, out, _ := runApp(args...)
		if code != exitOK || !strings.Contains(out, "Usage: mcptask admin rollback [flags] TOOL") || !strings.Contains(out, "--undo") {
			t.Errorf("%q: exit %d\n%s", args, code, out)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"admin"}, "give the admin command"},
		{[]string{"admin", "bogus"}, `unknown admin command "bogus"`},
		{[]string{"admin", "--undo", "rollback", "x"}, "it is one of 'mcptask admin rollback'"},
		{[]string{"--percent", "5", "admin", "canary", "x"}, "put it after the command's name (mcptask admin canary --percent ...)"},
		{[]string{"help", "admin", "bogus"}, `unknown command "admin bogus"`},
		{[]string{"admin", "drain", "--status", "--reason", "x"}, "--reason goes with"},
		{[]string{"admin", "drain", "--all", "--fallback", "later"}, "refuse, sync, handoff or jobs"},
	} {
		code, _, stderr := runApp(c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
}
