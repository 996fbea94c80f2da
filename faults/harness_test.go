package faults_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/clitest"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	_ "modernc.org/sqlite" // reads the daemon's task database
)

// wires are the two task wires every fault runs on.
var wires = []string{"2026-07-28", "2025-11-25"}

// daemon is one mcptaskd across its restarts: the same arguments, the
// same address (so that journals, keyed by URL, stay valid), one log.
type daemon struct {
	t    testing.TB
	args []string
	addr string
	URL  string
	db   string // the SQLite file, "" on PostgreSQL
	dsn  string // the PostgreSQL DSN and schema, "" on SQLite
	sch  string

	mu   sync.Mutex
	p    *proctest.Process
	past strings.Builder // the logs of the processes that ended
}

// freeAddr returns a loopback address with a port free now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// baseArgs are the flags of every daemon of the suite: JSON logs with the
// audit trail, quick polls, and no per-requester limits (the suite is one
// requester making many calls).
func baseArgs(addr string) []string {
	return []string{"-addr", addr, "-log-format", "json", "-poll-interval", "50ms",
		"-create-rate", "0", "-request-rate", "0", "-max-active-tasks", "0", "-shutdown-grace", "2s"}
}

// sqliteDaemon starts mcptaskd on a fresh SQLite file in dir (a temporary
// directory when empty).
func sqliteDaemon(t testing.TB, dir string, extra ...string) *daemon {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	addr := freeAddr(t)
	d := &daemon{t: t, addr: addr, db: filepath.Join(dir, "tasks.db")}
	d.args = append(append(baseArgs(addr), "-db", d.db), extra...)
	d.start()
	t.Cleanup(d.cleanup)
	return d
}

// postgresDaemon starts mcptaskd on schema of the PostgreSQL database dsn.
func postgresDaemon(t testing.TB, dsn, schema string, extra ...string) *daemon {
	t.Helper()
	addr := freeAddr(t)
	d := &daemon{t: t, addr: addr, dsn: dsn, sch: schema}
	d.args = append(append(baseArgs(addr), "-postgres", dsn, "-postgres-schema", schema), extra...)
	d.start()
	t.Cleanup(d.cleanup)
	return d
}

func (d *daemon) cleanup() {
	d.mu.Lock()
	p := d.p
	d.mu.Unlock()
	if p != nil {
		p.Kill()
	}
	if d.t.Failed() {
		logs := d.logs()
		if len(logs) > 200<<10 {
			logs = "…" + logs[len(logs)-200<<10:]
		}
		d.t.Logf("--- mcptaskd %s log ---\n%s", d.addr, logs)
	}
}

// start starts the daemon's process and waits until it serves.
func (d *daemon) start() {
	d.t.Helper()
	env := append(cleanEnv(), "GORACE=halt_on_error=1")
	p, err := proctest.Start(proctest.Config{Path: daemonBin, Args: d.args, Env: env})
	if err != nil {
		d.t.Fatal(err)
	}
	d.mu.Lock()
	d.p = p
	d.mu.Unlock()
	u, err := p.WaitListening(context.Background(), 90*time.Second)
	if err != nil {
		p.Kill()
		d.t.Fatalf("mcptaskd did not start: %v\n%s", err, p.Logs())
	}
	d.URL = u
}

// kill9 kills the process with SIGKILL, as a crash does, and counts the
// fault.
func (d *daemon) kill9() {
	d.t.Helper()
	d.mu.Lock()
	p := d.p
	d.p = nil
	d.mu.Unlock()
	if p == nil {
		d.t.Fatal("kill9: not running")
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		d.t.Fatal(err)
	}
	<-p.Exited()
	counts.faults.Add(1)
	d.mu.Lock()
	d.past.WriteString(p.Logs())
	// The kill, in the log: a record the process had not written yet is
	// lost with it (see transitionErrors).
	fmt.Fprintf(&d.past, "{\"time\":%q,\"msg\":%q}\n", time.Now().UTC().Format(time.RFC3339Nano), killMarker)
	d.mu.Unlock()
}

// restart kills the process with SIGKILL and starts it again.
func (d *daemon) restart() {
	d.t.Helper()
	d.kill9()
	d.start()
}

