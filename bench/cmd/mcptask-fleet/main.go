// Command mcptask-fleet measures mcptask running as several instances on
// one PostgreSQL database, over loopback HTTP on the 2026-07-28 wire. It
// has three modes (all by default; name some as arguments to run only
// those):
//
//   - create: task creation throughput and latency with -c concurrent
//     closed-loop clients against mcptaskd on a SQLite file, on
//     PostgreSQL, and on -pg-instances instances sharing a PostgreSQL
//     schema (requests spread over them in turn), interleaved over
//     -rounds rounds; ratios to SQLite.
//   - cancel: how long a tasks/cancel (or a tasks/update answering an
//     input request) sent to instance B takes to reach the work running on
//     instance A: two in-process instances on one schema, whose tools
//     record when their context is done (or their answer arrives); with
//     the LISTEN/NOTIFY change feed, and without it (polling: heartbeats
//     every lease/3 for cancellation, the 2 s input poll for answers).
//   - takeover: an mcptaskd instance with tasks running is killed with
//     SIGKILL, -kills times per lease in -lease; the time until a
//     surviving instance has resolved all of its tasks (failed "outcome
//     unknown", or re-run) is read from the survivor's log.
//
// The create and takeover modes run mcptaskd binaries (built from this
// module unless -mcptaskd names one). Every mode uses a fresh schema of
// its own and drops it at the end. Servers listen on loopback only.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcptask/mcptask/bench/internal/loadgen"
)

func main() { loadgen.Main("mcptask-fleet", run) }

// config is the command line.
type config struct {
	dsn             string
	bin             string
	modes           []string
	conc            []int
	dur             time.Duration
	rounds          int
	taskTool        string
	taskArgs        string
	sqliteSync      string
	pgInstances     int
	cancels         int
	fallbackSamples int
	cancelLease     time.Duration
	kills           int
	leases          []time.Duration
	jsonOut         bool
	verbose         bool
}

var allModes = []string{"create", "cancel", "takeover"}

