package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/pgtest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// These tests run several mcptaskd processes on one PostgreSQL schema.
// They need a PostgreSQL server: set MCPTASK_TEST_POSTGRES_DSN (see
// internal/pgtest).

// pgDSN returns the test database's DSN, or skips the test.
func pgDSN(t testing.TB) string { return pgtest.DSN(t) }

// pgSchema returns the name of a new schema of the test's own (created by
// the first mcptaskd that opens it), dropped with CASCADE when the test
// ends. Call it before starting the daemons that use it, so that its
// cleanup runs after theirs.
func pgSchema(t testing.TB, dsn string) string { return pgtest.Schema(t, dsn, "mcptaskd_test_") }

// pgFlags are the flags of an mcptaskd on schema with the given lease.
// -db is ignored with -postgres; it points into a temporary directory
// anyway, so that a mistake never writes next to the test.
func pgFlags(t testing.TB, dsn, schema string, lease time.Duration) []string {
	return []string{"-addr", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "unused.db"),
		"-log-format", "json", "-log-level", "info",
		"-postgres", dsn, "-postgres-schema", schema, "-lease", lease.String(), "-shutdown-grace", "2s"}
}

// startTogether starts one mcptaskd per name with the same args, all at
// the same moment, and waits until every one serves.
func startTogether(t *testing.T, names []string, args ...string) []*daemon {
	t.Helper()
	awaits := make([]func() *daemon, len(names))
	for i, name := range names {
		awaits[i] = spawnDaemon(t, name, args...)
	}
	ds := make([]*daemon, len(names))
	for i, await := range awaits {
		ds[i] = await()
	}
	return ds
}

// taskRecords counts, per task ID, the log records of the daemons ds
// whose message is one of msgs.
func taskRecords(ds []*daemon, msgs ...string) map[string]int {
	n := map[string]int{}
	for _, d := range ds {
		for _, msg := range msgs {
			for _, rec := range d.LogRecords(msg) {
				if id, ok := rec["task"].(string); ok {
					n[id]++
				}
			}
		}
	}
	return n
}

// logged reports whether d logged a record with message msg about task id.
func logged(d *daemon, msg, id string) bool {
	return taskRecords([]*daemon{d}, msg)[id] > 0
}

// recordTime returns the time of d's first log record with message msg
// about task id.
func recordTime(d *daemon, msg, id string) (time.Time, bool) {
	for _, rec := range d.LogRecords(msg) {
		if rec["task"] == id {
			s, _ := rec["time"].(string)
			at, err := time.Parse(time.RFC3339Nano, s)
			return at, err == nil
		}
	}
	return time.Time{}, false
}

