// Benchmarks of mcptask over real loopback HTTP on a real SQLite file, on
// the 2026-07-28 wire:
//
//   - BenchmarkPlainCall: a no-op tools/call of a tool without task support;
//   - BenchmarkTasksGet: tasks/get of a completed task (on the fast lane;
//     BenchmarkTasksGetSlowLane: with it off, through the go-sdk);
//   - BenchmarkCreateTask: a tools/call answered with a task handle, which
//     includes the durable commit of the new task (the tool is a no-op);
//
// and their parallel variants; and BenchmarkTasksGetLimited and
// BenchmarkCreateTaskLimited (and their parallel variants), the same
// operations with the per-requester limits and the audit trail on, the
// limits set so high that nothing is refused (loadgen.UnrefusedLimits):
// what their bookkeeping costs. Each reports, besides ns/op, the p50 and
// p99 of the operations' latencies (p50-ns, p99-ns). After the benchmarks,
// the run prints the ratios tasks/get ÷ plain and create ÷ plain, and
// limited ÷ unlimited, of the figures it measured: compare ratios of one
// run, not absolute figures of different runs. See README.md.
package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/bench/internal/loadgen"
	"github.com/mcptask/mcptask/store/sqlite"
)

// parallelism is the number of concurrent clients per GOMAXPROCS of the
// parallel benchmarks (b.SetParallelism).
const parallelism = 4

// setup starts an in-process server on a SQLite file in b.TempDir and
// returns a client of it with conns keep-alive connections.
func setup(b *testing.B, conns int) (*loadgen.Server, *loadgen.Client) {
	b.Helper()
	return setupWith(b, conns, nil)
}

// setupLimited is setup with the limits and the audit trail on, limits
// that refuse nothing (loadgen.UnrefusedLimits).
func setupLimited(b *testing.B, conns int) (*loadgen.Server, *loadgen.Client) {
	b.Helper()
	return setupWith(b, conns, &loadgen.ServerOptions{Limits: loadgen.UnrefusedLimits(), Audit: true})
}

func setupWith(b *testing.B, conns int, opts *loadgen.ServerOptions) (*loadgen.Server, *loadgen.Client) {
	b.Helper()
	srv, err := loadgen.StartServer(filepath.Join(b.TempDir(), "tasks.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := srv.Close(); err != nil {
			b.Error(err)
		}
	})
	c, err := loadgen.NewClient(srv.URL, loadgen.ClientOptions{Conns: conns})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return srv, c
}

