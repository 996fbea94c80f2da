// Command mcptask-load measures an mcptask server under load, over
// loopback HTTP on the 2026-07-28 wire.
//
// By default it starts an in-process server (the no-op tools "noop",
// without task support, and "noop_task", with optional task support, on a
// SQLite file in a temporary directory); with -url it targets a running
// server such as mcptaskd instead, on a loopback address only.
//
// The default mode measures, in one run and interleaved over -rounds
// rounds, with -c concurrent clients: a plain no-op tools/call, tasks/get
// of a completed task, and task creation (tools/call answered with a task
// handle once the task is committed). It prints throughput, p50, p90 and
// p99 of each, and the ratios tasks/get ÷ plain and create ÷ plain.
//
// The -memory mode creates -tasks tasks that complete and measures the Go
// heap of the process (the in-process server's) after a full GC at each of
// -points retained completed tasks, then prints the ratio of the last
// point's heap to the first's: with the tasks' state in SQLite, the heap
// should not grow with the number of retained tasks.
//
// -limits turns on, in the in-process server, the per-requester limits
// (mcptask.DefaultLimits with rates so high that nothing is refused) and
// the audit trail (JSON records written nowhere): compare the ratios to the
// plain call, which neither touches, of a run with and one without it.
//
// The -flood N mode measures whether a requester flooding the server
// slows down the others: against the in-process server with the
// per-requester limits on (mcptask.DefaultLimits; -request-rate,
// -request-burst), N goroutines of one requester ("flooder") send tasks/get
// as fast as they are answered (most get refused), while -c clients of
// another requester ("victim") send tasks/get paced under the request rate
// (-victim-rate). It prints the victim's latency and throughput without and
// with the flood, measured in one run over -rounds rounds, their ratios,
// and the requests of each requester served and refused.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/bench/internal/loadgen"
	"github.com/mcptask/mcptask/store/sqlite"
)

func main() { loadgen.Main("mcptask-load", run) }

// config is the command line.
type config struct {
	url         string
	db          string
	sqliteSync  string
	limits      bool
	conc        int
	dur         time.Duration
	count       int64
	rounds      int
	warmup      int64
	getPool     int
	plainTool   string
	plainArgs   string
	taskTool    string
	taskArgs    string
	memory      bool
	tasks       int64
	points      []int64
	jsonOut     bool
	verbose     bool
	cpuProfile  string
	heapProfile string

	flood        int
	requestRate  float64
	requestBurst int
	victimRate   float64
	getPoolSet   bool
}

// mcptaskd's tools, used with -url when no tool is named: echo has no task
// support; lint_report of one clean line, without delay, completes at once.
const (
	daemonPlainTool = "echo"
	daemonPlainArgs = `{"text":"x"}`
	daemonTaskTool  = "lint_report"
	daemonTaskArgs  = `{"source":"ok\n","line_delay_ms":0}`
)

