package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcptask/mcptask/bench/internal/loadgen"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// takeoverRun is one SIGKILL of an instance and its takeover.
type takeoverRun struct {
	Lease time.Duration `json:"leaseNs"`
	Tasks int           `json:"tasks"`
	// LeaseLeft is how long the dead instance's leases still ran at the
	// kill (the latest of its tasks'; -1 if unknown).
	LeaseLeft time.Duration `json:"leaseLeftNs"`
	// First and All are the times from the kill until the survivor had
	// resolved the first and all of the dead instance's tasks (failed, or
	// re-run), from the survivor's log records.
	First time.Duration `json:"firstNs"`
	All   time.Duration `json:"allNs"`
}

// takeoverSummary sums up the runs with one lease.
type takeoverSummary struct {
	Lease  time.Duration `json:"leaseNs"`
	Runs   []takeoverRun `json:"runs"`
	Min    time.Duration `json:"minNs"`
	Median time.Duration `json:"medianNs"`
	Max    time.Duration `json:"maxNs"`
}

// runTakeover kills (SIGKILL) an mcptaskd instance with tasks running,
// cfg.kills times per lease, and measures how long a surviving instance
// on the same schema takes to resolve them.
func runTakeover(ctx context.Context, cfg config, bin string, stderr io.Writer) ([]takeoverSummary, error) {
	var out []takeoverSummary
	for _, lease := range cfg.leases {
		s, err := takeoverLease(ctx, cfg, bin, lease, stderr)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func takeoverLease(ctx context.Context, cfg config, bin string, lease time.Duration, stderr io.Writer) (_ takeoverSummary, err error) {
	schema := newSchemaName()
	defer func() { err = errors.Join(err, loadgen.DropSchema(cfg.dsn, schema)) }()
	args := []string{"-postgres", cfg.dsn, "-postgres-schema", schema, "-lease", lease.String(), "-log-level", "info"}
	survivor, err := startDaemon(ctx, bin, "survivor", args...)
	if err != nil {
		return takeoverSummary{}, err
	}
	defer survivor.stop(10 * time.Second)
	sc := &wiretest.Client{URL: survivor.URL, Tasks: true, HTTP: &http.Client{Timeout: time.Minute}}
	conn, err := pgx.Connect(ctx, cfg.dsn)
	if err != nil {
		return takeoverSummary{}, err
	}
	defer conn.Close(context.Background())

	sum := takeoverSummary{Lease: lease}
	for i := range cfg.kills {
		r, err := killOnce(ctx, bin, args, sc, survivor, conn, schema, lease)
		if err != nil {
			return sum, fmt.Errorf("lease %v, run %d: %w", lease, i+1, err)
		}
		if cfg.verbose {
			fmt.Fprintf(stderr, "takeover lease %v run %d: %d tasks, lease left at the kill %v, first resolved %v, all %v\n",
				lease, i+1, r.Tasks, r.LeaseLeft.Round(time.Millisecond), r.First.Round(time.Millisecond), r.All.Round(time.Millisecond))
		}
		sum.Runs = append(sum.Runs, r)
	}
	all := make([]time.Duration, len(sum.Runs))
	for i, r := range sum.Runs {
		all[i] = r.All
	}
	slices.Sort(all)
	sum.Min, sum.Median, sum.Max = all[0], all[len(all)/2], all[len(all)-1]
	return sum, nil
}

// killOnce starts a victim instance, gives it work (non-re-runnable tasks
// building or waiting for input, re-runnable ones computing), kills it
// with SIGKILL and waits until the survivor has resolved every task.
func killOnce(ctx context.Context, bin string, args []string, sc *wiretest.Client, survivor *daemon, conn *pgx.Conn, schema string, lease time.Duration) (takeoverRun, error) {
	// Start at a random phase of the survivor's claim rounds (every
	// lease/3 from its start): a victim started right after the previous
	// takeover, which ended at one of those rounds, would have its
	// heartbeats, and so its leases' ends, locked onto them.
	time.Sleep(rand.N(lease / 3))
	victim, err := startDaemon(ctx, bin, "victim", args...)
	if err != nil {
		return takeoverRun{}, err
	}
	defer victim.kill()
	vc := &wiretest.Client{URL: victim.URL, Tasks: true, HTTP: &http.Client{Timeout: time.Minute}}
	calls := []struct {
		tool    string
		args    map[string]any
		running func(*wiretest.Task) bool
	}{
		{"deploy_with_confirmation", map[string]any{"service": "a", "build_steps": 1, "step_delay_ms": 60000}, prefix("building")},
		{"deploy_with_confirmation", map[string]any{"service": "b", "build_steps": 1, "step_delay_ms": 0}, func(t *wiretest.Task) bool { return t.Status == "input_required" }},
		{"flaky_migration", map[string]any{"steps": 3, "step_delay_ms": 60000}, prefix("migration")},
		{"long_computation", map[string]any{"n": 1000, "steps": 2, "step_delay_ms": 60000}, prefix("step 1 of 2")},
		{"long_computation", map[string]any{"n": 2000, "steps": 2, "step_delay_ms": 60000}, prefix("step 1 of 2")},
	}
	var ids []string
	for _, c := range calls {
		tk, err := vc.CallTool(ctx, c.tool, c.args)
		if err != nil || tk.TaskID == "" {
			return takeoverRun{}, fmt.Errorf("creating a %s task: %+v %v", c.tool, tk, err)
		}
		ids = append(ids, tk.TaskID)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for i, c := range calls {
		if _, err := sc.WaitFor(wctx, ids[i], c.running); err != nil {
			return takeoverRun{}, fmt.Errorf("waiting for %s to run: %w", c.tool, err)
		}
	}

	// Kill at a random phase of the victim's heartbeats.
	time.Sleep(rand.N(lease))

	// The latest lease of the victim's tasks, read just before the kill
	// (the store keeps leases in lease_expires_at_ms; -1 if the layout
	// changed).
	leaseLeft := time.Duration(-1)
	var until int64
	if err := conn.QueryRow(ctx, "SELECT max(lease_expires_at_ms) FROM "+pgx.Identifier{schema}.Sanitize()+".tasks WHERE id = ANY($1)", ids).Scan(&until); err == nil {
		leaseLeft = time.Until(time.UnixMilli(until))
	}
	killed := time.Now()
	victim.kill()

	r := takeoverRun{Lease: lease, Tasks: len(ids), LeaseLeft: leaseLeft}
	deadline := killed.Add(20*lease + 30*time.Second)
	for {
		var first, last time.Time
		done := 0
		for _, id := range ids {
			rec, ok := survivor.find("task failed", id)
			if !ok {
				rec, ok = survivor.find("task re-run after restart", id)
			}
			if !ok {
				break
			}
			done++
			if first.IsZero() || rec.Time.Before(first) {
				first = rec.Time
			}
			if rec.Time.After(last) {
				last = rec.Time
			}
		}
		if done == len(ids) {
			r.First, r.All = first.Sub(killed), last.Sub(killed)
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("after %v, the survivor had resolved %d of %d tasks:\n%s", time.Since(killed), done, len(ids), survivor.log())
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
	// Stop the re-run computations.
	for i, c := range calls {
		if c.tool == "long_computation" {
			if err := sc.Result(ctx, "tasks/cancel", map[string]any{"taskId": ids[i]}, nil); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

func prefix(p string) func(*wiretest.Task) bool {
	return func(t *wiretest.Task) bool { return t.Status == "working" && strings.HasPrefix(t.StatusMessage, p) }
}
