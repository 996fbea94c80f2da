package loadgen

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// CompareConfig configures [Compare].
type CompareConfig struct {
	// Load is the load of each of the three operations: Duration or
	// Count is the total per operation, split evenly over the rounds.
	Load Load
	// Rounds interleaves the operations: each round runs plain, tasks/get
	// and create in turn, so that a drift of the machine (other load,
	// thermal state, a growing database) spreads over all three alike.
	// Zero means 1.
	Rounds int
	// Warmup is the number of operations of each kind run, and not
	// measured, before the first round. Zero means 50 per caller.
	Warmup int64
	// GetPool is the number of completed tasks tasks/get cycles through.
	// Zero means 64.
	GetPool int
	// Idle waits until every task created so far has completed. Nil
	// polls the tasks created by the last round's callers instead.
	Idle func(ctx context.Context) error
	// Progress, if set, is told the outcome of each phase of each round.
	Progress func(round int, op string, s Stats)
}

// Comparison holds the figures of the three operations, measured in one
// run, and their ratios.
type Comparison struct {
	Plain  Stats  `json:"plain"`
	Get    Stats  `json:"tasksGet"`
	Create Stats  `json:"create"`
	Ratios Ratios `json:"ratios"`
}

// Ratios compares tasks/get and task creation with the plain call: a
// latency ratio is x ÷ plain (lower is better, 1 is parity), a throughput
// ratio is x ÷ plain (higher is better, 1 is parity).
type Ratios struct {
	GetP50           float64 `json:"getP50"`
	GetP99           float64 `json:"getP99"`
	GetThroughput    float64 `json:"getThroughput"`
	CreateP50        float64 `json:"createP50"`
	CreateP99        float64 `json:"createP99"`
	CreateThroughput float64 `json:"createThroughput"`
}

// The targets of the project: tasks/get within 1.3× of the plain call,
// task creation within 2×.
const (
	TargetGet    = 1.3
	TargetCreate = 2.0
)

// Phase names.
const (
	OpPlain  = "plain"
	OpGet    = "tasks/get"
	OpCreate = "create"
)

