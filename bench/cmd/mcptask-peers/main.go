// Command mcptask-peers measures mcptask side by side with peer MCP
// servers, in one run, over loopback HTTP:
//
//   - mcptask, in process (assembled like mcptaskd by loadgen.StartServer,
//     SQLite with synchronous=FULL), on the 2025-11-25 wire (one session
//     per worker) and on the 2026-07-28 wire (stateless POSTs with the
//     io.modelcontextprotocol/tasks extension);
//   - mcp-go v1.2.1 (bench/peers/mcpgo: its own in-memory 2025-11-25
//     tasks), a child process;
//   - the go-sdk v1.8.0 alone (bench/peers/gosdk: no tasks, so only the
//     plain call), a child process: the floor of the SDK mcptask is built
//     on.
//
// The peers are Go modules of their own, so that the main module depends on
// neither; the command builds them (go build) and starts them on loopback.
//
// Scenarios: a plain no-op tools/call; a task op of a no-op task and of a
// 200 ms task (tools/call creating a task, tasks/get at once and then every
// -poll until the task is terminal, then tasks/result on 2025-11-25; on
// 2026-07-28 the terminal tasks/get carries the result and ends the op);
// tasks/get of -get-pool completed tasks. Each runs with closed-loop
// workers, one MCP session each, for -d per server; the servers take turns
// within a scenario, the scenarios within a round, and the figures are
// medians over -rounds rounds.
//
// Usage:
//
//	go run ./bench/cmd/mcptask-peers [flags]
//	go run ./bench/cmd/mcptask-peers -h
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcptask/mcptask/bench/internal/loadgen"
)

func main() {
	if v := os.Getenv(childEnv); v != "" {
		os.Exit(serveChild(v))
	}
	loadgen.Main("mcptask-peers", run)
}

const usage = `mcptask-peers: mcptask side by side with mcp-go v1.2.1 and the plain go-sdk
v1.8.0, over loopback HTTP, in one run (see bench/README.md, "Peers").

Usage: mcptask-peers [flags]

`

// The targets: a server on a wire.
const (
	targetMcptask2025 = "mcptask-2025"
	targetMcptask2026 = "mcptask-2026"
	targetMcpgo       = "mcpgo"
	targetGosdk       = "gosdk"
)

// The kinds of scenario.
const (
	kindPlain     = "plain"
	kindNoopTask  = "noop-task"
	kindSleepTask = "sleep-task"
	kindGet       = "get"
)

// target is a server on one wire, with one session per worker.
type target struct {
	Key    string `json:"key"`
	Server string `json:"server"`
	Wire   string `json:"wire"`
	URL    string `json:"url"`
	tasks  bool

	hc   *http.Client
	tr   *http.Transport
	sess []*session
	pool [][]string // completed tasks per worker session, for tasks/get
}

// scenario is one row of the table.
type scenario struct {
	Key     string `json:"key"`
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Workers int    `json:"workers"`
}

// figures are the figures of one scenario on one target (one round, or the
// medians over the rounds). Latencies in nanoseconds: create, each
// tasks/get, tasks/result, and the whole op (a plain call: the call).
type figures struct {
	Ops         int64         `json:"ops"`
	Errors      int64         `json:"errors"`
	FirstError  string        `json:"firstError,omitempty"`
	OpsPerSec   float64       `json:"opsPerSec"`
	CreateP50   time.Duration `json:"createP50Ns,omitempty"`
	CreateP99   time.Duration `json:"createP99Ns,omitempty"`
	GetP50      time.Duration `json:"getP50Ns,omitempty"`
	GetP99      time.Duration `json:"getP99Ns,omitempty"`
	ResultP50   time.Duration `json:"resultP50Ns,omitempty"`
	ResultP99   time.Duration `json:"resultP99Ns,omitempty"`
	OpP50       time.Duration `json:"opP50Ns"`
	OpP99       time.Duration `json:"opP99Ns"`
	GetsPerTask float64       `json:"getsPerTask,omitempty"`
}

// result is a scenario on a target over all rounds.
type result struct {
	Scenario string    `json:"scenario"`
	Target   string    `json:"target"`
	Server   string    `json:"server"`
	Wire     string    `json:"wire"`
	Rounds   []figures `json:"rounds"`
	Median   figures   `json:"median"`
	// VsMcpgo is Median.OpsPerSec ÷ mcp-go's (0 without mcp-go).
	VsMcpgo float64 `json:"opsPerSecVsMcpgo,omitempty"`
}

