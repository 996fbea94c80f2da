package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/pgtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestKill9Rounds: one mcptaskd on one SQLite file, killed with SIGKILL at
// a random moment in each of several rounds while calls of both tools, on
// both wires, through the CLI (detached, or waiting with --answer) and the
// Go client, are in flight; restarted on the same file and address. Then
// 'mcptask resume --answer confirm=true' and the client's Resume finish
// every call (a call that was never sent is made again), and the
// invariants hold: one task per call, a deploy started once (a deploy the
// kill caught unfinished ends failed with "outcome unknown", one that had
// ended stays as it was, one created after the restart completes), a
// computation the kill caught is re-run once and completes with the right
// result, and no status the database held at the kill changed after.
func TestKill9Rounds(t *testing.T) {
	start := time.Now()
	d := sqliteDaemon(t, "")
	h := newRoundsHistory()
	const rounds = 10
	for r := range rounds {
		rs := newKillRound(t, r, []*daemon{d}, -1)
		rs.launch(t)
		ms := randN(800)
		t.Logf("round %d: kill -9 of mcptaskd %d ms after the calls started (seed %d)", r, ms, seed)
		time.Sleep(time.Duration(ms) * time.Millisecond) // the random moment of the fault
		d.kill9()
		killed := time.Now()
		// The daemon is dead: its file is the truth of what it had done.
		rs.snap = taskDetails(t, d)
		h.record(rs.snap)
		d.start()
		t.Logf("round %d: mcptaskd serves again %v after the kill", r, time.Since(killed).Round(time.Millisecond))
		rs.finish(t)
		rs.checkSQLite(t, d)
		now := taskDetails(t, d)
		h.check(t, now)
		t.Logf("round %d: %d calls checked, %v since the test started:%s", r, len(rs.calls), time.Since(start).Round(time.Millisecond), rs.summary(now))
		if t.Failed() {
			t.Fatalf("round %d failed; replay with MCPTASK_FAULT_SEED=%d", r, seed)
		}
	}
}

// TestKill9RoundsPostgres: three mcptaskd instances share one PostgreSQL
// schema with a 2s lease; in each round calls go to random instances,
// then one instance, chosen at random, is killed with SIGKILL at a random
// moment. The survivors take its unfinished tasks over once its leases
// lapse (a deploy fails "outcome unknown", a computation is re-run); then
// the killed instance is started again on its address, every call is
// finished as in TestKill9Rounds, and the same invariants hold, the audit
// trail checked on the logs of all the instances merged in time order.
func TestKill9RoundsPostgres(t *testing.T) {
	dsn := pgDSN(t)
	start := time.Now()
	schema := ownSchema(t, dsn)
	var fleet []*daemon
	for range 3 {
		fleet = append(fleet, postgresDaemon(t, dsn, schema, "-lease", "2s",
			"-db", filepath.Join(t.TempDir(), "unused.db")))
	}
	h := newRoundsHistory()
	const rounds = 6
	for r := range rounds {
		k := randN(len(fleet))
		rs := newKillRound(t, r, fleet, k)
		rs.launch(t)
		ms := randN(1000)
		victim := fleet[k]
		prefix := runnerPrefix(victim)
		t.Logf("round %d: kill -9 of instance %d (%s) %d ms after the calls started (seed %d)", r, k, victim.addr, ms, seed)
		time.Sleep(time.Duration(ms) * time.Millisecond) // the random moment of the fault
		victim.kill9()
		killed := time.Now()
		rs.snap = taskDetails(t, victim)
		h.record(rs.snap)
		// Its unfinished tasks are taken over by the survivors once their
		// leases lapse; it stays down until then.
		var orphans []string
		for id, tk := range rs.snap {
			if !terminal(tk.Status) && strings.HasPrefix(tk.Runner, prefix) {
				orphans = append(orphans, id)
			}
		}
		waitFor(t, fmt.Sprintf("the survivors to take over the %d unfinished task(s) of the killed instance", len(orphans)), 60*time.Second, func() bool {
			now := taskDetails(t, victim)
			for _, id := range orphans {
				if tk := now[id]; !terminal(tk.Status) && strings.HasPrefix(tk.Runner, prefix) {
					return false
				}
			}
			return true
		})
		t.Logf("round %d: the survivors took over %d task(s) %v after the kill (lease 2s)", r, len(orphans), time.Since(killed).Round(time.Millisecond))
		rs.orphans = orphans
		victim.start()
		rs.finish(t)
		rs.checkPostgres(t, fleet)
		now := taskDetails(t, victim)
		h.check(t, now)
		t.Logf("round %d: %d calls checked, %v since the test started:%s", r, len(rs.calls), time.Since(start).Round(time.Millisecond), rs.summary(now))
		if t.Failed() {
			t.Fatalf("round %d failed; replay with MCPTASK_FAULT_SEED=%d", r, seed)
		}
	}
}

