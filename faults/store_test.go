package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/disktest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPostgresRestart: mcptaskd on PostgreSQL (the default 15s lease)
// with deploys waiting for their confirmation (the Go client's handler
// holds the answer until the restart is over) and computations running
// (writing a status message at each step), through the Go client and the
// CLI on both wires; then the PostgreSQL server itself is restarted. Every
// call must complete: the store's outage is transient, and the work's
// writes are retried within the lease.
func TestPostgresRestart(t *testing.T) {
	dsn := pgDSN(t)
	start := time.Now()
	schema := ownSchema(t, dsn)
	d := postgresDaemon(t, dsn, schema, "-db", filepath.Join(t.TempDir(), "unused.db"))
	pgStarted := postmasterStart(t, dsn)

	restarted := make(chan struct{}) // closed once PostgreSQL answers again
	held := func(ctx context.Context, taskID string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		select {
		case <-restarted:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return confirm(ctx, taskID, p)
	}

	var calls []call
	var deploys, computes []call
	ws := &heldWaits{gate: restarted}
	cl := newCLI(t, d.URL)
	var procs []*bg
	for i, wire := range wires {
		gc := dial(t, d.URL, wire, held)
		dep := deploy(fmt.Sprintf("pg-restart-%d", i), 1, 20)
		comp := compute(5000+i, 60, 100)
		for _, c := range []call{dep, comp} {
			ws.goCall(t, gc, c)
		}
		// Through the CLI: one detached, one waiting in the background.
		cd := compute(6000+i, 60, 100)
		r := cl.run(append([]string{"--wire", wire, "call", "--detach", cd.tool}, cd.cliArgs()...)...)
		expect(t, r, 0, nil, nil)
		cb := compute(7000+i, 60, 100)
		procs = append(procs, cl.start(append([]string{"--wire", wire, "call", cb.tool}, cb.cliArgs()...)...))
		deploys = append(deploys, dep)
		computes = append(computes, comp, cd, cb)
	}
	calls = append(append(calls, deploys...), computes...)
	for i := range calls {
		calls[i].want = []string{"completed"}
	}

	// Every deploy waits for its answer, every computation is under way.
	for _, c := range deploys {
		d.waitStatus(t, c, 60*time.Second, "input_required")
	}
	step := regexp.MustCompile(`^step (\d+) of 60\b`)
	for _, c := range computes {
		waitFor(t, fmt.Sprintf("%s %s to run its second step", c.tool, c.id), 60*time.Second, func() bool {
			for _, tk := range taskDetails(t, d) {
				if tk.Tool == c.tool && logicalID(tk.dbTask) == c.id {
					m := step.FindStringSubmatch(tk.Message)
					k := 0
					if m != nil {
						k, _ = strconv.Atoi(m[1])
					}
					return k >= 2
				}
			}
			return false
		})
	}

	t.Logf("restarting the PostgreSQL server at %s, %v after the calls started", hostOf(t, dsn), time.Since(start).Round(time.Millisecond))
	cmd := exec.Command("sh", "-c", "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main restart")
	out, err := cmd.CombinedOutput()
	if err != nil {
		close(restarted)
		t.Skipf("SKIPPED: restarting PostgreSQL (pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main restart) failed, so the restart round cannot run here: %v\n%s", err, out)
	}
	counts.faults.Add(1)
	waitFor(t, "PostgreSQL to accept connections again", 60*time.Second, func() bool { return pgPing(dsn) == nil })
	if again := postmasterStart(t, dsn); !again.After(pgStarted) {
		t.Fatalf("PostgreSQL was not restarted: it started at %v before and at %v after", pgStarted, again)
	}
	t.Logf("PostgreSQL answers again %v after the calls started", time.Since(start).Round(time.Millisecond))
	close(restarted)

	// Every call completes.
	ws.wait(t)
	for _, p := range procs {
		r := p.wait()
		switch {
		case r.Code == 0:
		default:
			t.Errorf("a CLI call through the restart:\n%s", r)
		}
	}
	r := cl.run("resume")
	expect(t, r, 0, nil, nil)
	d.check(t, calls...)
	checkResults(t, d, calls)
	for _, tk := range taskDetails(t, d) {
		if tk.Status == "failed" {
			t.Errorf("task %s (%s %s) failed through the PostgreSQL restart: %s (%s)", tk.ID, tk.Tool, logicalID(tk.dbTask), tk.Error, tk.Message)
		}
	}
	// The outage did reach the running work: some of its writes failed
	// and were retried (else the round proved nothing).
	if logs := d.logs(); !strings.Contains(logs, "trying again within the lease") || !strings.Contains(logs, "task write succeeded after retries") {
		t.Errorf("no write of the running work failed and was retried through the PostgreSQL restart: the fault did not reach the work")
	}
	t.Logf("%d calls completed through the restart, %v in all; the daemon logged:\n%s", len(calls), time.Since(start).Round(time.Millisecond), storeRecords(d.logs()))
}

// TestSQLiteDiskFull: mcptaskd keeps its SQLite file on a small tmpfs,
// which the test fills to the last byte while computations run and a
// deploy waits for its confirmation (the Go client's handler holds the
// answer until space is back). /healthz answers 503 while the outcomes of
// finished work cannot be written, no task fails meanwhile, and a call
// made then is either taken (the file had room) or refused (and made
// again once space is back). With space freed every call completes.
func TestSQLiteDiskFull(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SKIPPED: the full-disk round mounts a tmpfs, which it does on Linux only")
	}
	dir := filepath.Join(t.TempDir(), "small-disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	unmount, err := disktest.Mount(dir, "8m")
	if err != nil {
		t.Skipf("SKIPPED: the full-disk round needs to mount a small tmpfs (as root), and cannot here: %v", err)
	}
	t.Cleanup(unmount)
	start := time.Now()
	d := sqliteDaemon(t, dir)

	freed := make(chan struct{}) // closed once space is back
	held := func(ctx context.Context, taskID string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return confirm(ctx, taskID, p)
	}
	var calls, computes []call
	ws := &heldWaits{gate: freed}
	cl := newCLI(t, d.URL)
	var procs []*bg
	for i, wire := range wires {
		gc := dial(t, d.URL, wire, held)
		dep := deploy(fmt.Sprintf("disk-full-%d", i), 1, 20)
		comp := compute(3000+i, 20+randN(20), 50)
		ws.goCall(t, gc, dep)
		ws.goCall(t, gc, comp)
		cb := compute(4000+i, 20+randN(20), 50)
		procs = append(procs, cl.start(append([]string{"--wire", wire, "call", cb.tool}, cb.cliArgs()...)...))
		calls = append(calls, dep)
		computes = append(computes, comp, cb)
	}
	calls = append(calls, computes...)
	for _, c := range calls {
		if c.tool == toolDep {
			d.waitStatus(t, c, 60*time.Second, "input_required")
		} else {
			d.waitStatus(t, c, 60*time.Second, "working")
		}
	}

	// Fill the disk to the last byte.
	filler := filepath.Join(dir, "filler")
	if err := disktest.Fill(filler); err != nil {
		t.Fatal(err)
	}
	counts.faults.Add(1)
	t.Logf("disk full %v after the calls started", time.Since(start).Round(time.Millisecond))

	health := func() (int, string) {
		resp, err := http.Get(strings.TrimSuffix(d.URL, "/mcp") + "/healthz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Every computation finishes its work on the full disk: its outcome
	// cannot be written, and is kept (retried), the task still working.
	pending := fmt.Sprintf("recording the outcome of %d finished task(s) fails", len(computes))
	waitFor(t, "/healthz to report the outcome writes of every computation failing", 60*time.Second, func() bool {
		code, body := health()
		return code == http.StatusServiceUnavailable && strings.Contains(body, pending)
	})
	if code, body := health(); code != http.StatusServiceUnavailable || !strings.Contains(body, "full") {
		t.Errorf("/healthz while the disk is full: %d %s; want 503 saying the disk is full", code, body)
	}
	t.Logf("/healthz answers 503 (%s) %v after the calls started", pending, time.Since(start).Round(time.Millisecond))
	byCall := map[string]taskDetail{}
	for _, tk := range taskDetails(t, d) {
		byCall[tk.Tool+"/"+logicalID(tk.dbTask)] = tk
	}
	for _, c := range calls {
		want := "working"
		if c.tool == toolDep {
			want = "input_required"
		}
		if tk := byCall[c.tool+"/"+c.id]; tk.Status != want {
			t.Errorf("%s %s (task %s) on the full disk: %s %s; want %s", c.tool, c.id, tk.ID, tk.Status, tk.Error, want)
		}
	}

	// A call made while the disk is full: taken if the file has room,
	// else refused (nothing created) or unanswered (the journal keeps
	// it for resume).
	late := compute(3500, 3, 20)
	late.want = []string{"completed"}
	r := cl.run(append([]string{"--wire", wires[randN(len(wires))], "call", "--detach", late.tool}, late.cliArgs()...)...)
	refused := false
	switch {
	case r.Code == 0:
		t.Logf("a call made on the full disk was taken: task %s", strings.TrimSpace(r.Stdout))
	case r.Code == 2 && strings.Contains(r.Stderr, "could not create the task"):
		refused = true
		t.Logf("a call made on the full disk was refused: %s", lastStderrLine(r.Stderr))
	case r.Code == 4 && strings.Contains(r.Stderr, "outcome unknown"):
		t.Logf("a call made on the full disk got no answer (resume finishes it): %s", lastStderrLine(r.Stderr))
	default:
		t.Errorf("a call on the full disk:\n%s", r)
	}
	calls = append(calls, late)

	if err := os.Remove(filler); err != nil { // space is back
		t.Fatal(err)
	}
	close(freed)
	waitFor(t, "/healthz ok again", 60*time.Second, func() bool {
		code, _ := health()
		return code == http.StatusOK
	})
	t.Logf("/healthz ok again %v after the calls started", time.Since(start).Round(time.Millisecond))
	if refused {
		r := cl.run(append([]string{"call", late.tool}, late.cliArgs()...)...)
		expect(t, r, 0, []string{wantResult(late)}, nil)
	}
	ws.wait(t)
	for _, p := range procs {
		r := p.wait()
		expect(t, r, 0, []string{"primes up to"}, nil)
	}
	expect(t, cl.run("resume"), 0, nil, nil)
	for i := range calls {
		calls[i].want = []string{"completed"}
	}
	d.check(t, calls...)
	checkResults(t, d, calls)
	t.Logf("%d calls completed, %v in all; the daemon logged:\n%s", len(calls), time.Since(start).Round(time.Millisecond), storeRecords(d.logs()))
}

// checkResults checks the result of each completed call's task.
func checkResults(t *testing.T, d *daemon, calls []call) {
	t.Helper()
	byCall := map[string]taskDetail{}
	for _, tk := range taskDetails(t, d) {
		byCall[tk.Tool+"/"+logicalID(tk.dbTask)] = tk
	}
	for _, c := range calls {
		if tk, ok := byCall[c.tool+"/"+c.id]; ok && tk.Status == "completed" && !strings.Contains(tk.Result, wantResult(c)) {
			t.Errorf("%s %s (task %s): result %s, want %q", c.tool, c.id, tk.ID, tk.Result, wantResult(c))
		}
	}
}

// heldWaits are Go-client calls waited for in the background. gate is
// closed once the fault is over.
type heldWaits struct {
	gate  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	errs  []error
	notes []string
}

// goCall makes c with gc, then waits for its task in the background; the
// task must complete. A wait that ends early (the server answered a poll
// with an error during the fault: the task still runs) is made again once
// the fault is over; after it, a wait must not end early more than twice.
func (w *heldWaits) goCall(t *testing.T, gc *client.Client, c call) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	res, err := gc.CallTool(ctx, c.tool, c.args)
	cancel()
	if err != nil || res.Task == nil {
		t.Fatalf("%s %s: %+v, %v", c.tool, c.id, res, err)
	}
	id := res.Task.ID
	w.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		after := 0 // waits ended early after the fault
		for try := 1; ; try++ {
			out, err := gc.Wait(ctx, id, &client.WaitOptions{Unreachable: time.Minute})
			var te *client.TaskError
			switch {
			case err == nil:
				if !strings.Contains(toolResultText(out), wantResult(c)) {
					w.fail(fmt.Errorf("%s %s (task %s): result %q, want %q", c.tool, c.id, id, toolResultText(out), wantResult(c)))
				}
				return
			case errors.As(err, &te), errors.Is(err, client.ErrCancelled), errors.Is(err, client.ErrTaskNotFound), ctx.Err() != nil:
				w.fail(fmt.Errorf("%s %s (task %s): %w", c.tool, c.id, id, err))
				return
			}
			select {
			case <-w.gate:
				if after++; after > 2 {
					w.fail(fmt.Errorf("%s %s (task %s): the wait still ends early after the fault: %w", c.tool, c.id, id, err))
					return
				}
				w.note(fmt.Sprintf("%s %s (task %s): wait %d ended early after the fault, waiting again: %v", c.tool, c.id, id, try, err))
			default:
				w.note(fmt.Sprintf("%s %s (task %s): wait %d ended early during the fault, waiting again once it is over: %v", c.tool, c.id, id, try, err))
				<-w.gate
			}
		}
	})
}