// Compare measures, in one run, the plain no-op call, tasks/get of a
// completed task and task creation through c, and their ratios.
func Compare(ctx context.Context, c *Client, cfg CompareConfig) (*Comparison, error) {
	conc := max(cfg.Load.Concurrency, 1)
	rounds := max(cfg.Rounds, 1)
	if cfg.Warmup <= 0 {
		cfg.Warmup = 50 * int64(conc)
	}
	if cfg.GetPool <= 0 {
		cfg.GetPool = 64
	}
	// The tasks tasks/get reads, completed before it runs.
	pool := make([]string, cfg.GetPool)
	for i := range pool {
		id, err := c.Create(ctx)
		if err != nil {
			return nil, fmt.Errorf("creating the tasks to read: %w", err)
		}
		if err := c.WaitCompleted(ctx, id); err != nil {
			return nil, err
		}
		pool[i] = id
	}
	var next atomic.Uint64
	last := make([]string, conc) // each caller's last created task
	ops := []struct {
		name string
		op   Op
	}{
		{OpPlain, func(ctx context.Context, _ int) error { return c.Plain(ctx) }},
		{OpGet, func(ctx context.Context, _ int) error {
			id := pool[next.Add(1)%uint64(len(pool))]
			st, err := c.Get(ctx, id)
			if err == nil && st != "completed" {
				err = fmt.Errorf("tasks/get of %s: status %s, want completed", id, st)
			}
			return err
		}},
		{OpCreate, func(ctx context.Context, w int) error {
			id, err := c.Create(ctx)
			last[w] = id
			return err
		}},
	}
	idle := func(ctx context.Context) error {
		if cfg.Idle != nil {
			return cfg.Idle(ctx)
		}
		for w, id := range last {
			if id == "" {
				continue
			}
			if err := c.WaitCompleted(ctx, id); err != nil {
				return err
			}
			last[w] = ""
		}
		return nil
	}

	for _, o := range ops {
		s := Run(ctx, Load{Concurrency: conc, Count: cfg.Warmup}, o.op)
		if s.Errors > 0 {
			return nil, fmt.Errorf("warm-up of %s: %d errors, first: %s", o.name, s.Errors, s.FirstError)
		}
	}
	if err := idle(ctx); err != nil {
		return nil, err
	}

	per := Load{Concurrency: conc, Duration: cfg.Load.Duration / time.Duration(rounds)}
	if cfg.Load.Count > 0 {
		per.Count = max(cfg.Load.Count/int64(rounds), 1)
	}
	if per.Duration <= 0 && per.Count <= 0 {
		per.Count = int64(conc)
	}
	runs := make([][]Stats, len(ops))
	for r := range rounds {
		for i, o := range ops {
			s := Run(ctx, per, o.op)
			if cfg.Progress != nil {
				cfg.Progress(r, o.name, s)
			}
			if s.Errors > 0 {
				return nil, fmt.Errorf("%s: %d errors, first: %s", o.name, s.Errors, s.FirstError)
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			runs[i] = append(runs[i], s)
		}
		// Let the completions of the created tasks land before the next
		// round's plain calls.
		if err := idle(ctx); err != nil {
			return nil, err
		}
	}
	cmp := &Comparison{Plain: Combine(runs[0]...), Get: Combine(runs[1]...), Create: Combine(runs[2]...)}
	cmp.Ratios = Ratios{
		GetP50:           ratio(cmp.Get.P50, cmp.Plain.P50),
		GetP99:           ratio(cmp.Get.P99, cmp.Plain.P99),
		GetThroughput:    cmp.Get.Throughput / cmp.Plain.Throughput,
		CreateP50:        ratio(cmp.Create.P50, cmp.Plain.P50),
		CreateP99:        ratio(cmp.Create.P99, cmp.Plain.P99),
		CreateThroughput: cmp.Create.Throughput / cmp.Plain.Throughput,
	}
	return cmp, nil
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// MemoryConfig configures [Memory].
type MemoryConfig struct {
	// Points are the numbers of retained completed tasks at which the heap
	// is measured, in increasing order.
	Points []int64
	// Concurrency is the number of concurrent creating callers.
	Concurrency int
	// Progress, if set, is told each point as it is measured.
	Progress func(MemPoint)
}

// MemPoint is the memory of the server process with Tasks completed
// tasks retained.
type MemPoint struct {
	Tasks int64 `json:"tasks"`
	// HeapInuse is runtime.MemStats.HeapInuse after a full GC: the bytes
	// in in-use spans of the Go heap.
	HeapInuse uint64 `json:"heapInuseBytes"`
	// HeapAlloc is the bytes of live heap objects after a full GC.
	HeapAlloc   uint64 `json:"heapAllocBytes"`
	HeapObjects uint64 `json:"heapObjects"`
	// RSS is the resident set of the process (Linux; 0 elsewhere). It
	// includes SQLite's page caches, which live outside the Go heap.
	RSS uint64 `json:"rssBytes"`
	// DBBytes is the size of the SQLite file and its WAL.
	DBBytes int64 `json:"dbBytes"`
	// Elapsed is the time since the first task was created.
	Elapsed time.Duration `json:"elapsedNs"`
}

// Memory creates tasks of srv through c until each point's number of
// completed tasks is retained, and measures the heap of this process (the
// server's) there. Tasks must be created on srv only through c.
func Memory(ctx context.Context, srv *Server, c *Client, cfg MemoryConfig) ([]MemPoint, error) {
	conc := max(cfg.Concurrency, 1)
	var out []MemPoint
	var created int64
	create := func(ctx context.Context, _ int) error {
		_, err := c.Create(ctx)
		return err
	}
	start := time.Now()
	for _, p := range cfg.Points {
		if p > created {
			s := Run(ctx, Load{Concurrency: conc, Count: p - created}, create)
			created += s.Ops
			if s.Errors > 0 {
				return out, fmt.Errorf("creating tasks: %d errors, first: %s", s.Errors, s.FirstError)
			}
			if err := ctx.Err(); err != nil {
				return out, err
			}
		}
		if err := srv.WaitIdle(ctx); err != nil {
			return out, err
		}
		m := measure()
		m.Tasks = created
		m.Elapsed = time.Since(start)
		m.DBBytes = fileSize(srv.Store.Path()) + fileSize(srv.Store.Path()+"-wal")
		out = append(out, m)
		if cfg.Progress != nil {
			cfg.Progress(m)
		}
	}
	return out, nil
}

// measure returns the heap after full collections.
func measure() MemPoint {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return MemPoint{HeapInuse: ms.HeapInuse, HeapAlloc: ms.HeapAlloc, HeapObjects: ms.HeapObjects, RSS: rss()}
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// rss reads the resident set size of this process from /proc (Linux).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}