// logs returns the logs of every process of the daemon so far.
func (d *daemon) logs() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.past.String()
	if d.p != nil {
		s += d.p.Logs()
	}
	return s
}

// cleanEnv is the environment without mcptask's own variables.
func cleanEnv() []string { return clitest.CleanEnv() }

// dbTask is a task as the daemon's database holds it.
type dbTask struct {
	ID, Tool, Status string
	Attempts         int64
	Key              string
	Args             map[string]any
	// Message, Error and Result are the status message and the JSON of
	// the error and of the result ("" when none); Runner is the engine
	// that holds the task.
	Message, Error, Result, Runner string
}

// tasks reads every task of the daemon's database.
func (d *daemon) tasks() []dbTask {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rows interface {
		Next() bool
		Scan(...any) error
		Err() error
		Close()
	}
	const cols = `id, tool, status, attempts, idempotency_key, coalesce(request, ''),
		status_message, coalesce(error, ''), coalesce(result, ''), runner`
	if d.db != "" {
		db, err := sql.Open("sqlite", "file:"+d.db+"?_pragma=query_only(1)&_pragma=busy_timeout(10000)")
		if err != nil {
			d.t.Fatal(err)
		}
		defer db.Close()
		r, err := db.QueryContext(ctx, `SELECT `+cols+` FROM tasks`)
		if err != nil {
			d.t.Fatalf("reading %s: %v", d.db, err)
		}
		rows = sqlRows{r}
	} else {
		conn, err := pgx.Connect(ctx, d.dsn)
		if err != nil {
			d.t.Fatal(err)
		}
		defer conn.Close(context.Background())
		r, err := conn.Query(ctx, `SELECT `+cols+` FROM `+pgx.Identifier{d.sch}.Sanitize()+`.tasks`)
		if err != nil {
			d.t.Fatalf("reading schema %s: %v", d.sch, err)
		}
		rows = pgRows{r}
	}
	defer rows.Close()
	var out []dbTask
	for rows.Next() {
		var tk dbTask
		var req string
		if err := rows.Scan(&tk.ID, &tk.Tool, &tk.Status, &tk.Attempts, &tk.Key, &req, &tk.Message, &tk.Error, &tk.Result, &tk.Runner); err != nil {
			d.t.Fatal(err)
		}
		var r struct {
			Arguments map[string]any `json:"arguments"`
		}
		_ = json.Unmarshal([]byte(req), &r)
		tk.Args = r.Arguments
		out = append(out, tk)
	}
	if err := rows.Err(); err != nil {
		d.t.Fatal(err)
	}
	return out
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

type pgRows struct{ pgx.Rows }

// task returns the task of the database with the given ID.
func (d *daemon) task(id string) (dbTask, bool) {
	for _, tk := range d.tasks() {
		if tk.ID == id {
			return tk, true
		}
	}
	return dbTask{}, false
}

// call is one logical call the suite makes, however often it is
// delivered: its arguments carry a value no other call has, by which its
// task is found in the database.
type call struct {
	tool       string
	args       map[string]any
	id         string   // the unique value
	rerunnable bool     // the tool may be started again after a crash
	want       []string // acceptable final statuses (nil: any terminal one)
}

// deploy is a call of deploy_with_confirmation (not re-runnable: a second
// start is a second deployment), with a service name of its own.
func deploy(name string, buildSteps, delayMS int) call {
	return call{tool: "deploy_with_confirmation", id: name,
		args: map[string]any{"service": name, "build_steps": buildSteps, "step_delay_ms": delayMS}}
}

// compute is a call of long_computation (re-runnable) with an n of its
// own.
func compute(n, steps, delayMS int) call {
	return call{tool: "long_computation", id: fmt.Sprint(n), rerunnable: true,
		args: map[string]any{"n": n, "steps": steps, "step_delay_ms": delayMS}}
}

// cliArgs returns the call's arguments as mcptask key=value words.
func (c call) cliArgs() []string {
	var out []string
	for k, v := range c.args {
		out = append(out, fmt.Sprintf("%s=%v", k, v))
	}
	slices.Sort(out)
	return out
}

// logicalID returns the unique value of a database task's call.
func logicalID(tk dbTask) string {
	switch tk.Tool {
	case "deploy_with_confirmation":
		s, _ := tk.Args["service"].(string)
		return s
	case "long_computation":
		if n, ok := tk.Args["n"].(float64); ok {
			return fmt.Sprint(int64(n))
		}
	}
	return ""
}

// check checks the invariants for calls, which must all have ended, on
// the database and on the audit trail, and counts what it checked.
func (d *daemon) check(t testing.TB, calls ...call) {
	t.Helper()
	byCall := map[string][]dbTask{}
	for _, tk := range d.tasks() {
		k := tk.Tool + "/" + logicalID(tk)
		byCall[k] = append(byCall[k], tk)
	}
	for _, c := range calls {
		counts.tasks.Add(1)
		ts := byCall[c.tool+"/"+c.id]
		switch {
		case len(ts) == 0:
			counts.lost.Add(1)
			t.Errorf("%s %s: no task in the database (lost)", c.tool, c.id)
			continue
		case len(ts) > 1:
			counts.duplicates.Add(int64(len(ts) - 1))
			t.Errorf("%s %s: %d tasks for one call (duplicates): %+v", c.tool, c.id, len(ts), ts)
		}
		tk := ts[0]
		if !c.rerunnable && tk.Attempts != 1 {
			t.Errorf("%s %s (task %s): started %d times; a tool that is not re-runnable starts once", c.tool, c.id, tk.ID, tk.Attempts)
		}
		if !terminal(tk.Status) {
			t.Errorf("%s %s (task %s): still %s", c.tool, c.id, tk.ID, tk.Status)
		} else if c.want != nil && !slices.Contains(c.want, tk.Status) {
			t.Errorf("%s %s (task %s): %s, want %v", c.tool, c.id, tk.ID, tk.Status, c.want)
		}
	}
	for _, err := range transitionErrors(d.logs()) {
		t.Error(err)
	}
}

func terminal(s string) bool { return s == "completed" || s == "failed" || s == "cancelled" }

// killMarker is the log record the harness writes where it killed a
// process.
const killMarker = "faults.kill9"

// transitionErrors checks every status change of mcptaskd's audit trail:
// each starts where the task's previous one ended (a task starts
// working), none leaves a terminal status, and each is an allowed one.
// One exception: a kill -9 between a commit and its audit record loses the
// record, so across a kill a change may start elsewhere than the last
// recorded one ended, provided the unrecorded change was an allowed one.
func transitionErrors(logs string) []error {
	last := map[string]string{}
	killed := map[string]bool{} // tasks whose next record may follow a lost one
	var errs []error
	for line := range strings.Lines(logs) {
		var rec struct {
			Msg, Event, Task, From, To string
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec.Msg == killMarker {
			for id := range last {
				killed[id] = true
			}
			continue
		}
		if rec.Msg != "audit" {
			continue
		}
		switch rec.Event {
		case "task.created":
			last[rec.Task] = "working"
		case "task.status_changed":
			prev, known := last[rec.Task]
			lostOne := killed[rec.Task] && allowedTransition(prev, rec.From)
			delete(killed, rec.Task)
			switch {
			case known && prev != rec.From && !lostOne:
				errs = append(errs, fmt.Errorf("task %s: a change from %s, but it was %s", rec.Task, rec.From, prev))
			case terminal(rec.From):
				errs = append(errs, fmt.Errorf("task %s: its status changed from the terminal %s to %s", rec.Task, rec.From, rec.To))
			case rec.From == rec.To:
				errs = append(errs, fmt.Errorf("task %s: a change from %s to itself", rec.Task, rec.From))
			case !allowedTransition(rec.From, rec.To):
				errs = append(errs, fmt.Errorf("task %s: %s to %s is not a transition of the task state machine", rec.Task, rec.From, rec.To))
			}
			last[rec.Task] = rec.To
		}
	}
	return errs
}

// allowedTransition reports whether the task state machine moves from
// one status to the other.
func allowedTransition(from, to string) bool {
	switch {
	case terminal(from), from == to:
		return false
	case terminal(to):
		return true
	}
	return (from == "working" && to == "input_required") || (from == "input_required" && to == "working")
}

// waitFor polls cond (every 10 ms) until it holds, failing the test after
// timeout.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond) // polling the condition, not timing the test
	}
}