// usage is the text of -h, before the flags.
const usage = `Usage: mcptask-fleet [flags] [create] [cancel] [takeover]

Measures mcptask as several instances on one PostgreSQL database (loopback
HTTP, 2026-07-28 wire): task creation on SQLite vs PostgreSQL, the latency
of a cancel or an answer sent to another instance than the one running the
work (with LISTEN/NOTIFY and with polling only), and the takeover time after
an instance is killed with SIGKILL. With no mode named, runs all three.

Examples:
  mcptask-fleet -postgres postgres://postgres@127.0.0.1:5432/test?sslmode=disable
  mcptask-fleet create -c 1,8,32 -d 30s
  mcptask-fleet cancel -cancels 200 -fallback 0
  mcptask-fleet takeover -lease 1s,2s,5s -kills 10

Flags:
`

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := loadgen.NewFlagSet("mcptask-fleet", stderr, usage)
	fs.StringVar(&c.dsn, "postgres", getenv("MCPTASK_TEST_POSTGRES_DSN"), "PostgreSQL `DSN` (default $MCPTASK_TEST_POSTGRES_DSN); each mode creates a schema of its own there and drops it at the end")
	fs.StringVar(&c.bin, "mcptaskd", "", "mcptaskd `binary` for the create and takeover modes; empty builds ./cmd/mcptaskd of this module")
	conc := fs.String("c", "1,16", "create: comma-separated numbers of concurrent clients")
	fs.DurationVar(&c.dur, "d", 6*time.Second, "create: measured time per backend and concurrency, split over the rounds")
	fs.IntVar(&c.rounds, "rounds", 3, "create: rounds of the backends in turn (interleaving spreads machine drift over all)")
	fs.StringVar(&c.taskTool, "task-tool", "lint_report", "create: mcptaskd tool whose tasks are created")
	fs.StringVar(&c.taskArgs, "task-args", `{"source":"ok\n","line_delay_ms":0}`, "create: JSON arguments of -task-tool")
	fs.StringVar(&c.sqliteSync, "sqlite-sync", "full", "create: -sqlite-sync of the SQLite mcptaskd (full or normal)")
	fs.IntVar(&c.pgInstances, "pg-instances", 2, "create: also measure this many mcptaskd instances on one PostgreSQL schema (requests spread over them in turn); < 2 skips it")
	fs.IntVar(&c.cancels, "cancels", 50, "cancel: samples of each kind with the change feed")
	fs.IntVar(&c.fallbackSamples, "fallback", 20, "cancel: samples of each kind without the change feed (polling); 0 skips them")
	fs.DurationVar(&c.cancelLease, "cancel-lease", 3*time.Second, "cancel: the instances' lease (heartbeats, hence the polling fallback of cancellation, every lease/3)")
	fs.IntVar(&c.kills, "kills", 5, "takeover: SIGKILLs per lease")
	leases := fs.String("lease", "2s", "takeover: comma-separated leases to measure")
	fs.BoolVar(&c.jsonOut, "json", false, "print the figures as JSON")
	fs.BoolVar(&c.verbose, "v", false, "print each measurement to stderr as it ends")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	for _, m := range fs.Args() {
		if !slices.Contains(allModes, m) {
			return c, fmt.Errorf("unknown mode %q: use create, cancel or takeover", m)
		}
		if !slices.Contains(c.modes, m) {
			c.modes = append(c.modes, m)
		}
	}
	if len(c.modes) == 0 {
		c.modes = allModes
	}
	if c.dsn == "" {
		return c, errNoDSN
	}
	for _, f := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return c, fmt.Errorf("-c: %q is not a positive number", f)
		}
		c.conc = append(c.conc, n)
	}
	for _, f := range strings.Split(*leases, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return c, fmt.Errorf("-lease: %q is not a positive duration", f)
		}
		c.leases = append(c.leases, d)
	}
	switch {
	case c.dur <= 0 || c.rounds < 1:
		return c, errors.New("-d and -rounds must be positive")
	case c.cancels < 1 || c.fallbackSamples < 0 || c.kills < 1:
		return c, errors.New("-cancels and -kills must be positive, -fallback not negative")
	case c.cancelLease <= 0:
		return c, errors.New("-cancel-lease must be positive")
	case !json.Valid([]byte(c.taskArgs)):
		return c, fmt.Errorf("-task-args %q is not JSON", c.taskArgs)
	}
	return c, nil
}

// results is everything measured, for -json.
type results struct {
	Env      environment       `json:"environment"`
	Create   []createResult    `json:"create,omitempty"`
	Cancel   []latencyResult   `json:"cancel,omitempty"`
	Takeover []takeoverSummary `json:"takeover,omitempty"`
}

type environment struct {
	GOMAXPROCS int    `json:"gomaxprocs"`
	NumCPU     int    `json:"numCPU"`
	GoVersion  string `json:"goVersion"`
	TaskTool   string `json:"taskTool"`
}

// run is the whole command, for main and the tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, os.Getenv, stderr)
	if err != nil {
		return err
	}
	dir, cleanup, err := tempDir()
	if err != nil {
		return err
	}
	defer cleanup()
	bin := cfg.bin
	if bin == "" && (slices.Contains(cfg.modes, "create") || slices.Contains(cfg.modes, "takeover")) {
		if bin, err = buildDaemon(ctx, dir, stderr); err != nil {
			return err
		}
	}
	res := results{Env: environment{GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), TaskTool: cfg.taskTool}}
	if !cfg.jsonOut {
		fmt.Fprintf(stdout, "mcptask-fleet: GOMAXPROCS=%d, %d CPUs, %s\n", res.Env.GOMAXPROCS, res.Env.NumCPU, res.Env.GoVersion)
	}
	for _, m := range cfg.modes {
		switch m {
		case "create":
			if res.Create, err = runCreate(ctx, cfg, bin, dir, stderr); err != nil {
				return fmt.Errorf("create: %w", err)
			}
			if !cfg.jsonOut {
				printCreate(stdout, cfg, res.Create)
			}
		case "cancel":
			if res.Cancel, err = runCancel(ctx, cfg, stderr); err != nil {
				return fmt.Errorf("cancel: %w", err)
			}
			if !cfg.jsonOut {
				printCancel(stdout, cfg, res.Cancel)
			}
		case "takeover":
			if res.Takeover, err = runTakeover(ctx, cfg, bin, stderr); err != nil {
				return fmt.Errorf("takeover: %w", err)
			}
			if !cfg.jsonOut {
				printTakeover(stdout, res.Takeover)
			}
		}
	}
	if cfg.jsonOut {
		return loadgen.WriteJSON(stdout, res)
	}
	return nil
}

