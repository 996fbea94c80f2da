package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/mcptask/mcptask/bench/internal/loadgen"
)

// backend is one server set-up measured by the create mode: one or more
// mcptaskd processes, each with a client; load is spread over them.
type backend struct {
	Name    string `json:"name"`
	daemons []*daemon
	clients []*loadgen.Client
}

// createResult is the create mode's figures for one backend at one
// concurrency.
type createResult struct {
	Backend     string        `json:"backend"`
	Concurrency int           `json:"concurrency"`
	Stats       loadgen.Stats `json:"stats"`
	// ThroughputVsSQLite and P50VsSQLite are this backend's ops/s and p50
	// divided by SQLite's at the same concurrency.
	ThroughputVsSQLite float64 `json:"throughputVsSQLite"`
	P50VsSQLite        float64 `json:"p50VsSQLite"`
}

// runCreate measures task creation (tools/call answered with a task
// handle once the task is committed) against mcptaskd on SQLite, on
// PostgreSQL, and on two PostgreSQL instances sharing a schema.
func runCreate(ctx context.Context, cfg config, bin, dir string, stderr io.Writer) (_ []createResult, err error) {
	schema := newSchemaName()
	defer func() { err = errors.Join(err, loadgen.DropSchema(cfg.dsn, schema)) }()
	common := []string{"-log-level", "warn"}
	pgArgs := append([]string{"-postgres", cfg.dsn, "-postgres-schema", schema}, common...)
	specs := []struct {
		name string
		args [][]string
	}{
		{"sqlite", [][]string{append([]string{"-db", filepath.Join(dir, "tasks.db"), "-sqlite-sync", cfg.sqliteSync}, common...)}},
		{"postgres", [][]string{pgArgs}},
	}
	if cfg.pgInstances > 1 {
		var args [][]string
		for range cfg.pgInstances {
			args = append(args, pgArgs)
		}
		specs = append(specs, struct {
			name string
			args [][]string
		}{fmt.Sprintf("postgres×%d", cfg.pgInstances), args})
	}
	maxConc := 1
	for _, c := range cfg.conc {
		maxConc = max(maxConc, c)
	}
	var backends []*backend
	defer func() {
		for _, b := range backends {
			for _, c := range b.clients {
				c.Close()
			}
			for _, d := range b.daemons {
				d.stop(10 * time.Second)
			}
		}
	}()
	for _, s := range specs {
		b := &backend{Name: s.name}
		backends = append(backends, b)
		for i, args := range s.args {
			d, err := startDaemon(ctx, bin, fmt.Sprintf("%s#%d", s.name, i+1), args...)
			if err != nil {
				return nil, err
			}
			b.daemons = append(b.daemons, d)
			c, err := loadgen.NewClient(d.URL, loadgen.ClientOptions{
				Conns:     maxConc,
				PlainTool: "echo", PlainArgs: json.RawMessage(`{"text":"x"}`),
				TaskTool: cfg.taskTool, TaskArgs: json.RawMessage(cfg.taskArgs),
			})
			if err != nil {
				return nil, err
			}
			b.clients = append(b.clients, c)
		}
	}

	var out []createResult
	for _, conc := range cfg.conc {
		runs := make([][]loadgen.Stats, len(backends))
		for _, b := range backends { // warm-up, unmeasured
			if _, err := measureCreate(ctx, b, loadgen.Load{Concurrency: conc, Count: int64(20 * conc)}); err != nil {
				return nil, fmt.Errorf("%s: warm-up: %w", b.Name, err)
			}
		}
		for r := range cfg.rounds {
			for i, b := range backends {
				s, err := measureCreate(ctx, b, loadgen.Load{Concurrency: conc, Duration: cfg.dur / time.Duration(cfg.rounds)})
				if err != nil {
					return nil, fmt.Errorf("%s: %w", b.Name, err)
				}
				if cfg.verbose {
					fmt.Fprintf(stderr, "create c=%d round %d %-12s %6d ops %7.0f ops/s p50 %v p99 %v\n", conc, r+1, b.Name, s.Ops, s.Throughput, s.P50, s.P99)
				}
				runs[i] = append(runs[i], s)
			}
		}
		var base loadgen.Stats
		for i, b := range backends {
			s := loadgen.Combine(runs[i]...)
			if i == 0 {
				base = s
			}
			out = append(out, createResult{Backend: b.Name, Concurrency: conc, Stats: s,
				ThroughputVsSQLite: s.Throughput / base.Throughput, P50VsSQLite: float64(s.P50) / float64(base.P50)})
		}
	}
	return out, nil
}

// measureCreate runs a create load on b, spreading the operations over
// its instances in turn, then waits until the last task of each worker has completed
// (so that one measurement's background completions do not spill into the
// next).
func measureCreate(ctx context.Context, b *backend, l loadgen.Load) (loadgen.Stats, error) {
	last := make([]string, l.Concurrency)
	var next atomic.Uint64 // round robin over the instances, per operation
	s := loadgen.Run(ctx, l, func(ctx context.Context, w int) error {
		id, err := b.clients[next.Add(1)%uint64(len(b.clients))].Create(ctx)
		if err == nil {
			last[w] = id
		}
		return err
	})
	if s.Errors > 0 {
		return s, fmt.Errorf("%d errors, the first: %s", s.Errors, s.FirstError)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for w, id := range last {
		if id == "" {
			continue
		}
		// Any instance answers for every task.
		if err := b.clients[w%len(b.clients)].WaitCompleted(wctx, id); err != nil {
			return s, err
		}
	}
	return s, nil
}