// How a call of a round is made.
const (
	viaDetach = "cli --detach"    // mcptask call --detach; resume answers the deploy
	viaCLI    = "cli --answer"    // mcptask call --answer confirm=true, in the background
	viaGo     = "go client"       // the Go client's CallTool and Wait
	viaRetry  = "cli, made again" // a call that was never sent, made again after the restart
	toolDep   = "deploy_with_confirmation"
)

// What became of a call when the client that made it ended.
const (
	stEnded   = "ended"   // the client saw its task end
	stPending = "pending" // the journal holds it (its task, or the call whose answer was lost): resume finishes it
	stUnsent  = "unsent"  // nothing reached the server (the connection failed first): made again
	stBad     = "bad"     // the client saw what must not happen: the test fails
)

// roundCall is one call of a round and what its client made of it.
type roundCall struct {
	call
	via, wire string
	inst      int // the instance it was sent to

	mu     sync.Mutex
	taskID string
	state  string
	note   string
}

func (c *roundCall) set(id, state, note string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id != "" {
		c.taskID = id
	}
	c.state, c.note = state, note
}

func (c *roundCall) String() string {
	return fmt.Sprintf("%s %s (%s, %s, instance %d)", c.tool, c.id, c.via, c.wire, c.inst)
}

// killRound is one round of calls on a fleet (one daemon on SQLite).
type killRound struct {
	n     int
	fleet []*daemon
	calls []*roundCall
	clis  []*cli // one journal per instance
	// the Go clients, by instance and wire, and their journals
	gos      map[string]*client.Client
	journals map[string]string
	procs    map[*roundCall]*bg
	wg       sync.WaitGroup

	snap    map[string]taskDetail // the database right after the kill
	orphans []string              // the tasks the killed instance held (PostgreSQL)
}

// newKillRound makes the calls of round n on fleet (victim, the instance
// that will be killed, is not needed: calls of both wires go to every
// instance; a 2025-11-25 client of the victim opens a new session once it
// is back).
func newKillRound(t *testing.T, n int, fleet []*daemon, victim int) *killRound {
	rs := &killRound{n: n, fleet: fleet, gos: map[string]*client.Client{}, journals: map[string]string{}, procs: map[*roundCall]*bg{}}
	for _, d := range fleet {
		rs.clis = append(rs.clis, newCLI(t, d.URL))
	}
	// Two computations and two deploys, and one of either; each made
	// on a random wire, through a random client, to a random instance.
	kinds := []bool{true, true, false, false, randN(2) == 0}
	for i, isCompute := range kinds {
		var c call
		if isCompute {
			c = compute(1000+100*n+i, 3+randN(8), 30+randN(70))
			c.want = []string{"completed"}
		} else {
			c = deploy(fmt.Sprintf("svc-r%d-%d", n, i), 1+randN(3), 20+randN(40))
			c.want = []string{"completed", "failed"}
		}
		rc := &roundCall{call: c, wire: wires[randN(len(wires))], via: []string{viaDetach, viaCLI, viaGo}[randN(3)], inst: randN(len(fleet))}
		rs.calls = append(rs.calls, rc)
	}
	// The Go clients connect before the round starts (a connection that
	// fails is no fault of the round's).
	for _, c := range rs.calls {
		if c.via == viaGo {
			rs.goClient(t, c.inst, c.wire)
		}
	}
	return rs
}