func printCreate(w io.Writer, cfg config, rs []createResult) {
	fmt.Fprintf(w, "\ntask creation (%s %s), mcptaskd over loopback HTTP, %v per backend and concurrency in %d rounds:\n\n",
		cfg.taskTool, cfg.taskArgs, cfg.dur, cfg.rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tclients\tops\tops/s\tp50\tp90\tp99\tmax\tops/s ÷ sqlite\tp50 ÷ sqlite\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t%.2f×\t%.2f×\t\n", r.Backend, r.Concurrency, r.Stats.Ops, r.Stats.Throughput,
			loadgen.FormatDuration(r.Stats.P50), loadgen.FormatDuration(r.Stats.P90), loadgen.FormatDuration(r.Stats.P99), loadgen.FormatDuration(r.Stats.Max),
			r.ThroughputVsSQLite, r.P50VsSQLite)
	}
	tw.Flush()
}

func printCancel(w io.Writer, cfg config, rs []latencyResult) {
	fmt.Fprintf(w, "\ndelivery to the work, two in-process instances A and B on one schema (lease %v: heartbeats every %v; input poll 2s):\n\n",
		cfg.cancelLease, (cfg.cancelLease / 3).Round(time.Millisecond))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tn\tp50\tp90\tp99\tmax\tmean\trequest p50\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Name, r.Stats.Ops,
			loadgen.FormatDuration(r.Stats.P50), loadgen.FormatDuration(r.Stats.P90), loadgen.FormatDuration(r.Stats.P99),
			loadgen.FormatDuration(r.Stats.Max), loadgen.FormatDuration(r.Stats.Mean), loadgen.FormatDuration(r.Ack.P50))
	}
	tw.Flush()
	fmt.Fprintln(w, "\n(from sending tasks/cancel or tasks/update until the tool's work on A sees its context done or gets its answer; \"request\" is the HTTP round trip of that request)")
}

func printTakeover(w io.Writer, ss []takeoverSummary) {
	for _, s := range ss {
		fmt.Fprintf(w, "\ntakeover after SIGKILL, lease %v (claims and heartbeats every %v), %d tasks per kill:\n\n",
			s.Lease, (s.Lease / 3).Round(time.Millisecond), s.Runs[0].Tasks)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "run\tlease left at kill\tfirst resolved\tall resolved\tof which after the lease ended\tall ÷ lease\t")
		for i, r := range s.Runs {
			left, after := "?", "?"
			if r.LeaseLeft >= 0 {
				left, after = loadgen.FormatDuration(r.LeaseLeft), loadgen.FormatDuration(r.All-r.LeaseLeft)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%.2f×\t\n", i+1, left, loadgen.FormatDuration(r.First), loadgen.FormatDuration(r.All), after,
				float64(r.All)/float64(s.Lease))
		}
		tw.Flush()
		fmt.Fprintf(w, "all resolved: min %s, median %s, max %s (%.2f× to %.2f× the lease; expected: the lease left, 2/3 to 1 lease, plus up to lease/3 until the next claim round)\n",
			loadgen.FormatDuration(s.Min), loadgen.FormatDuration(s.Median), loadgen.FormatDuration(s.Max),
			float64(s.Min)/float64(s.Lease), float64(s.Max)/float64(s.Lease))
	}
}