func (w *heldWaits) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, err)
}

func (w *heldWaits) note(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notes = append(w.notes, s)
}

// wait waits for every call and reports their failures.
func (w *heldWaits) wait(t *testing.T) {
	t.Helper()
	w.wg.Wait()
	for _, s := range w.notes {
		t.Log(s)
	}
	for _, err := range w.errs {
		t.Error(err)
	}
}

// storeRecords sums up the daemon's warnings and errors (the store's
// faults) and its records of retries that succeeded: how many of each
// message, with the first one.
func storeRecords(logs string) string {
	type rec struct {
		n     int
		first string
	}
	by := map[string]*rec{}
	var order []string
	for l := range strings.Lines(logs) {
		var r struct{ Level, Msg string }
		if json.Unmarshal([]byte(l), &r) != nil {
			continue
		}
		if r.Level != "WARN" && r.Level != "ERROR" && !strings.Contains(r.Msg, "after retries") && !strings.Contains(r.Msg, "reachable again") {
			continue
		}
		if by[r.Msg] == nil {
			by[r.Msg] = &rec{first: strings.TrimSpace(l)}
			order = append(order, r.Msg)
		}
		by[r.Msg].n++
	}
	if len(order) == 0 {
		return "\t(no warning or error)\n"
	}
	var b strings.Builder
	for _, m := range order {
		fmt.Fprintf(&b, "\t%d× %q, the first: %s\n", by[m].n, m, by[m].first)
	}
	return b.String()
}

// pgPing connects to PostgreSQL and runs a query.
func pgPing(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// postmasterStart returns when the PostgreSQL server started.
func postmasterStart(t *testing.T, dsn string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var at time.Time
	if err := conn.QueryRow(ctx, "SELECT pg_postmaster_start_time()").Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}