// goClient returns the round's Go client for an instance and wire.
func (rs *killRound) goClient(t *testing.T, inst int, wire string) *client.Client {
	k := fmt.Sprintf("%d/%s", inst, wire)
	if c, ok := rs.gos[k]; ok {
		return c
	}
	j := filepath.Join(t.TempDir(), "go-journal.json")
	c := dialJournal(t, rs.fleet[inst].URL, wire, j, confirm)
	rs.gos[k], rs.journals[k] = c, j
	return c
}

// cliWords returns the words of the mcptask run that makes the call.
func (c *roundCall) cliWords() []string {
	args := []string{"--wire", c.wire}
	if c.via == viaCLI {
		// Verbose, to see why a wait lasts; bounded, so that a wait that
		// hangs fails the round in 30s, not 2 minutes.
		args = append(args, "-v", "--timeout", "30s")
	}
	args = append(args, "call")
	if c.via == viaDetach {
		args = append(args, "--detach")
	}
	args = append(append(args, c.tool), c.cliArgs()...)
	if c.via != viaDetach && c.tool == toolDep {
		args = append(args, "--answer", "confirm=true")
	}
	return args
}

// launch starts every call of the round at once.
func (rs *killRound) launch(t *testing.T) {
	for _, c := range rs.calls {
		switch c.via {
		case viaDetach, viaCLI:
			rs.procs[c] = rs.clis[c.inst].start(c.cliWords()...)
		case viaGo:
			gc := rs.goClient(t, c.inst, c.wire)
			rs.wg.Go(func() { roundGoCall(gc, c) })
		}
	}
}

// roundGoCall makes a call with the Go client and waits for its task.
func roundGoCall(gc *client.Client, c *roundCall) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := gc.CallTool(ctx, c.tool, c.args)
	var unknown *client.OutcomeUnknownError
	switch {
	case errors.As(err, &unknown):
		if !unknown.Journaled {
			c.set("", stBad, fmt.Sprintf("outcome unknown, and the journal does not hold the call: %v", err))
			return
		}
		c.set("", stPending, err.Error())
		return
	case err != nil:
		c.set("", stUnsent, err.Error())
		return
	case res.Task == nil:
		c.set("", stBad, fmt.Sprintf("answered without a task: %+v", res.Result))
		return
	}
	id := res.Task.ID
	out, err := gc.Wait(ctx, id, &client.WaitOptions{Unreachable: 15 * time.Second})
	var te *client.TaskError
	var unreachable *client.UnreachableError
	switch {
	case errors.As(err, &unreachable):
		c.set(id, stBad, "the server answers again, yet the wait ended: "+err.Error())
	case err == nil:
		c.set(id, stEnded, "completed: "+toolResultText(out))
	case errors.As(err, &te):
		c.set(id, stEnded, "failed: "+te.Message)
	case errors.Is(err, client.ErrTaskNotFound), errors.Is(err, client.ErrCancelled):
		c.set(id, stBad, err.Error())
	default:
		c.set(id, stPending, err.Error())
	}
}

var (
	cliStartedRE  = regexp.MustCompile(`mcptask: task (\S+) started`)
	cliDetachedRE = regexp.MustCompile(`mcptask: task (\S+) \(`)
)