// waitStatus waits until the database holds the task of c in one of the
// statuses and returns it.
func (d *daemon) waitStatus(t testing.TB, c call, timeout time.Duration, statuses ...string) dbTask {
	t.Helper()
	var found dbTask
	waitFor(t, fmt.Sprintf("%s %s to be %v", c.tool, c.id, statuses), timeout, func() bool {
		for _, tk := range d.tasks() {
			if tk.Tool == c.tool && logicalID(tk) == c.id && slices.Contains(statuses, tk.Status) {
				found = tk
				return true
			}
		}
		return false
	})
	return found
}

// cli runs mcptask against one URL with one journal.
type cli struct {
	t       testing.TB
	url     string
	journal string
}

func newCLI(t testing.TB, url string) *cli {
	return &cli{t: t, url: url, journal: filepath.Join(t.TempDir(), "journal.json")}
}

// result is the end of one mcptask run.
type result = clitest.Result

func (c *cli) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, cliBin, despiteUnknown(args)...)
	cmd.Env = append(cleanEnv(), "GORACE=halt_on_error=1", "MCPTASK_JOURNAL="+c.journal, "MCPTASK_URL="+c.url)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// despiteUnknown adds --despite-unknown to a call: the suite kills servers
// during deployments on purpose, which leaves their effects unknown, and
// calls the tool again without reconciling (each call deploys another
// service), which mcptask refuses by default.
func despiteUnknown(args []string) []string {
	for i, a := range args {
		if a == "call" {
			out := append(append(append([]string{}, args[:i+1]...), "--despite-unknown"), args[i+1:]...)
			return out
		}
	}
	return args
}