// completedTask creates a task and waits until it has completed.
func completedTask(b *testing.B, c *loadgen.Client) string {
	b.Helper()
	ctx := context.Background()
	id, err := c.Create(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.WaitCompleted(ctx, id); err != nil {
		b.Fatal(err)
	}
	return id
}

// warm runs op n times unmeasured: connections, statement caches, pools.
func warm(b *testing.B, n int, op func(context.Context) error) {
	b.Helper()
	for range n {
		if err := op(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// mallocs returns the number of heap allocations of the process so far
// (what b.ReportAllocs counts), for the allocs/op of the printed ratios.
func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// sequential measures op one call at a time.
func sequential(b *testing.B, op func(context.Context) error) {
	first := b.N == 1
	ctx := context.Background()
	lat := make([]time.Duration, 0, 1<<14)
	b.ReportAllocs()
	m0 := mallocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		err := op(ctx)
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	report(b, first, lat, mallocs()-m0)
}

// parallel measures op with parallelism×GOMAXPROCS concurrent callers.
func parallel(b *testing.B, op func(context.Context) error) {
	first := b.N == 1
	var (
		mu  sync.Mutex
		all [][]time.Duration
	)
	b.SetParallelism(parallelism)
	b.ReportAllocs()
	m0 := mallocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		lat := make([]time.Duration, 0, 1024)
		for pb.Next() {
			t0 := time.Now()
			err := op(ctx)
			lat = append(lat, time.Since(t0))
			if err != nil {
				b.Error(err)
				return
			}
		}
		mu.Lock()
		all = append(all, lat)
		mu.Unlock()
	})
	b.StopTimer()
	report(b, first, slices.Concat(all...), mallocs()-m0)
}

// report adds the p50 and p99 of the latencies to b's metrics and keeps
// the figures (with allocs, the heap allocations of the measured loop) for
// the ratios printed at the end of the run.
func report(b *testing.B, first bool, lat []time.Duration, allocs uint64) {
	s := loadgen.Merge(lat)
	b.ReportMetric(float64(s.P50.Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(s.P99.Nanoseconds()), "p99-ns")
	if n := b.N; n > 0 && b.Elapsed() > 0 {
		record(b.Name(), first, figures{nsPerOp: float64(b.Elapsed().Nanoseconds()) / float64(n), p50: s.P50, p99: s.P99,
			allocsPerOp: float64(allocs) / float64(n), n: n})
	}
}

// getOp returns tasks/get of one completed task of c, checked.
func getOp(b *testing.B, c *loadgen.Client) func(context.Context) error {
	id := completedTask(b, c)
	return func(ctx context.Context) error {
		st, err := c.Get(ctx, id)
		if err == nil && st != "completed" {
			err = fmt.Errorf("task %s is %s, want completed", id, st)
		}
		return err
	}
}

// createOp returns the creation of a task by c.
func createOp(c *loadgen.Client) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := c.Create(ctx)
		return err
	}
}

// conns is the number of connections of the parallel benchmarks' client.
func conns() int { return parallelism * runtime.GOMAXPROCS(0) }

// The …Limited benchmarks are the same operations with limits and audit
// trail on. All requests come from one anonymous requester, so every
// request takes its token from the same bucket: tasks/get takes one from
// the request rate's, updates the poll tracking (which raises the
// suggested poll interval to its maximum, the benchmark polling as fast as
// it can) and writes a task.result_retrieved record; a creation takes one
// from the creation rate's, counts the requester's unfinished tasks in the
// creation's write transaction, and writes task.created and
// task.status_changed records. Each runs right after its counterpart
// without limits (benchmarks run in the order of this file), so that a
// drift of the machine hits the pair as alike as it can.

func BenchmarkPlainCall(b *testing.B) {
	_, c := setup(b, 1)
	warm(b, 50, c.Plain)
	sequential(b, c.Plain)
}

func BenchmarkTasksGet(b *testing.B) {
	_, c := setup(b, 1)
	get := getOp(b, c)
	warm(b, 50, get)
	sequential(b, get)
}

// BenchmarkTasksGetSlowLane is BenchmarkTasksGet with the fast lane off
// (mcptask.Options.FastLane off): every tasks/get through the go-sdk.
func BenchmarkTasksGetSlowLane(b *testing.B) {
	_, c := setupWith(b, 1, &loadgen.ServerOptions{DisableFastLane: true})
	get := getOp(b, c)
	warm(b, 50, get)
	sequential(b, get)
}

// BenchmarkTasksGetNoViewCache is BenchmarkTasksGet with the SQLite
// view cache off (sqlite.Options.ViewCache): every get reads the file.
func BenchmarkTasksGetNoViewCache(b *testing.B) {
	_, c := setupWith(b, 1, &loadgen.ServerOptions{SQLite: &sqlite.Options{}})
	get := getOp(b, c)
	warm(b, 50, get)
	sequential(b, get)
}

func BenchmarkTasksGetLimited(b *testing.B) {
	_, c := setupLimited(b, 1)
	get := getOp(b, c)
	warm(b, 50, get)
	sequential(b, get)
}

func BenchmarkCreateTask(b *testing.B) {
	_, c := setup(b, 1)
	create := createOp(c)
	warm(b, 50, create)
	sequential(b, create)
}

func BenchmarkCreateTaskLimited(b *testing.B) {
	_, c := setupLimited(b, 1)
	create := createOp(c)
	warm(b, 50, create)
	sequential(b, create)
}

func BenchmarkPlainCallParallel(b *testing.B) {
	_, c := setup(b, conns())
	warm(b, 50, c.Plain)
	parallel(b, c.Plain)
}

func BenchmarkTasksGetParallel(b *testing.B) {
	_, c := setup(b, conns())
	get := getOp(b, c)
	warm(b, 50, get)
	parallel(b, get)
}

// BenchmarkTasksGetSlowLaneParallel is BenchmarkTasksGetParallel with the
// fast lane off.
func BenchmarkTasksGetSlowLaneParallel(b *testing.B) {
	_, c := setupWith(b, conns(), &loadgen.ServerOptions{DisableFastLane: true})
	get := getOp(b, c)
	warm(b, 50, get)
	parallel(b, get)
}

// BenchmarkTasksGetNoViewCacheParallel is BenchmarkTasksGetParallel
// with the SQLite view cache off.
func BenchmarkTasksGetNoViewCacheParallel(b *testing.B) {
	_, c := setupWith(b, conns(), &loadgen.ServerOptions{SQLite: &sqlite.Options{}})
	get := getOp(b, c)
	warm(b, 50, get)
	parallel(b, get)
}

func BenchmarkTasksGetLimitedParallel(b *testing.B) {
	_, c := setupLimited(b, conns())
	get := getOp(b, c)
	warm(b, 50, get)
	parallel(b, get)
}

func BenchmarkCreateTaskParallel(b *testing.B) {
	_, c := setup(b, conns())
	create := createOp(c)
	warm(b, 50, create)
	parallel(b, create)
}

func BenchmarkCreateTaskLimitedParallel(b *testing.B) {
	_, c := setupLimited(b, conns())
	create := createOp(c)
	warm(b, 50, create)
	parallel(b, create)
}

// The figures of the benchmarks of this run, for the ratios printed by
// TestMain.
type figures struct {
	nsPerOp     float64
	p50, p99    time.Duration
	allocsPerOp float64
	n           int
}

var (
	resultsMu sync.Mutex
	results   = map[string][]figures{}
)

// record keeps the figures of the last call of each benchmark function
// per repetition (-count): testing calls a benchmark function first with
// b.N = 1, then, unless it uses b.Loop, again with growing b.N.
func record(name string, first bool, f figures) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	rs := results[name]
	if first || len(rs) == 0 {
		rs = append(rs, f)
	} else {
		rs[len(rs)-1] = f
	}
	results[name] = rs
}