// classify records what an mcptask call run made of its call.
func (c *roundCall) classify(r result) {
	id := ""
	if m := cliStartedRE.FindStringSubmatch(r.Stderr); m != nil {
		id = m[1]
	} else if m := cliDetachedRE.FindStringSubmatch(r.Stderr); m != nil {
		id = m[1]
	}
	out := r.Stdout + r.Stderr
	switch {
	case r.Code == 0 && c.via == viaDetach && id != "" && strings.TrimSpace(r.Stdout) == id:
		c.set(id, stPending, "detached")
	case r.Code == 0 && c.via != viaDetach && id != "":
		c.set(id, stEnded, "completed: "+strings.TrimSpace(r.Stdout))
	case r.Code == 2 && c.tool == toolDep && id != "" && strings.Contains(out, "outcome is unknown"):
		c.set(id, stEnded, "failed: outcome unknown")
	case r.Code == 4 && id != "":
		c.set(id, stPending, "the wait ended early: "+lastStderrLine(r.Stderr))
	case r.Code == 4 && strings.Contains(out, "outcome unknown") && strings.Contains(out, "resume"):
		c.set("", stPending, "outcome unknown: "+lastStderrLine(r.Stderr))
	case r.Code == 4 && (strings.Contains(out, "connect") || strings.Contains(out, "listing the tools")):
		c.set("", stUnsent, lastStderrLine(r.Stderr))
	case r.Code == 4 && id == "" && strings.Contains(out, "was not sent (nothing was started)"):
		// The kill cut the tools/list mcptask sends before the call.
		c.set("", stUnsent, lastStderrLine(r.Stderr))
	default:
		c.set(id, stBad, r.String())
	}
}

// lastStderrLine returns the last line of mcptask's stderr that is not a hint.
func lastStderrLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i > 0; i-- {
		if !strings.Contains(lines[i], "is the server running?") {
			return lines[i]
		}
	}
	return lines[0]
}

// finish ends every call of the round, the daemon(s) running again.
func (rs *killRound) finish(t *testing.T) {
	t.Helper()
	t0 := time.Now()
	var phases []string
	phase := func(what string) {
		phases = append(phases, fmt.Sprintf("%s %v", what, time.Since(t0).Round(time.Millisecond)))
		t0 = time.Now()
	}
	defer func() { t.Logf("round %d: after the restart: %s", rs.n, strings.Join(phases, ", ")) }()
	for c, p := range rs.procs {
		c.classify(p.wait())
	}
	phase("the CLI calls ended in")
	rs.wg.Wait()
	phase("the Go calls in")
	for _, c := range rs.calls {
		switch {
		case c.state == stBad:
			t.Errorf("round %d: %s: %s", rs.n, c, c.note)
		}
	}
	// The CLI's journals: resume waits for their tasks, answers the
	// deploys, and re-sends the calls whose answer was lost.
	for i, cl := range rs.clis {
		r := cl.run("resume", "--answer", "confirm=true")
		switch {
		case r.Code == 0:
		case r.Code == 2 && onlyDeploysFailed(r.Stderr):
		default:
			t.Errorf("round %d: resume on instance %d:\n%s", rs.n, i, r)
		}
		if es, err := client.ReadJournal(cl.journal); err != nil || len(es) > 0 {
			t.Errorf("round %d: after resume the CLI's journal still holds %+v (%v)", rs.n, es, err)
		}
	}
	phase("mcptask resume in")
	// The Go clients' journals, through new clients (a 2025-11-25
	// session did not survive the restart).
	for k, j := range rs.journals {
		var inst int
		var wire string
		fmt.Sscanf(k, "%d/", &inst)
		_, wire, _ = strings.Cut(k, "/")
		if es, err := client.ReadJournal(j); err != nil || len(es) == 0 {
			continue
		}
		gc := dialJournal(t, rs.fleet[inst].URL, wire, j, confirm)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		outs, err := gc.Resume(ctx, &client.WaitOptions{Unreachable: 30 * time.Second})
		cancel()
		if err != nil {
			t.Errorf("round %d: Resume on instance %d, %s: %v", rs.n, inst, wire, err)
		}
		for _, o := range outs {
			var te *client.TaskError
			switch {
			case o.Err == nil:
			case errors.As(o.Err, &te) && o.Entry.Tool == toolDep && strings.Contains(te.Message, "outcome is unknown"):
			default:
				t.Errorf("round %d: Resume on instance %d, %s: %s %s: %v", rs.n, inst, wire, o.Entry.Tool, o.Entry.TaskID, o.Err)
			}
		}
		if es, err := client.ReadJournal(j); err != nil || len(es) > 0 {
			t.Errorf("round %d: after Resume the Go client's journal still holds %+v (%v)", rs.n, es, err)
		}
		gc.Close()
	}
	for _, gc := range rs.gos {
		gc.Close()
	}
	phase("the Go client's Resume in")
	// A call that never reached the server is made again.
	again := map[*roundCall]*bg{}
	for _, c := range rs.calls {
		if c.state != stUnsent {
			continue
		}
		t.Logf("round %d: %s was never sent (%s): made again", rs.n, c, c.note)
		words := slices.Clone(c.cliWords())
		if c.via == viaDetach {
			words = slices.DeleteFunc(words, func(w string) bool { return w == "--detach" })
			if c.tool == toolDep {
				words = append(words, "--answer", "confirm=true")
			}
		}
		again[c] = rs.clis[c.inst].start(words...)
	}
	for c, p := range again {
		if r := p.wait(); r.Code != 0 {
			t.Errorf("round %d: %s made again after the restart:\n%s", rs.n, c, r)
		}
		c.via += ", then " + viaRetry
	}
	phase("the calls never sent made again in")
}