// run runs mcptask to its end, within two minutes.
func (c *cli) run(args ...string) result {
	c.t.Helper()
	return c.start(args...).wait()
}

// bg is an mcptask running in the background.
type bg struct {
	t        testing.TB
	args     []string
	cancel   context.CancelFunc
	done     chan struct{}
	out, err proctest.Buffer
	code     int
}

// start starts mcptask in the background; wait collects it.
func (c *cli) start(args ...string) *bg {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	b := &bg{t: c.t, args: args, cancel: cancel, done: make(chan struct{})}
	cmd := c.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &b.out, &b.err
	if err := cmd.Start(); err != nil {
		cancel()
		c.t.Fatal(err)
	}
	go func() {
		defer close(b.done)
		b.code = proctest.ExitCode(cmd.Wait())
	}()
	return b
}

func (b *bg) wait() result {
	b.t.Helper()
	<-b.done
	b.cancel()
	return result{Args: b.args, Stdout: b.out.String(), Stderr: b.err.String(), Code: b.code}
}

// expect checks a run's exit code and that stdout and stderr hold the
// given strings.
func expect(t testing.TB, r result, code int, stdout, stderr []string) {
	t.Helper()
	clitest.Expect(t, r, code, stdout, stderr)
}

// confirm is a Go client's elicitation handler that accepts every
// confirmation.
func confirm(context.Context, string, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
}

// dial connects a Go client on wire, with a journal of its own.
func dial(t testing.TB, url, wire string, elicit func(context.Context, string, *mcp.ElicitParams) (*mcp.ElicitResult, error)) *client.Client {
	t.Helper()
	return dialWith(t, url, wire, &client.Options{Elicit: elicit})
}

// dialWith is dial with options o (nil: none); the wire, the journal and
// AllowUnknownEffects are set here.
func dialWith(t testing.TB, url, wire string, o *client.Options) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := client.Options{}
	if o != nil {
		opts = *o
	}
	opts.ProtocolVersion, opts.AllowUnknownEffects = wire, true
	opts.Journal = filepath.Join(t.TempDir(), "client-journal.json")
	c, err := client.Dial(ctx, url, &opts)
	if err != nil {
		t.Fatalf("dialing %s on %s: %v", url, wire, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// pgDSN returns the PostgreSQL DSN of the suite, or skips the test loudly.
func pgDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("MCPTASK_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("SKIPPED: the PostgreSQL rounds need MCPTASK_TEST_POSTGRES_DSN (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable); .ci/run sets it")
	}
	return dsn
}

// hostOf returns the host:port of a DSN.
func hostOf(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