type report struct {
	Environment map[string]any `json:"environment"`
	Scenarios   []scenario     `json:"scenarios"`
	Targets     []*target      `json:"targets"`
	Results     []*result      `json:"results"`
}

type config struct {
	d, poll, sleep              time.Duration
	rounds, getPool             int
	plainC, taskC, sleepC, getC []int
	targets                     []string
	jsonOut, child              bool
	peersDir, goBin             string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := loadgen.NewFlagSet("mcptask-peers", stderr, usage)
	var cfg config
	var plainC, taskC, sleepC, getC, targets string
	fs.DurationVar(&cfg.d, "d", 3*time.Second, "duration of each `run` (a scenario on a server, in a round)")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds; the figures are medians over them")
	fs.StringVar(&plainC, "plain-c", "1,16", "worker counts of the plain no-op tools/call")
	fs.StringVar(&taskC, "task-c", "1,16", "worker counts of the no-op task")
	fs.StringVar(&sleepC, "sleep-c", "64", "worker counts of the sleeping task")
	fs.StringVar(&getC, "get-c", "16", "worker counts of tasks/get over the completed tasks")
	fs.IntVar(&cfg.getPool, "get-pool", 1000, "completed tasks read by the tasks/get scenario")
	fs.DurationVar(&cfg.sleep, "sleep", 200*time.Millisecond, "how long a sleep_task task sleeps")
	fs.DurationVar(&cfg.poll, "poll", 50*time.Millisecond, "interval of the tasks/get polls after the first")
	fs.StringVar(&targets, "targets", strings.Join([]string{targetMcpgo, targetMcptask2025, targetMcptask2026, targetGosdk}, ","),
		"servers to measure, among "+targetMcpgo+", "+targetMcptask2025+", "+targetMcptask2026+", "+targetGosdk)
	fs.BoolVar(&cfg.jsonOut, "json", false, "print JSON instead of tables")
	fs.BoolVar(&cfg.child, "mcptask-child", false, "run the mcptask server as a child process (as the peers) rather than in process")
	fs.StringVar(&cfg.peersDir, "peers", "", "the directory bench/peers (default: found from the working directory)")
	fs.StringVar(&cfg.goBin, "go", "go", "the go command that builds the peers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	for _, f := range []struct {
		s   string
		dst *[]int
	}{{plainC, &cfg.plainC}, {taskC, &cfg.taskC}, {sleepC, &cfg.sleepC}, {getC, &cfg.getC}} {
		if *f.dst, err = parseCounts(f.s); err != nil {
			return err
		}
	}
	for t := range strings.SplitSeq(targets, ",") {
		t = strings.TrimSpace(t)
		switch t {
		case targetMcpgo, targetMcptask2025, targetMcptask2026, targetGosdk:
			if !slices.Contains(cfg.targets, t) {
				cfg.targets = append(cfg.targets, t)
			}
		case "":
		default:
			return fmt.Errorf("-targets: unknown %q", t)
		}
	}
	if len(cfg.targets) == 0 {
		return errors.New("-targets: none")
	}
	if cfg.d <= 0 || cfg.rounds <= 0 || cfg.poll <= 0 || cfg.sleep <= 0 {
		return errors.New("-d, -rounds, -poll and -sleep must be positive")
	}
	if len(cfg.getC) > 0 && cfg.getPool < slices.Max(cfg.getC) {
		return errors.New("-get-pool must be at least the largest -get-c")
	}
	rep, err := measureAll(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	if cfg.jsonOut {
		return loadgen.WriteJSON(stdout, rep)
	}
	printReport(stdout, rep)
	return nil
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("worker count %q: not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func workers(n int) string {
	if n == 1 {
		return "1 worker"
	}
	return strconv.Itoa(n) + " workers"
}

// scenarios lists the scenarios of cfg in the order of the table.
func scenarios(cfg config) []scenario {
	var out []scenario
	add := func(kind string, counts []int, name func(int) string) {
		for _, c := range counts {
			out = append(out, scenario{Key: kind + "-" + strconv.Itoa(c), Name: name(c), Kind: kind, Workers: c})
		}
	}
	add(kindPlain, cfg.plainC, func(c int) string { return "plain no-op tools/call, " + workers(c) })
	add(kindNoopTask, cfg.taskC, func(c int) string { return "no-op task, " + workers(c) })
	add(kindSleepTask, cfg.sleepC, func(c int) string {
		return fmt.Sprintf("%v task, %s", cfg.sleep, workers(c))
	})
	add(kindGet, cfg.getC, func(c int) string {
		return fmt.Sprintf("tasks/get over %s tasks, %s", thousands(float64(cfg.getPool)), workers(c))
	})
	return out
}

// applies reports whether the target runs the scenario.
func (t *target) applies(sc scenario) bool { return sc.Kind == kindPlain || t.tasks }

func measureAll(ctx context.Context, cfg config, stderr io.Writer) (*report, error) {
	tmp, err := os.MkdirTemp("", "mcptask-peers-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	scs := scenarios(cfg)

	// Servers.
	var targets []*target
	urls := map[string]string{}
	want := func(k string) bool { return slices.Contains(cfg.targets, k) }
	if want(targetMcpgo) || want(targetGosdk) {
		dir := cfg.peersDir
		if dir == "" {
			if dir, err = findPeers(); err != nil {
				return nil, err
			}
		}
		for _, p := range []struct{ key, mod string }{{targetMcpgo, "mcpgo"}, {targetGosdk, "gosdk"}} {
			if !want(p.key) {
				continue
			}
			bin := filepath.Join(tmp, p.mod)
			t0 := time.Now()
			if err := buildPeer(ctx, cfg.goBin, filepath.Join(dir, p.mod), bin); err != nil {
				return nil, err
			}
			fmt.Fprintf(stderr, "built %s in %v\n", p.mod, time.Since(t0).Round(time.Millisecond))
			var args []string
			if p.key == targetMcpgo {
				args = []string{"-sleep", cfg.sleep.String()}
			}
			proc, err := startPeer(bin, args...)
			if err != nil {
				return nil, err
			}
			defer proc.stop()
			urls[p.key] = proc.URL
		}
	}
	mcptaskWhere := "in process"
	if (want(targetMcptask2025) || want(targetMcptask2026)) && cfg.child {
		mcptaskWhere = "child process"
		proc, err := startChild(cfg.sleep)
		if err != nil {
			return nil, err
		}
		defer proc.stop()
		urls[targetMcptask2025], urls[targetMcptask2026] = proc.URL, proc.URL
	} else if want(targetMcptask2025) || want(targetMcptask2026) {
		srv, err := loadgen.StartServer(filepath.Join(tmp, "tasks.db"), &loadgen.ServerOptions{Sleep: cfg.sleep})
		if err != nil {
			return nil, err
		}
		defer srv.Close()
		urls[targetMcptask2025], urls[targetMcptask2026] = srv.URL, srv.URL
	}
	for _, k := range cfg.targets {
		t := &target{Key: k, URL: urls[k], Wire: wire2025, tasks: true}
		switch k {
		case targetMcpgo:
			t.Server = "mcp-go v1.2.1"
		case targetMcptask2025:
			t.Server = "mcptask"
		case targetMcptask2026:
			t.Server, t.Wire = "mcptask", wire2026
		case targetGosdk:
			t.Server, t.tasks = "go-sdk v1.8.0", false
		}
		targets = append(targets, t)
	}

	// Sessions, warm-up, the completed tasks of tasks/get.
	maxGet := 0
	if len(cfg.getC) > 0 {
		maxGet = slices.Max(cfg.getC)
	}
	for _, t := range targets {
		n := 1
		for _, sc := range scs {
			if t.applies(sc) {
				n = max(n, sc.Workers)
			}
		}
		t.hc, t.tr = newHTTPClient(n)
		defer t.tr.CloseIdleConnections()
		var tools []string
		if t.tasks {
			tools = []string{loadgen.TaskTool, loadgen.SleepTool}
		}
		t.sess = make([]*session, n)
		for i := range n {
			s, err := newSession(ctx, t.hc, t.URL, t.Wire, tools)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.Key, err)
			}
			t.sess[i] = s
			defer s.close(context.Background())
		}
		if err := warmUp(ctx, t, cfg); err != nil {
			return nil, fmt.Errorf("%s: warm-up: %w", t.Key, err)
		}
		if t.tasks && maxGet > 0 {
			if err := fillPool(ctx, t, maxGet, cfg.getPool); err != nil {
				return nil, fmt.Errorf("%s: creating the tasks of tasks/get: %w", t.Key, err)
			}
		}
	}

	// Rounds: in each, every scenario on every target in turn (the
	// targets' order rotates from round to round).
	res := map[[2]string]*result{}
	var results []*result
	for _, sc := range scs {
		for _, t := range targets {
			if t.applies(sc) {
				r := &result{Scenario: sc.Key, Target: t.Key, Server: t.Server, Wire: t.Wire}
				res[[2]string{sc.Key, t.Key}] = r
				results = append(results, r)
			}
		}
	}
	for round := range cfg.rounds {
		for _, sc := range scs {
			for i := range targets {
				t := targets[(i+round)%len(targets)]
				if !t.applies(sc) {
					continue
				}
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				runtime.GC()
				f := measure(ctx, t, sc, cfg)
				fmt.Fprintf(stderr, "round %d/%d  %-38s %-13s %9.1f ops/s  op p50 %s  errors %d\n",
					round+1, cfg.rounds, sc.Name, t.Key, f.OpsPerSec, loadgen.FormatDuration(f.OpP50), f.Errors)
				r := res[[2]string{sc.Key, t.Key}]
				r.Rounds = append(r.Rounds, f)
			}
		}
	}
	for _, r := range results {
		r.Median = medianOf(r.Rounds)
	}
	for _, r := range results {
		if m, ok := res[[2]string{r.Scenario, targetMcpgo}]; ok && m.Median.OpsPerSec > 0 {
			r.VsMcpgo = r.Median.OpsPerSec / m.Median.OpsPerSec
		}
	}
	host, _ := os.Hostname()
	return &report{
		Environment: map[string]any{
			"date":       time.Now().UTC().Format(time.RFC3339),
			"host":       host,
			"nproc":      runtime.NumCPU(),
			"gomaxprocs": runtime.GOMAXPROCS(0),
			"cpu":        loadgen.CPUModel(),
			"go":         runtime.Version(),
			"runNs":      cfg.d,
			"rounds":     cfg.rounds,
			"pollNs":     cfg.poll,
			"sleepNs":    cfg.sleep,
			"getPool":    cfg.getPool,
			"mcptask":    mcptaskWhere + ", SQLite synchronous=FULL",
			"peers":      "child processes",
		},
		Scenarios: scs,
		Targets:   targets,
		Results:   results,
	}, nil
}

// warmUp sends a few plain calls (and task ops) on each session, unmeasured.
func warmUp(ctx context.Context, t *target, cfg config) error {
	return forEach(t.sess, func(s *session) error {
		for range 20 {
			if err := s.plain(ctx); err != nil {
				return err
			}
		}
		if t.tasks {
			var r rec
			if err := taskOp(ctx, s, loadgen.TaskTool, cfg.poll, &r); err != nil {
				return err
			}
		}
		return nil
	})
}

// fillPool creates n no-op tasks spread over the first w sessions and waits
// until each has completed.
func fillPool(ctx context.Context, t *target, w, n int) error {
	t.pool = make([][]string, w)
	return forEach(t.sess[:w], func(s *session) error {
		i := slices.Index(t.sess, s)
		for j := i; j < n; j += w {
			id, err := s.create(ctx, loadgen.TaskTool)
			if err != nil {
				return err
			}
			for {
				st, err := s.get(ctx, id)
				if err != nil {
					return err
				}
				if st == "completed" {
					break
				}
				if terminal(st) {
					return fmt.Errorf("task %s ended %s", id, st)
				}
				time.Sleep(time.Millisecond)
			}
			t.pool[i] = append(t.pool[i], id)
		}
		return nil
	})
}

// forEach runs f on every session concurrently and returns the first error.
func forEach(ss []*session, f func(*session) error) error {
	errs := make([]error, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() { errs[i] = f(s) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rec holds one worker's latencies.
type rec struct {
	create, get, result, op []time.Duration
	gets                    int
	next                    int
}

// taskOp is one task op on s: create a task of tool, tasks/get at once
// and then every poll until the task is terminal (it must be completed),
// then, on 2025-11-25, tasks/result.
func taskOp(ctx context.Context, s *session, tool string, poll time.Duration, r *rec) error {
	t0 := time.Now()
	id, err := s.create(ctx, tool)
	if err != nil {
		return err
	}
	t1 := time.Now()
	gets := 0
	for {
		g0 := time.Now()
		st, err := s.get(ctx, id)
		if err != nil {
			return err
		}
		r.get = append(r.get, time.Since(g0))
		gets++
		if terminal(st) {
			if st != "completed" {
				return fmt.Errorf("task %s ended %s", id, st)
			}
			break
		}
		tm := time.NewTimer(time.Until(g0.Add(poll)))
		select {
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		case <-tm.C:
		}
	}
	if s.wire == wire2025 {
		r0 := time.Now()
		if err := s.result(ctx, id); err != nil {
			return err
		}
		r.result = append(r.result, time.Since(r0))
	}
	r.create = append(r.create, t1.Sub(t0))
	r.op = append(r.op, time.Since(t0))
	r.gets += gets
	return nil
}

// measure runs one scenario on one target for cfg.d.
func measure(ctx context.Context, t *target, sc scenario, cfg config) figures {
	recs := make([]rec, sc.Workers)
	var op loadgen.Op
	switch sc.Kind {
	case kindPlain:
		op = func(ctx context.Context, w int) error {
			t0 := time.Now()
			if err := t.sess[w].plain(ctx); err != nil {
				return err
			}
			recs[w].op = append(recs[w].op, time.Since(t0))
			return nil
		}
	case kindGet:
		op = func(ctx context.Context, w int) error {
			r := &recs[w]
			pool := t.pool[w]
			id := pool[r.next%len(pool)]
			r.next++
			t0 := time.Now()
			st, err := t.sess[w].get(ctx, id)
			if err != nil {
				return err
			}
			if st != "completed" {
				return fmt.Errorf("task %s is %s", id, st)
			}
			d := time.Since(t0)
			r.get = append(r.get, d)
			r.op = append(r.op, d)
			return nil
		}
	default:
		tool := loadgen.TaskTool
		if sc.Kind == kindSleepTask {
			tool = loadgen.SleepTool
		}
		op = func(ctx context.Context, w int) error {
			return taskOp(ctx, t.sess[w], tool, cfg.poll, &recs[w])
		}
	}
	st := loadgen.Run(ctx, loadgen.Load{Concurrency: sc.Workers, Duration: cfg.d}, op)
	f := figures{Ops: st.Ops, Errors: st.Errors, FirstError: st.FirstError, OpsPerSec: st.Throughput}
	var create, get, result, ops [][]time.Duration
	gets := 0
	for _, r := range recs {
		create, get, result, ops = append(create, r.create), append(get, r.get), append(result, r.result), append(ops, r.op)
		gets += r.gets
	}
	pct := func(l [][]time.Duration) (time.Duration, time.Duration) {
		s := loadgen.Merge(l...)
		return s.P50, s.P99
	}
	f.CreateP50, f.CreateP99 = pct(create)
	f.ResultP50, f.ResultP99 = pct(result)
	f.OpP50, f.OpP99 = pct(ops)
	f.GetP50, f.GetP99 = pct(get)
	if n := loadgen.Merge(create...).Ops; n > 0 {
		f.GetsPerTask = float64(gets) / float64(n)
	}
	return f
}

// medianOf returns the medians, figure by figure, of the rounds' figures
// (Ops and Errors are summed).
func medianOf(rs []figures) figures {
	var m figures
	if len(rs) == 0 {
		return m
	}
	for _, r := range rs {
		m.Ops += r.Ops
		m.Errors += r.Errors
		if m.FirstError == "" {
			m.FirstError = r.FirstError
		}
	}
	med := func(get func(figures) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = get(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	dur := func(get func(figures) time.Duration) time.Duration {
		return time.Duration(med(func(f figures) float64 { return float64(get(f)) }))
	}
	m.OpsPerSec = med(func(f figures) float64 { return f.OpsPerSec })
	m.GetsPerTask = med(func(f figures) float64 { return f.GetsPerTask })
	m.CreateP50 = dur(func(f figures) time.Duration { return f.CreateP50 })
	m.CreateP99 = dur(func(f figures) time.Duration { return f.CreateP99 })
	m.GetP50 = dur(func(f figures) time.Duration { return f.GetP50 })
	m.GetP99 = dur(func(f figures) time.Duration { return f.GetP99 })
	m.ResultP50 = dur(func(f figures) time.Duration { return f.ResultP50 })
	m.ResultP99 = dur(func(f figures) time.Duration { return f.ResultP99 })
	m.OpP50 = dur(func(f figures) time.Duration { return f.OpP50 })
	m.OpP99 = dur(func(f figures) time.Duration { return f.OpP99 })
	return m
}

// thousands formats x rounded to an integer with comma separators.
func thousands(x float64) string {
	s := strconv.FormatInt(int64(x+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func pair(a, b time.Duration) string {
	if a == 0 && b == 0 {
		return "-"
	}
	return loadgen.FormatDuration(a) + " / " + loadgen.FormatDuration(b)
}

func printReport(w io.Writer, rep *report) {
	env := rep.Environment
	fmt.Fprintf(w, "mcptask-peers  %s  %v CPUs (%v), GOMAXPROCS %v, %v\n", env["date"], env["nproc"], env["cpu"], env["gomaxprocs"], env["go"])
	fmt.Fprintf(w, "%v per run, %v round(s) (medians), polls every %v, sleep_task %v; mcptask: %v; peers: child processes\n\n",
		env["runNs"], env["rounds"], env["pollNs"], env["sleepNs"], env["mcptask"])
	byKey := map[[2]string]*result{}
	for _, r := range rep.Results {
		byKey[[2]string{r.Scenario, r.Target}] = r
	}
	for _, sc := range rep.Scenarios {
		fmt.Fprintf(w, "%s\n", sc.Name)
		fmt.Fprintf(w, "  %-22s %-11s %9s %8s  %-19s %-19s %-19s %-19s %9s %6s\n",
			"server", "wire", "ops/s", "÷mcp-go", "create p50 / p99", "get p50 / p99", "result p50 / p99", "op p50 / p99", "gets/task", "errors")
		for _, t := range rep.Targets {
			r, ok := byKey[[2]string{sc.Key, t.Key}]
			if !ok {
				continue
			}
			m := r.Median
			ratio := "-"
			if r.VsMcpgo > 0 {
				ratio = fmt.Sprintf("%.2f×", r.VsMcpgo)
			}
			gpt := "-"
			if m.GetsPerTask > 0 {
				gpt = fmt.Sprintf("%.2f", m.GetsPerTask)
			}
			fmt.Fprintf(w, "  %-22s %-11s %9s %8s  %-19s %-19s %-19s %-19s %9s %6d\n",
				r.Server, r.Wire, thousands(m.OpsPerSec), ratio, pair(m.CreateP50, m.CreateP99), pair(m.GetP50, m.GetP99),
				pair(m.ResultP50, m.ResultP99), pair(m.OpP50, m.OpP99), gpt, m.Errors)
			if m.FirstError != "" {
				fmt.Fprintf(w, "    first error: %s\n", m.FirstError)
			}
		}
		fmt.Fprintln(w)
	}
	// The summary, as a Markdown table.
	cols := slices.Clone(rep.Targets)
	slices.SortStableFunc(cols, func(a, b *target) int { return cmp.Compare(order(a.Key), order(b.Key)) })
	fmt.Fprint(w, "| scenario, ops/s (median; ÷ mcp-go) |")
	for _, t := range cols {
		fmt.Fprintf(w, " %s |", header(t))
	}
	fmt.Fprint(w, "\n|---|")
	for range cols {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	for _, sc := range rep.Scenarios {
		fmt.Fprintf(w, "| %s |", sc.Name)
		for _, t := range cols {
			r, ok := byKey[[2]string{sc.Key, t.Key}]
			switch {
			case !ok:
				fmt.Fprint(w, " — |")
			case r.VsMcpgo > 0 && t.Key != targetMcpgo:
				fmt.Fprintf(w, " %s (%.2f×) |", thousands(r.Median.OpsPerSec), r.VsMcpgo)
			default:
				fmt.Fprintf(w, " %s |", thousands(r.Median.OpsPerSec))
			}
		}
		fmt.Fprintln(w)
	}
}

func order(k string) int {
	return slices.Index([]string{targetMcpgo, targetMcptask2025, targetMcptask2026, targetGosdk}, k)
}

func header(t *target) string {
	switch t.Key {
	case targetMcpgo:
		return "mcp-go v1.2.1 (in memory), 2025-11-25"
	case targetMcptask2025:
		return "mcptask (SQLite, FULL), 2025-11-25"
	case targetMcptask2026:
		return "mcptask (SQLite, FULL), 2026-07-28"
	case targetGosdk:
		return "go-sdk v1.8.0 (no tasks), 2025-11-25"
	}
	return t.Key
}