// summary says how the round's calls went, for the log: how each was
// made, what its client made of it, its task's status at the kill and
// at the end (with its starts).
func (rs *killRound) summary(now map[string]taskDetail) string {
	byCall := map[string]taskDetail{}
	for _, tk := range now {
		byCall[tk.Tool+"/"+logicalID(tk.dbTask)] = tk
	}
	var parts []string
	for _, c := range rs.calls {
		tk := byCall[c.tool+"/"+c.id]
		at := "absent"
		if was, ok := rs.snap[tk.ID]; ok {
			at = was.Status
		}
		parts = append(parts, fmt.Sprintf("\n\t%s %s via %s on %s to instance %d: client %s; at the kill %s, now %s after %d start(s)",
			c.tool, c.id, c.via, c.wire, c.inst, c.state, at, tk.Status, tk.Attempts))
	}
	return strings.Join(parts, "")
}

// checkSQLite checks the round on the exclusive SQLite daemon.
func (rs *killRound) checkSQLite(t *testing.T, d *daemon) {
	t.Helper()
	calls := rs.plainCalls()
	d.check(t, calls...)
	rs.checkOutcomes(t, d, func(tk taskDetail) bool { return true })
}

// checkPostgres checks the round on the fleet, with the audit trails of
// every instance merged.
func (rs *killRound) checkPostgres(t *testing.T, fleet []*daemon) {
	t.Helper()
	merged := &daemon{t: t, dsn: fleet[0].dsn, sch: fleet[0].sch}
	var logs []string
	for _, d := range fleet {
		logs = append(logs, d.logs())
	}
	merged.past.WriteString(mergeLogs(logs...))
	merged.check(t, rs.plainCalls()...)
	orphan := map[string]bool{}
	for _, id := range rs.orphans {
		orphan[id] = true
	}
	rs.checkOutcomes(t, fleet[0], func(tk taskDetail) bool { return orphan[tk.ID] })
}

func (rs *killRound) plainCalls() []call {
	var out []call
	for _, c := range rs.calls {
		out = append(out, c.call)
	}
	return out
}