// cpuTime returns the CPU time (user and system, all threads) the process
// pid has used so far; ok is false where /proc is not available.
func cpuTime(pid int) (_ time.Duration, ok bool) {
	if runtime.GOOS != "linux" {
		return 0, false
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// pid (comm) state ppid ...: utime and stime are fields 14 and 15,
	// counted from the state (field 3) after the command's closing paren.
	i := strings.LastIndexByte(string(raw), ')')
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const userHZ = 100 // USER_HZ, the unit of /proc's clock ticks on Linux
	return time.Duration(utime+stime) * time.Second / userHZ, true
}

// rerunnable says which demo tools mcptaskd declares safe to run again.
var rerunnable = map[string]bool{"long_computation": true, "lint_report": true}

// TestMultiInstance runs three mcptaskd processes on one PostgreSQL schema
// with a short lease and checks that they act as one server: tasks created
// through one instance are polled, cancelled and answered through the
// others, an idempotent retry through another instance finds its task, and
// when an instance is killed (SIGKILL) mid-task the survivors take its
// tasks over by the recovery policy; an instance stopped with SIGTERM hands
// its re-runnable work to another at once. No task of a tool that is not
// re-runnable ever starts twice.
func TestMultiInstance(t *testing.T) {
	t.Parallel()
	dsn := pgDSN(t)
	schema := pgSchema(t, dsn)
	const lease = 2 * time.Second
	// The three start at the same moment on the empty schema.
	fleet := startTogether(t, []string{"instance#1", "instance#2", "instance#3"}, pgFlags(t, dsn, schema, lease)...)
	i1, i2, i3 := fleet[0], fleet[1], fleet[2]
	c1, c2, c3 := i1.client(true), i2.client(true), i3.client(true)
	ctx := context.Background()

	created := map[string]string{} // every task created: ID → tool
	create := func(t *testing.T, c *wiretest.Client, tool string, args map[string]any) string {
		t.Helper()
		id := startTask(t, c, tool, args)
		created[id] = tool
		return id
	}
	stepOf := func(total int) *regexp.Regexp {
		return regexp.MustCompile(fmt.Sprintf(`^step (\d+) of %d\b`, total))
	}

	t.Run("created on 1, polled on 2 with progress", func(t *testing.T) {
		id := create(t, c1, "long_computation", map[string]any{"n": 5000, "steps": 4, "step_delay_ms": 400})
		step := stepOf(4)
		seen := map[string]bool{}
		tk := waitTask(t, c2, id, 60*time.Second, "terminal", func(tk *wiretest.Task) bool {
			if m := step.FindStringSubmatch(tk.StatusMessage); m != nil {
				seen[m[1]] = true
			}
			return terminal(tk)
		})
		if len(seen) == 0 {
			t.Errorf("instance 2 never showed a \"step k of 4\" status message of the work running on instance 1")
		}
		t.Logf("instance 2 showed steps %v of the work on instance 1", seen)
		r := resultOf(t, tk)
		if want := fmt.Sprintf("There are %d primes up to 5000 (computed in 4 steps).", primesUpTo(5000)); r.text() != want {
			t.Errorf("result %q, want %q", r.text(), want)
		}
		if want := fmt.Sprintf("done: %d primes up to 5000", primesUpTo(5000)); tk.StatusMessage != want {
			t.Errorf("final status message %q, want %q", tk.StatusMessage, want)
		}
		for i, c := range []*wiretest.Client{c1, c3} {
			got, err := c.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tk.Status || got.StatusMessage != tk.StatusMessage || got.CreatedAt != tk.CreatedAt ||
				got.LastUpdatedAt != tk.LastUpdatedAt || string(got.Result) != string(tk.Result) {
				t.Errorf("instance %d shows another task than instance 2:\n%+v\n%+v", 2*i+1, got, tk)
			}
		}
		if !logged(i1, "task completed", id) || taskRecords(fleet, "task completed")[id] != 1 {
			t.Errorf("the task did not complete on instance 1 alone (records: %v)", taskRecords(fleet, "task completed")[id])
		}
	})

	t.Run("created on 1, cancelled on 3, work on 1 stops", func(t *testing.T) {
		// CPU-bound work (a sieve up to 2e8 in 200 steps, checking its
		// context between chunks): while it runs, instance 1 burns CPU.
		id := create(t, c1, "long_computation", map[string]any{"n": 200_000_000, "steps": 200, "step_delay_ms": 0})
		step := stepOf(200)
		waitTask(t, c2, id, 60*time.Second, "step 3", func(tk *wiretest.Task) bool {
			if terminal(tk) {
				t.Fatalf("the sieve ended before it could be cancelled: %+v", tk)
			}
			m := step.FindStringSubmatch(tk.StatusMessage)
			if m == nil {
				return false
			}
			k, _ := strconv.Atoi(m[1])
			return k >= 3
		})
		pid := i1.Pid()
		busy0, measurable := cpuTime(pid)
		time.Sleep(300 * time.Millisecond) // a measurement window, not synchronization
		busy1, _ := cpuTime(pid)

		sent := time.Now()
		if err := c3.Result(ctx, "tasks/cancel", map[string]any{"taskId": id}, nil); err != nil {
			t.Fatal(err)
		}
		t.Logf("tasks/cancel through instance 3 answered in %v", time.Since(sent).Round(time.Millisecond))
		for i, c := range []*wiretest.Client{c1, c2, c3} {
			if tk, err := c.Get(ctx, id); err != nil || tk.Status != "cancelled" {
				t.Errorf("instance %d after tasks/cancel: %+v, %v", i+1, tk, err)
			}
		}

		// The work stops: instance 1 goes idle. Any path that stops the
		// work (the change feed at once, or the heartbeat within lease/3)
		// leaves the window [cancel+lease/3, +1s] idle; the sieve left
		// running would keep a CPU busy through it (about 12 s of CPU
		// left under the race detector, 1.5 s without).
		if measurable {
			time.Sleep(lease/3 + 50*time.Millisecond) // time to stop, then a measurement window
			after0, _ := cpuTime(pid)
			time.Sleep(time.Second)
			after1, _ := cpuTime(pid)
			t.Logf("CPU used by instance 1: %v in 300ms while the sieve ran, %v in the 1s window after the cancel",
				busy1-busy0, after1-after0)
			if after1-after0 > 250*time.Millisecond {
				t.Errorf("instance 1 used %v of CPU in 1s starting %v after the cancel: the cancelled work still runs", after1-after0, lease/3)
			}
		}
		if tk, err := c2.Get(ctx, id); err != nil || tk.Status != "cancelled" {
			t.Errorf("after the cancel: %+v, %v", tk, err)
		}
		if n := taskRecords(fleet, "task completed", "task failed")[id]; n != 0 {
			t.Errorf("the cancelled task logged %d outcomes", n)
		}
		if !logged(i3, "task cancelled", id) {
			t.Errorf("instance 3 did not log the cancel")
		}
		if logged(i1, "stopping work of a task ended elsewhere", id) {
			t.Logf("instance 1 stopped the work at a heartbeat (the polling fallback), not through the change feed")
		} else {
			t.Logf("instance 1 stopped the work before its next heartbeat (through the change feed)")
		}
	})

	t.Run("input_required on 1, answered on 3", func(t *testing.T) {
		start := time.Now()
		id := create(t, c1, "deploy_with_confirmation", map[string]any{"service": "api", "version": "2.0.0", "build_steps": 1, "step_delay_ms": 0})
		tk := waitTask(t, c2, id, 60*time.Second, "input_required", func(tk *wiretest.Task) bool { return tk.Status == "input_required" || terminal(tk) })
		t.Logf("created through instance 1, input_required through instance 2 after %v", time.Since(start).Round(time.Millisecond))
		key := elicitKey(t, tk, "Roll it out to production")
		sent := time.Now()
		if err := c3.Result(ctx, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
			key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}},
		}}, nil); err != nil {
			t.Fatal(err)
		}
		tk = waitTask(t, c2, id, 60*time.Second, "terminal", terminal)
		t.Logf("answered through instance 3; the work on instance 1 completed %v later", time.Since(sent).Round(time.Millisecond))
		if r := resultOf(t, tk); r.text() != "Deployed api@2.0.0 to production." || r.IsError {
			t.Errorf("result %q (isError %v)", r.text(), r.IsError)
		}
		if !logged(i1, "task input required", id) || !logged(i1, "task completed", id) {
			t.Errorf("the deployment did not run on instance 1 to the end")
		}
	})

	t.Run("idempotent retry through other instances", func(t *testing.T) {
		key := "multi-" + rand.Text()
		call := func(c *wiretest.Client, tool string) *wiretest.Response {
			t.Helper()
			meta := c.Meta()
			meta["io.mcptask/idempotency-key"] = key
			args := map[string]any{"n": 100, "steps": 1, "step_delay_ms": 0}
			if tool != "long_computation" {
				args = map[string]any{} // arguments the other tool's schema accepts
			}
			resp, err := c.Call(ctx, "tools/call", map[string]any{"name": tool, "arguments": args, "_meta": meta}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		var ids []string
		for _, c := range []*wiretest.Client{c1, c2, c3} {
			resp := call(c, "long_computation")
			var tk wiretest.Task
			if resp.Error != nil || json.Unmarshal(resp.Result, &tk) != nil || tk.ResultType != "task" || tk.TaskID == "" {
				t.Fatalf("tools/call with an idempotency key: %+v %s", resp.Error, resp.Result)
			}
			ids = append(ids, tk.TaskID)
		}
		created[ids[0]] = "long_computation"
		if ids[1] != ids[0] || ids[2] != ids[0] {
			t.Fatalf("retries with the same key through instances 1, 2, 3 got tasks %v, want one task", ids)
		}
		if resp := call(c3, "lint_report"); resp.Error == nil || resp.Error.Code != -32602 {
			t.Errorf("the key reused for another tool: want error -32602, got %+v %s", resp.Error, resp.Result)
		}
		tk := waitTask(t, c3, ids[0], 60*time.Second, "terminal", terminal)
		if r := resultOf(t, tk); r.text() != "There are 25 primes up to 100 (computed in 1 steps)." {
			t.Errorf("result %q", r.text())
		}
		if n := taskRecords(fleet, "task created")[ids[0]]; n != 1 {
			t.Errorf("the task was created %d times", n)
		}
		if !logged(i2, "task reused by an idempotent retry", ids[0]) || !logged(i3, "task reused by an idempotent retry", ids[0]) {
			t.Errorf("instances 2 and 3 did not log the reuse")
		}
	})

	t.Run("SIGKILL of instance 1 mid-task", func(t *testing.T) {
		// Non-re-runnable work on instance 1, in several states.
		var unsafe []string
		for i := range 2 {
			unsafe = append(unsafe, create(t, c1, "deploy_with_confirmation", map[string]any{"service": fmt.Sprintf("svc%d", i), "build_steps": 1, "step_delay_ms": 60000}))
		}
		unsafe = append(unsafe, create(t, c1, "flaky_migration", map[string]any{"steps": 3, "step_delay_ms": 60000}))
		waiting := create(t, c1, "deploy_with_confirmation", map[string]any{"service": "waiting", "build_steps": 1, "step_delay_ms": 0})
		unsafe = append(unsafe, waiting)
		// Re-runnable work on instance 1.
		rerun := map[string]int{} // long_computation's n
		for _, n := range []int{1000, 2000, 3000} {
			rerun[create(t, c1, "long_computation", map[string]any{"n": n, "steps": 4, "step_delay_ms": 1000})] = n
		}
		lint := create(t, c1, "lint_report", map[string]any{"source": "a\nb\nc\n", "line_delay_ms": 1000})
		// Work on the survivors, which must go on undisturbed.
		bystanders := map[string]int{
			create(t, c2, "long_computation", map[string]any{"n": 4000, "steps": 4, "step_delay_ms": 1000}): 4000,
			create(t, c3, "long_computation", map[string]any{"n": 6000, "steps": 4, "step_delay_ms": 1000}): 6000,
		}

		for _, id := range unsafe[:len(unsafe)-1] {
			waitTask(t, c2, id, 60*time.Second, "working", func(tk *wiretest.Task) bool {
				return tk.Status == "working" && (strings.HasPrefix(tk.StatusMessage, "building") || strings.HasPrefix(tk.StatusMessage, "migration"))
			})
		}
		waitTask(t, c3, waiting, 60*time.Second, "input_required", func(tk *wiretest.Task) bool { return tk.Status == "input_required" })
		for id := range rerun {
			waitTask(t, c2, id, 60*time.Second, "step 1", func(tk *wiretest.Task) bool {
				return tk.Status == "working" && strings.HasPrefix(tk.StatusMessage, "step 1 of 4")
			})
		}
		waitTask(t, c2, lint, 60*time.Second, "linting", func(tk *wiretest.Task) bool {
			return tk.Status == "working" && strings.HasPrefix(tk.StatusMessage, "linting line 1 of 3")
		})

		i1.kill9()
		killed := time.Now()
		survivors := []*daemon{i2, i3}

		// The survivors resolve every task of the dead instance: the
		// non-re-runnable ones fail, the others run again.
		waitUntil(t, 30*lease, "the takeover of instance 1's tasks", func() (bool, error) {
			reruns := taskRecords(survivors, "task re-run after restart")
			for id := range rerun {
				if reruns[id] == 0 {
					return false, nil
				}
			}
			if reruns[lint] == 0 {
				return false, nil
			}
			for _, id := range unsafe {
				tk, err := c2.Get(ctx, id)
				if err != nil {
					return false, err
				}
				if tk.Status != "failed" {
					return false, nil
				}
			}
			return true, nil
		})
		// When, by the survivors' logs, the last task was resolved.
		var resolved time.Time
		for _, id := range append(slices.Collect(maps.Keys(rerun)), append(unsafe, lint)...) {
			for _, d := range survivors {
				for _, msg := range []string{"task failed", "task re-run after restart"} {
					if at, ok := recordTime(d, msg, id); ok && at.After(resolved) {
						resolved = at
					}
				}
			}
		}
		t.Logf("the survivors resolved instance 1's %d tasks %v after SIGKILL (lease %v)", len(unsafe)+len(rerun)+1,
			resolved.Sub(killed).Round(time.Millisecond), lease)

		for _, id := range unsafe {
			tk, err := c3.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if tk.Status != "failed" || tk.Error == nil || tk.Error.Code != -32603 || !strings.Contains(tk.Error.Message, "outcome is unknown") {
				t.Errorf("non-re-runnable task %s (%s): want failed with an \"outcome is unknown\" error, got %s %+v (%q)",
					id, created[id], tk.Status, tk.Error, tk.StatusMessage)
			}
		}
		for id, n := range rerun {
			tk := waitTask(t, c3, id, 60*time.Second, "re-run to the end", terminal)
			if r := resultOf(t, tk); r.text() != fmt.Sprintf("There are %d primes up to %d (computed in 4 steps).", primesUpTo(n), n) {
				t.Errorf("re-run task %s: result %q", id, r.text())
			}
		}
		if r := resultOf(t, waitTask(t, c3, lint, 60*time.Second, "re-run to the end", terminal)); r.text() != "No problems found in 3 lines." {
			t.Errorf("re-run lint_report: result %q", r.text())
		}
		t.Logf("the re-run tasks completed %v after SIGKILL", time.Since(killed).Round(time.Millisecond))
		reruns := taskRecords(fleet, "task re-run after restart")
		for id := range rerun {
			if reruns[id] != 1 || !(logged(i2, "task completed", id) || logged(i3, "task completed", id)) {
				t.Errorf("re-runnable task %s: %d re-runs, want 1 on a survivor that completes it", id, reruns[id])
			}
		}
		for id, n := range bystanders {
			tk := waitTask(t, c2, id, 60*time.Second, "terminal", terminal)
			if r := resultOf(t, tk); r.text() != fmt.Sprintf("There are %d primes up to %d (computed in 4 steps).", primesUpTo(n), n) {
				t.Errorf("task %s of a survivor: result %q", id, r.text())
			}
			if reruns[id] != 0 {
				t.Errorf("task %s of a survivor was re-run", id)
			}
		}
	})

	t.Run("every task retrievable from every survivor", func(t *testing.T) {
		if len(created) < 14 {
			t.Fatalf("only %d tasks were created", len(created))
		}
		for id, tool := range created {
			a, err := c2.Get(ctx, id)
			if err != nil {
				t.Errorf("task %s (%s) through instance 2: %v", id, tool, err)
				continue
			}
			b, err := c3.Get(ctx, id)
			if err != nil {
				t.Errorf("task %s (%s) through instance 3: %v", id, tool, err)
				continue
			}
			if !terminal(a) || a.Status != b.Status || a.StatusMessage != b.StatusMessage || string(a.Result) != string(b.Result) ||
				a.LastUpdatedAt != b.LastUpdatedAt || fmt.Sprint(a.Error) != fmt.Sprint(b.Error) {
				t.Errorf("task %s (%s) differs between instances 2 and 3 or is not terminal:\n%+v\n%+v", id, tool, a, b)
			}
		}
	})

	t.Run("SIGTERM of instance 2 hands its work over", func(t *testing.T) {
		n := 7000
		handed := create(t, c2, "long_computation", map[string]any{"n": n, "steps": 3, "step_delay_ms": 1200})
		unsafe := create(t, c2, "deploy_with_confirmation", map[string]any{"service": "late", "build_steps": 1, "step_delay_ms": 60000})
		waitTask(t, c3, handed, 60*time.Second, "step 1", func(tk *wiretest.Task) bool { return strings.HasPrefix(tk.StatusMessage, "step 1 of 3") })
		waitTask(t, c3, unsafe, 60*time.Second, "building", func(tk *wiretest.Task) bool { return strings.HasPrefix(tk.StatusMessage, "building") })
		// The grace period (2s, see pgFlags) ends before the work (3.6s) does.
		stopped := time.Now()
		if err := i2.signal(syscall.SIGTERM, 60*time.Second); err != nil {
			t.Fatalf("instance 2 after SIGTERM: %v", err)
		}
		if !logged(i2, "task handed back at shutdown", handed) {
			t.Errorf("instance 2 did not hand its re-runnable task back")
		}
		waitUntil(t, 30*lease, "instance 3 re-running the handed-back task", func() (bool, error) {
			return logged(i3, "task re-run after restart", handed), nil
		})
		if at, ok := recordTime(i3, "task re-run after restart", handed); ok {
			t.Logf("instance 3 re-ran the handed-back task %v after the SIGTERM of instance 2 (grace 2s, lease %v)", at.Sub(stopped).Round(time.Millisecond), lease)
		}
		tk, err := c3.Get(ctx, unsafe)
		if err != nil || tk.Status != "failed" || tk.Error == nil || !strings.Contains(tk.Error.Message, "outcome is unknown") {
			t.Errorf("non-re-runnable task of the stopped instance: want failed, outcome unknown; got %+v, %v", tk, err)
		}
		tk = waitTask(t, c3, handed, 60*time.Second, "terminal", terminal)
		if r := resultOf(t, tk); r.text() != fmt.Sprintf("There are %d primes up to %d (computed in 3 steps).", primesUpTo(n), n) {
			t.Errorf("handed-back task: result %q", r.text())
		}
	})

	t.Run("no non-re-runnable work started twice", func(t *testing.T) {
		starts := taskRecords(fleet, "task created", "task re-run after restart")
		for id, tool := range created {
			n := starts[id]
			switch {
			case !rerunnable[tool] && n != 1:
				t.Errorf("task %s of %s, which is not re-runnable, started %d times", id, tool, n)
			case rerunnable[tool] && (n < 1 || n > 3):
				t.Errorf("task %s of %s started %d times", id, tool, n)
			}
		}
		if t.Failed() {
			return
		}
		t.Logf("%d tasks: each non-re-runnable one started once in the logs of the three instances", len(created))
	})
}

// TestMultiInstanceStartTogether starts two mcptaskd processes at the same
// moment on an empty schema, a few times: both come up (the schema is
// created and migrated once, under the advisory lock), and they share
// their tasks.
func TestMultiInstanceStartTogether(t *testing.T) {
	t.Parallel()
	dsn := pgDSN(t)
	for round := range 3 {
		schema := pgSchema(t, dsn)
		ds := startTogether(t, []string{fmt.Sprintf("A#%d", round), fmt.Sprintf("B#%d", round)}, pgFlags(t, dsn, schema, 2*time.Second)...)
		a, b := ds[0], ds[1]
		id := startTask(t, a.client(true), "long_computation", map[string]any{"n": 100, "steps": 1, "step_delay_ms": 0})
		if r := resultOf(t, waitTask(t, b.client(true), id, 30*time.Second, "terminal", terminal)); r.text() != "There are 25 primes up to 100 (computed in 1 steps)." {
			t.Errorf("round %d: result %q", round, r.text())
		}
		// One instance created and migrated the schema; the other found
		// it current.
		created, migrators := 0, 0
		for _, d := range ds {
			created += len(d.LogRecords("postgres store: created schema"))
			if len(d.LogRecords("postgres store: applied schema migration")) > 0 {
				migrators++
			}
		}
		if created != 1 || migrators != 1 {
			t.Errorf("round %d: %d instances created the schema and %d migrated it, want 1 and 1", round, created, migrators)
		}
		for _, d := range ds {
			if err := d.signal(syscall.SIGTERM, 30*time.Second); err != nil {
				t.Errorf("%s after SIGTERM: %v", d.name, err)
			}
		}
	}
}