// usage is the text of -h, before the flags.
const usage = `Usage: mcptask-load [flags]

Measures an mcptask server over loopback HTTP (2026-07-28 wire), in one run:
a plain no-op tools/call, tasks/get of a completed task and task creation,
with throughput, p50/p90/p99 and the ratios tasks/get ÷ plain and
create ÷ plain. With -memory, measures the Go heap of the in-process server
as completed tasks accumulate.

Examples:
  mcptask-load                       # in-process server, 8 clients, 6s per op
  mcptask-load -c 32 -d 30s -rounds 5
  mcptask-load -limits               # limits and audit trail on (nothing refused)
  mcptask-load -url http://127.0.0.1:8080/mcp   # a running mcptaskd
  mcptask-load -memory               # heap at 1k..100k retained tasks
  mcptask-load -cpuprofile cpu.out   # then: go tool pprof -top cpu.out
  mcptask-load -flood 64             # a flooding requester vs a paced one, limits on

Flags:
`

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := loadgen.NewFlagSet("mcptask-load", stderr, usage)
	fs.StringVar(&c.url, "url", "", "MCP endpoint of a running server, e.g. http://127.0.0.1:8080/mcp (loopback hosts only); empty starts an in-process server")
	fs.StringVar(&c.db, "db", "", "SQLite `file` of the in-process server; empty means a file in a temporary directory, removed at the end")
	fs.IntVar(&c.conc, "c", 8, "number of concurrent clients (each sends its next request when answered)")
	fs.DurationVar(&c.dur, "d", 6*time.Second, "measured time per operation, split over the rounds")
	fs.Int64Var(&c.count, "n", 0, "measured operations per operation kind, split over the rounds; overrides -d when > 0")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds of plain, tasks/get, create in turn (interleaving spreads machine drift over all three)")
	fs.Int64Var(&c.warmup, "warmup", 0, "unmeasured operations of each kind before the first round; 0 means 50 per client")
	fs.IntVar(&c.getPool, "get-pool", 64, "number of completed tasks that tasks/get cycles through")
	fs.StringVar(&c.plainTool, "plain-tool", "", "tool without task support for the plain call (default: noop in-process, "+daemonPlainTool+" with -url)")
	fs.StringVar(&c.plainArgs, "plain-args", "", "JSON arguments of the plain tool (default: {} in-process, "+daemonPlainArgs+" with -url)")
	fs.StringVar(&c.taskTool, "task-tool", "", "tool with task support whose tasks complete at once (default: noop_task in-process, "+daemonTaskTool+" with -url)")
	fs.StringVar(&c.taskArgs, "task-args", "", "JSON arguments of the task tool (default: {} in-process, "+strconv.Quote(daemonTaskArgs)+" with -url)")
	fs.StringVar(&c.sqliteSync, "sqlite-sync", "full", "in-process server: SQLite synchronous setting, full or normal")
	fs.BoolVar(&c.limits, "limits", false, "in-process server: turn on the per-requester limits (DefaultLimits with rates and bursts of 1e9, so nothing is refused) and the audit trail (JSON records to io.Discard), to measure their bookkeeping")
	fs.BoolVar(&c.memory, "memory", false, "memory mode: create -tasks completed tasks and measure the heap at -points (in-process server only)")
	fs.Int64Var(&c.tasks, "tasks", 100_000, "memory mode: number of tasks to create")
	points := fs.String("points", "1000,10000,50000,100000", "memory mode: comma-separated numbers of retained tasks at which to measure the heap (those above -tasks are dropped; -tasks is always measured)")
	fs.IntVar(&c.flood, "flood", 0, "flood mode: `N` goroutines of one requester flood tasks/get while the -c clients of another, paced at -victim-rate, are measured without and with the flood (in-process server, limits on); 0 is off")
	fs.Float64Var(&c.requestRate, "request-rate", mcptask.DefaultLimits.RequestRate, "flood mode: tasks/* requests per second per requester (mcptask.Limits.RequestRate; the other limits are DefaultLimits')")
	fs.IntVar(&c.requestBurst, "request-burst", mcptask.DefaultLimits.RequestBurst, "flood mode: burst of tasks/* requests per requester (mcptask.Limits.RequestBurst)")
	fs.Float64Var(&c.victimRate, "victim-rate", 0, "flood mode: the victim's tasks/get per second, all its clients together; 0 means 0.8 × -request-rate")
	fs.BoolVar(&c.jsonOut, "json", false, "print the figures as JSON instead of a table")
	fs.BoolVar(&c.verbose, "v", false, "print each phase's figures to stderr as it ends")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (client and in-process server) to `file`")
	fs.StringVar(&c.heapProfile, "memprofile", "", "write a heap profile at the end of the run to `file`")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) { c.getPoolSet = c.getPoolSet || f.Name == "get-pool" })
	if c.flood < 0 {
		return c, errors.New("-flood must be >= 0")
	}
	if c.flood > 0 {
		switch {
		case c.url != "":
			return c, errors.New("-flood configures the in-process server's limits and requesters: it cannot be used with -url")
		case c.memory:
			return c, errors.New("-flood and -memory are two modes: choose one")
		case c.limits:
			return c, errors.New("-flood turns limits on by itself (DefaultLimits, -request-rate, -request-burst): drop -limits")
		case c.requestRate <= 0 || c.requestBurst < 1:
			return c, errors.New("-flood needs -request-rate > 0 and -request-burst >= 1")
		case c.victimRate < 0:
			return c, errors.New("-victim-rate must be >= 0")
		case c.getPoolSet && c.getPool > mcptask.DefaultLimits.CreateBurst:
			return c, fmt.Errorf("-flood: -get-pool must be at most %d, the creation burst of a requester", mcptask.DefaultLimits.CreateBurst)
		}
		if c.victimRate == 0 {
			c.victimRate = 0.8 * c.requestRate
		}
		if !c.getPoolSet {
			c.getPool = 16
		}
	}
	if c.conc < 1 || c.rounds < 1 || c.getPool < 1 || c.tasks < 1 || c.dur <= 0 && c.count <= 0 {
		return c, errors.New("-c, -rounds, -get-pool, -tasks must be >= 1 and one of -d, -n positive")
	}
	if c.url != "" {
		if err := loadgen.CheckLoopback(c.url); err != nil {
			return c, fmt.Errorf("refusing -url: %w", err)
		}
		if c.memory {
			return c, errors.New("-memory measures the heap of the in-process server: it cannot be used with -url")
		}
		if c.db != "" {
			return c, errors.New("-db is the in-process server's file: it cannot be used with -url")
		}
		if c.limits {
			return c, errors.New("-limits configures the in-process server: it cannot be used with -url (see mcptaskd's -max-active-tasks, -create-rate, -request-rate, -audit-log)")
		}
		if c.plainTool == "" {
			c.plainTool, c.plainArgs = daemonPlainTool, orDefault(c.plainArgs, daemonPlainArgs)
		}
		if c.taskTool == "" {
			c.taskTool, c.taskArgs = daemonTaskTool, orDefault(c.taskArgs, daemonTaskArgs)
		}
	}
	for _, f := range strings.Split(*points, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := strconv.ParseInt(f, 10, 64)
		if err != nil || p < 1 {
			return c, fmt.Errorf("-points: %q is not a positive number", f)
		}
		if p <= c.tasks {
			c.points = append(c.points, p)
		}
	}
	c.points = append(c.points, c.tasks)
	slices.Sort(c.points)
	c.points = slices.Compact(c.points)
	return c, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// run is the whole command, for main and the tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if cfg.heapProfile != "" {
		defer func() {
			f, ferr := os.Create(cfg.heapProfile)
			if ferr == nil {
				runtime.GC()
				ferr = errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
			}
			err = errors.Join(err, ferr)
		}()
	}

	target := cfg.url
	var srv *loadgen.Server
	if target == "" {
		db := cfg.db
		if db == "" {
			dir, err := os.MkdirTemp("", "mcptask-load-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			db = filepath.Join(dir, "tasks.db")
		}
		so := &loadgen.ServerOptions{SQLite: &sqlite.Options{Synchronous: sqlite.Sync(cfg.sqliteSync)}}
		if cfg.limits {
			so.Limits, so.Audit = loadgen.UnrefusedLimits(), true
		}
		if cfg.flood > 0 {
			so.Limits, so.Audit = floodLimits(cfg), true
			so.RequesterHeader = loadgen.RequesterHeader
		}
		srv, err = loadgen.StartServer(db, so)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, srv.Close()) }()
		target = srv.URL
	}
	co := loadgen.ClientOptions{
		Conns:     cfg.conc,
		PlainTool: cfg.plainTool,
		PlainArgs: json.RawMessage(cfg.plainArgs),
		TaskTool:  cfg.taskTool,
		TaskArgs:  json.RawMessage(cfg.taskArgs),
	}
	if cfg.flood > 0 {
		co.Requester = victimRequester
	}
	client, err := loadgen.NewClient(target, co)
	if err != nil {
		return err
	}
	defer client.Close()

	env := environment{
		Server:     "in-process",
		URL:        target,
		Clients:    cfg.conc,
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		NumCPU:     runtime.NumCPU(),
		GoVersion:  runtime.Version(),
	}
	if srv != nil {
		env.DB = srv.Store.Path()
		env.Limits = cfg.limits
	} else {
		env.Server = "remote (loopback)"
	}

	if cfg.flood > 0 {
		return runFlood(ctx, cfg, env, srv, client, stdout, stderr)
	}
	if cfg.memory {
		return runMemory(ctx, cfg, env, srv, client, stdout, stderr)
	}
	return runCompare(ctx, cfg, env, srv, client, stdout, stderr)
}