func TestMain(m *testing.M) {
	code := m.Run()
	printRatios()
	os.Exit(code)
}

// printRatios prints tasks/get ÷ plain and create ÷ plain, and limited ÷
// unlimited for tasks/get and create, of the medians of the figures
// measured in this run.
func printRatios() {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	med := func(name string) (figures, bool) {
		match := results[name]
		if len(match) == 0 {
			return figures{}, false
		}
		pick := func(key func(figures) float64) float64 {
			v := make([]float64, len(match))
			for i, f := range match {
				v[i] = key(f)
			}
			sort.Float64s(v)
			return v[len(v)/2]
		}
		return figures{
			nsPerOp:     pick(func(f figures) float64 { return f.nsPerOp }),
			p50:         time.Duration(pick(func(f figures) float64 { return float64(f.p50) })),
			p99:         time.Duration(pick(func(f figures) float64 { return float64(f.p99) })),
			allocsPerOp: pick(func(f figures) float64 { return f.allocsPerOp }),
		}, true
	}
	ratios := func(f, base figures) string {
		return fmt.Sprintf("ns/op %.2f×  p50 %.2f×  p99 %.2f×",
			f.nsPerOp/base.nsPerOp, float64(f.p50)/float64(base.p50), float64(f.p99)/float64(base.p99))
	}
	printed := false
	for _, suffix := range []string{"", "Parallel"} {
		plain, ok := med("BenchmarkPlainCall" + suffix)
		if !ok {
			continue
		}
		for _, o := range []struct {
			name   string
			target float64
		}{
			{"BenchmarkTasksGet", loadgen.TargetGet}, {"BenchmarkCreateTask", loadgen.TargetCreate},
			{"BenchmarkTasksGetLimited", loadgen.TargetGet}, {"BenchmarkCreateTaskLimited", loadgen.TargetCreate},
		} {
			f, ok := med(o.name + suffix)
			if !ok {
				continue
			}
			if !printed {
				fmt.Println("ratios to the plain call of this run (target: tasks/get ≤ 1.3×, create ≤ 2×):")
				printed = true
			}
			fmt.Printf("  %-46s %s  (target ≤%.1f×)\n", o.name+suffix+" ÷ plain", ratios(f, plain), o.target)
		}
	}
	for _, off := range []struct{ name, what string }{
		{"SlowLane", "fast lane"},
		{"NoViewCache", "SQLite view cache"},
	} {
		printed = false
		for _, suffix := range []string{"", "Parallel"} {
			on, ok := med("BenchmarkTasksGet" + suffix)
			if !ok {
				continue
			}
			without, ok := med("BenchmarkTasksGet" + off.name + suffix)
			if !ok {
				continue
			}
			if !printed {
				fmt.Printf("tasks/get, %s on ÷ off, in this run (below 1.00× = faster with it):\n", off.what)
				printed = true
			}
			fmt.Printf("  %-46s %s  allocs/op %.0f vs %.0f\n", "BenchmarkTasksGet"+suffix+" ÷ "+off.name,
				ratios(on, without), on.allocsPerOp, without.allocsPerOp)
		}
	}
	printed = false
	for _, suffix := range []string{"", "Parallel"} {
		for _, name := range []string{"BenchmarkTasksGet", "BenchmarkCreateTask"} {
			unlimited, ok := med(name + suffix)
			if !ok {
				continue
			}
			limited, ok := med(name + "Limited" + suffix)
			if !ok {
				continue
			}
			if !printed {
				fmt.Println("limits and audit trail on ÷ off, in this run (limits that refuse nothing; 1.00× = free):")
				printed = true
			}
			fmt.Printf("  %-46s %s  allocs/op %+.0f\n", name+"Limited"+suffix+" ÷ unlimited",
				ratios(limited, unlimited), limited.allocsPerOp-unlimited.allocsPerOp)
		}
	}
}