// checkOutcomes checks each call's task against what the database held at
// the kill: interrupted (unfinished, and held by the killed process, as
// caught tells) deploys failed with "outcome unknown", interrupted
// computations ran once more and completed, ended tasks stayed as they
// were, tasks created after the kill ran once and completed, and every
// result is the right one.
func (rs *killRound) checkOutcomes(t *testing.T, d *daemon, caught func(taskDetail) bool) {
	t.Helper()
	now := taskDetails(t, d)
	byCall := map[string]taskDetail{}
	for _, tk := range now {
		byCall[tk.Tool+"/"+logicalID(tk.dbTask)] = tk
	}
	for _, c := range rs.calls {
		tk, ok := byCall[c.tool+"/"+c.id]
		if !ok {
			continue // check reported it
		}
		if c.taskID != "" && c.taskID != tk.ID {
			t.Errorf("round %d: %s: the client knows task %s, the database holds %s", rs.n, c, c.taskID, tk.ID)
		}
		before, existed := rs.snap[tk.ID]
		interrupted := existed && !terminal(before.Status) && caught(before)
		switch {
		case existed && terminal(before.Status):
			if tk.Status != before.Status || tk.Attempts != before.Attempts {
				t.Errorf("round %d: %s (task %s): %s after %d start(s) at the kill, now %s after %d", rs.n, c, tk.ID, before.Status, before.Attempts, tk.Status, tk.Attempts)
			}
		case interrupted && c.tool == toolDep:
			if tk.Status != "failed" || !strings.Contains(tk.Error, "outcome is unknown") {
				t.Errorf("round %d: %s (task %s): %s at the kill, now %s %s; want failed with \"outcome is unknown\"", rs.n, c, tk.ID, before.Status, tk.Status, tk.Error)
			}
		case interrupted:
			if tk.Status != "completed" || tk.Attempts != before.Attempts+1 {
				t.Errorf("round %d: %s (task %s): %s after %d start(s) at the kill, now %s after %d; want completed after one more", rs.n, c, tk.ID, before.Status, before.Attempts, tk.Status, tk.Attempts)
			}
		default: // created after the kill, or running elsewhere: it ran once
			if tk.Status != "completed" || tk.Attempts != 1 {
				t.Errorf("round %d: %s (task %s): %s after %d start(s) (at the kill: %v %s); want completed after one", rs.n, c, tk.ID, tk.Status, tk.Attempts, existed, before.Status)
			}
		}
		if want := wantResult(c.call); tk.Status == "completed" && !strings.Contains(tk.Result, want) {
			t.Errorf("round %d: %s (task %s): result %s, want %q", rs.n, c, tk.ID, tk.Result, want)
		}
	}
}

// roundsHistory remembers every terminal status a kill snapshot showed, so
// that a later change of one (in any later round) is caught.
type roundsHistory struct{ ended map[string]taskDetail }

func newRoundsHistory() *roundsHistory { return &roundsHistory{ended: map[string]taskDetail{}} }

func (h *roundsHistory) record(snap map[string]taskDetail) {
	for id, tk := range snap {
		if _, ok := h.ended[id]; !ok && terminal(tk.Status) {
			h.ended[id] = tk
		}
	}
}

func (h *roundsHistory) check(t *testing.T, now map[string]taskDetail) {
	t.Helper()
	for id, was := range h.ended {
		tk, ok := now[id]
		switch {
		case !ok:
			t.Errorf("task %s (%s %s), %s at a kill, is gone from the database", id, was.Tool, logicalID(was.dbTask), was.Status)
		case tk.Status != was.Status || tk.Attempts != was.Attempts || tk.Result != was.Result || tk.Error != was.Error:
			t.Errorf("task %s (%s %s) changed after it ended: %s (attempts %d) at a kill, now %s (attempts %d)", id, tk.Tool, logicalID(tk.dbTask), was.Status, was.Attempts, tk.Status, tk.Attempts)
		}
	}
}

// taskDetail is a task of the database, as a kill round snapshots it.
type taskDetail struct{ dbTask }

// taskDetails reads every task of the daemon's database, by ID.
func taskDetails(t testing.TB, d *daemon) map[string]taskDetail {
	t.Helper()
	out := map[string]taskDetail{}
	for _, tk := range d.tasks() {
		out[tk.ID] = taskDetail{dbTask: tk}
	}
	return out
}