type environment struct {
	Server     string `json:"server"`
	URL        string `json:"url"`
	DB         string `json:"db,omitempty"`
	Limits     bool   `json:"limits,omitempty"` // limits and audit trail on (-limits, -flood)
	Clients    int    `json:"clients"`
	Rounds     int    `json:"rounds,omitempty"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	NumCPU     int    `json:"numCPU"`
	GoVersion  string `json:"goVersion"`
}

func runCompare(ctx context.Context, cfg config, env environment, srv *loadgen.Server, c *loadgen.Client, stdout, stderr io.Writer) error {
	cc := loadgen.CompareConfig{
		Load:    loadgen.Load{Concurrency: cfg.conc, Duration: cfg.dur, Count: cfg.count},
		Rounds:  cfg.rounds,
		Warmup:  cfg.warmup,
		GetPool: cfg.getPool,
	}
	if cfg.count > 0 {
		cc.Load.Duration = 0
	}
	if srv != nil {
		cc.Idle = srv.WaitIdle
	}
	if cfg.verbose {
		cc.Progress = func(r int, op string, s loadgen.Stats) {
			fmt.Fprintf(stderr, "round %d %-9s %7d ops %9.0f ops/s p50 %-9v p99 %v\n", r+1, op, s.Ops, s.Throughput, s.P50, s.P99)
		}
	}
	cmp, err := loadgen.Compare(ctx, c, cc)
	if err != nil {
		return err
	}
	env.Rounds = cfg.rounds
	if cfg.jsonOut {
		return loadgen.WriteJSON(stdout, struct {
			Env environment `json:"environment"`
			*loadgen.Comparison
			Targets map[string]float64 `json:"targets"`
		}{env, cmp, map[string]float64{"getMaxRatio": loadgen.TargetGet, "createMaxRatio": loadgen.TargetCreate}})
	}
	fmt.Fprintf(stdout, "mcptask-load: %s server %s, %d clients, %d rounds, GOMAXPROCS=%d, %s\n",
		env.Server, env.URL, env.Clients, env.Rounds, env.GOMAXPROCS, env.GoVersion)
	if env.DB != "" {
		fmt.Fprintf(stdout, "SQLite file: %s\n", env.DB)
	}
	if env.Limits {
		fmt.Fprintln(stdout, "limits and audit trail on (-limits: nothing refused)")
	}
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tops\tops/s\tmean\tp50\tp90\tp99\tmax\t")
	for _, r := range []struct {
		name string
		s    loadgen.Stats
	}{{loadgen.OpPlain, cmp.Plain}, {loadgen.OpGet, cmp.Get}, {loadgen.OpCreate, cmp.Create}} {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n", r.name, r.s.Ops, r.s.Throughput,
			loadgen.FormatDuration(r.s.Mean), loadgen.FormatDuration(r.s.P50), loadgen.FormatDuration(r.s.P90),
			loadgen.FormatDuration(r.s.P99), loadgen.FormatDuration(r.s.Max))
	}
	tw.Flush()
	fmt.Fprintln(stdout)
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "÷ plain\tp50\tp99\tops/s\ttarget\tverdict\t")
	rr := cmp.Ratios
	fmt.Fprintf(tw, "%s\t%.2f×\t%.2f×\t%.2f×\t%s\t%s\t\n", loadgen.OpGet, rr.GetP50, rr.GetP99, rr.GetThroughput,
		fmt.Sprintf("≤%.1f×", loadgen.TargetGet), verdict(rr.GetP50, rr.GetThroughput, loadgen.TargetGet))
	fmt.Fprintf(tw, "%s\t%.2f×\t%.2f×\t%.2f×\t%s\t%s\t\n", loadgen.OpCreate, rr.CreateP50, rr.CreateP99, rr.CreateThroughput,
		fmt.Sprintf("≤%.1f×", loadgen.TargetCreate), verdict(rr.CreateP50, rr.CreateThroughput, loadgen.TargetCreate))
	tw.Flush()
	fmt.Fprintln(stdout, "\n(latency ratios: lower is better; ops/s ratio: higher is better; the target holds when p50 ÷ plain ≤ target and plain ÷ ops/s ≤ target)")
	return nil
}

// verdict tells whether an operation is within target× of the plain call,
// in p50 latency and in throughput.
func verdict(p50Ratio, throughputRatio, target float64) string {
	if p50Ratio <= target && throughputRatio > 0 && 1/throughputRatio <= target {
		return "ok"
	}
	return "MISSED"
}

func runMemory(ctx context.Context, cfg config, env environment, srv *loadgen.Server, c *loadgen.Client, stdout, stderr io.Writer) error {
	mc := loadgen.MemoryConfig{Points: cfg.points, Concurrency: cfg.conc}
	if cfg.verbose {
		mc.Progress = func(p loadgen.MemPoint) {
			fmt.Fprintf(stderr, "%d tasks: heap in use %s, rss %s, db %s, after %v\n",
				p.Tasks, mib(p.HeapInuse), mib(p.RSS), mib(uint64(p.DBBytes)), p.Elapsed.Round(time.Millisecond))
		}
	}
	pts, err := loadgen.Memory(ctx, srv, c, mc)
	if err != nil {
		return err
	}
	first, last := pts[0], pts[len(pts)-1]
	heapRatio := float64(last.HeapInuse) / float64(first.HeapInuse)
	allocRatio := float64(last.HeapAlloc) / float64(first.HeapAlloc)
	perTask := 0.0
	if last.Tasks > first.Tasks {
		perTask = (float64(last.HeapAlloc) - float64(first.HeapAlloc)) / float64(last.Tasks-first.Tasks)
	}
	if cfg.jsonOut {
		return loadgen.WriteJSON(stdout, struct {
			Env             environment        `json:"environment"`
			Points          []loadgen.MemPoint `json:"points"`
			HeapInuseRatio  float64            `json:"heapInuseRatio"`
			HeapAllocRatio  float64            `json:"heapAllocRatio"`
			HeapBytesPerTsk float64            `json:"heapAllocBytesPerTask"`
		}{env, pts, heapRatio, allocRatio, perTask})
	}
	fmt.Fprintf(stdout, "mcptask-load -memory: in-process server, %d creating clients, GOMAXPROCS=%d, %s\nSQLite file: %s\n",
		env.Clients, env.GOMAXPROCS, env.GoVersion, env.DB)
	if env.Limits {
		fmt.Fprintln(stdout, "limits and audit trail on (-limits: nothing refused)")
	}
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "retained tasks\theap in use\theap alloc\theap objects\tRSS\tSQLite+WAL\telapsed\t")
	for _, p := range pts {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%v\t\n", p.Tasks, mib(p.HeapInuse), mib(p.HeapAlloc), p.HeapObjects,
			mib(p.RSS), mib(uint64(p.DBBytes)), p.Elapsed.Round(time.Millisecond))
	}
	tw.Flush()
	fmt.Fprintf(stdout, "\nheap in use @%d ÷ @%d = %.2f×   (heap alloc: %.2f×, %+.1f B per retained task)\n",
		last.Tasks, first.Tasks, heapRatio, allocRatio, perTask)
	fmt.Fprintln(stdout, "(flat ≈ 1.0×: the tasks' state lives in SQLite, not in the Go heap; RSS includes SQLite's bounded page caches)")
	return nil
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// The requesters of the flood mode.
const (
	victimRequester  = "victim"
	flooderRequester = "flooder"
)

// floodLimits are the limits of the flood mode: DefaultLimits with the
// request rate and burst of the command line.
func floodLimits(cfg config) mcptask.Limits {
	l := mcptask.DefaultLimits
	l.RequestRate, l.RequestBurst = cfg.requestRate, cfg.requestBurst
	return l
}

func runFlood(ctx context.Context, cfg config, env environment, srv *loadgen.Server, victim *loadgen.Client, stdout, stderr io.Writer) error {
	flooder, err := loadgen.NewClient(srv.URL, loadgen.ClientOptions{Conns: cfg.flood, Requester: flooderRequester})
	if err != nil {
		return err
	}
	defer flooder.Close()
	fc := loadgen.FloodConfig{
		Victim:   victim,
		Flooder:  flooder,
		Flooders: cfg.flood,
		Load:     loadgen.Load{Concurrency: cfg.conc, Duration: cfg.dur, Count: cfg.count, Rate: cfg.victimRate},
		Rounds:   cfg.rounds,
		GetPool:  cfg.getPool,
		Warmup:   cfg.warmup,
		Idle:     srv.WaitIdle,
	}
	if cfg.count > 0 {
		fc.Load.Duration = 0
	}
	if cfg.verbose {
		fc.Progress = func(r int, phase string, s loadgen.Stats) {
			fmt.Fprintf(stderr, "round %d %-8s %6d ops %7.1f ops/s p50 %-9v p99 %v refused %d\n", r+1, phase, s.Ops, s.Throughput, s.P50, s.P99, s.Errors)
		}
	}
	res, err := loadgen.Flood(ctx, fc)
	if err != nil {
		return err
	}
	env.Rounds = cfg.rounds
	env.Limits = true
	lim := floodLimits(cfg)
	if cfg.jsonOut {
		return loadgen.WriteJSON(stdout, struct {
			Env        environment `json:"environment"`
			Flooders   int         `json:"flooders"`
			VictimRate float64     `json:"victimRate"`
			Limits     struct {
				RequestRate  float64 `json:"requestRate"`
				RequestBurst int     `json:"requestBurst"`
			} `json:"limits"`
			*loadgen.FloodResult
		}{env, cfg.flood, cfg.victimRate, struct {
			RequestRate  float64 `json:"requestRate"`
			RequestBurst int     `json:"requestBurst"`
		}{lim.RequestRate, lim.RequestBurst}, res})
	}
	fmt.Fprintf(stdout, "mcptask-load -flood %d: in-process server %s, %d rounds, GOMAXPROCS=%d, %s\n",
		cfg.flood, env.URL, env.Rounds, env.GOMAXPROCS, env.GoVersion)
	fmt.Fprintf(stdout, "limits on: tasks/* %g/s per requester (bursts of %d), audit trail on; victim: %d clients paced at %g tasks/get per second in all\n\n",
		lim.RequestRate, lim.RequestBurst, cfg.conc, cfg.victimRate)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "victim tasks/get\tops\tops/s\tmean\tp50\tp90\tp99\tmax\trefused\t")
	for _, r := range []struct {
		name string
		s    loadgen.Stats
	}{{"without flood", res.Quiet}, {"with flood", res.Flooded}} {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%d\t\n", r.name, r.s.Ops, r.s.Throughput,
			loadgen.FormatDuration(r.s.Mean), loadgen.FormatDuration(r.s.P50), loadgen.FormatDuration(r.s.P90),
			loadgen.FormatDuration(r.s.P99), loadgen.FormatDuration(r.s.Max), r.s.Errors)
	}
	tw.Flush()
	rr := res.Ratios
	fmt.Fprintf(stdout, "\nvictim with ÷ without flood: p50 %.2f×  p99 %.2f×  ops/s %.2f×   (victim refused: %d)\n",
		rr.P50, rr.P99, rr.Throughput, res.VictimRefused)
	total := res.FlooderServed + res.FlooderRefused
	pct, perSec := 0.0, 0.0
	if total > 0 {
		pct = 100 * float64(res.FlooderRefused) / float64(total)
	}
	if res.FlooderTime > 0 {
		perSec = float64(total) / res.FlooderTime.Seconds()
	}
	fmt.Fprintf(stdout, "flooder (%d goroutines, %v in all): %d tasks/get, %.0f/s: served %d, refused %d (%.1f%%)\n",
		cfg.flood, res.FlooderTime.Round(time.Millisecond), total, perSec, res.FlooderServed, res.FlooderRefused, pct)
	fmt.Fprintln(stdout, "(latency ratios: lower is better, 1 is parity; the victim is paced, so its ops/s ratio is 1 while it keeps its pace)")
	return nil
}