// dialJournal connects a Go client on wire with the given journal (which
// a later client can Resume).
func dialJournal(t testing.TB, url, wire, journal string, elicit func(context.Context, string, *mcp.ElicitParams) (*mcp.ElicitResult, error)) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, url, &client.Options{ProtocolVersion: wire, Elicit: elicit, Journal: journal, AllowUnknownEffects: true})
	if err != nil {
		t.Fatalf("dialing %s on %s: %v", url, wire, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// toolResultText returns the text of a tool result.
func toolResultText(r *mcp.CallToolResult) string {
	if r == nil {
		return ""
	}
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, " ")
}

// wantResult is the text of the result of a call that completed.
func wantResult(c call) string {
	if c.tool == toolDep {
		return fmt.Sprintf("Deployed %s@latest to production.", c.id)
	}
	n := c.args["n"].(int)
	return fmt.Sprintf("There are %d primes up to %d (computed in %d steps).", primesTo(n), n, c.args["steps"])
}

// primesTo counts the primes up to n.
func primesTo(n int) int {
	composite := make([]bool, n+1)
	count := 0
	for i := 2; i <= n; i++ {
		if composite[i] {
			continue
		}
		count++
		for j := i * i; j <= n; j += i {
			composite[j] = true
		}
	}
	return count
}

// runnerPrefix is the start of the runner of every task the daemon's
// current process holds (mcptaskd's instance IDs are
// mcptaskd-HOST-PID-RANDOM).
func runnerPrefix(d *daemon) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	host, _ := os.Hostname()
	return fmt.Sprintf("mcptaskd-%s-%d-", host, d.p.Pid())
}

// ownSchema returns a PostgreSQL schema of the test's own, dropped at
// the end (after the daemons using it, which are stopped first).
func ownSchema(t *testing.T, dsn string) string {
	t.Helper()
	schema := fmt.Sprintf("mcptask_faults_%d_%d", os.Getpid(), time.Now().UnixNano())
	drop := func() error { return pgtest.Drop(dsn, schema) }
	if err := drop(); err != nil {
		t.Fatalf("PostgreSQL at %s: %v", hostOf(t, dsn), err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// mergeLogs merges the JSON logs of several processes into one, in the
// order of their records' times, each process's own order kept (a line
// without a time goes with the line before it).
func mergeLogs(logs ...string) string {
	type line struct {
		at   time.Time
		text string
	}
	var streams [][]line
	for _, l := range logs {
		var s []line
		var last time.Time
		for text := range strings.Lines(l) {
			var rec struct {
				Time time.Time `json:"time"`
			}
			if json.Unmarshal([]byte(text), &rec) == nil && !rec.Time.IsZero() {
				last = rec.Time
			}
			s = append(s, line{last, text})
		}
		streams = append(streams, s)
	}
	var b strings.Builder
	for {
		best := -1
		for i, s := range streams {
			if len(s) > 0 && (best < 0 || s[0].at.Before(streams[best][0].at)) {
				best = i
			}
		}
		if best < 0 {
			return b.String()
		}
		text := streams[best][0].text
		streams[best] = streams[best][1:]
		b.WriteString(text)
		if !strings.HasSuffix(text, "\n") {
			b.WriteString("\n")
		}
	}
}

// onlyDeploysFailed reports whether the failures a resume reported (one
// at least) are all deploys failed "outcome unknown": no computation
// failed, no call was refused.
func onlyDeploysFailed(stderr string) bool {
	n := 0
	for l := range strings.Lines(stderr) {
		switch {
		case strings.Contains(l, "refused"), strings.Contains(l, "long_computation (task") && strings.Contains(l, "failed"):
			return false
		case strings.HasPrefix(l, "mcptask: "+toolDep+" (task ") && strings.Contains(l, "outcome is unknown"):
			n++
		}
	}
	return n > 0
}
