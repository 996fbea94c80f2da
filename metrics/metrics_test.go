package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/metrics"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// waitFor polls cond until it holds, or fails the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestQueueAndStoreMetrics drives a real engine on a real SQLite file
// through a concurrency queue of cap 1: while a second task waits, the
// scrape-time gauges count it waiting and the first working; once it
// starts, its wait is observed; a scrape on a closed store leaves the
// gauges out and counts the failed reads.
func TestQueueAndStoreMetrics(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	if err := m.CollectStore(st, time.Second, nil); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Options{Store: st, Observer: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SweepInterval: -1, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetQueue("q", 1); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	work := func(context.Context) (json.RawMessage, error) { <-release; return json.RawMessage(`{}`), nil }
	owner := task.UserOwner("acme", "alice")
	first, err := e.Start(ctx, engine.StartSpec{Owner: owner, Tool: "slow", Queue: "q", Request: json.RawMessage(`{}`)}, work)
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.Start(ctx, engine.StartSpec{Owner: owner, Tool: "slow", Queue: "q", Request: json.RawMessage(`{}`)}, work)
	if err != nil || !second.Queued {
		t.Fatalf("second task: %+v, %v; want it waiting", second, err)
	}
	const gauges = `
# HELP mcptask_queue_waiting_tasks Tasks waiting in a concurrency queue, by queue, read from the store at scrape time.
# TYPE mcptask_queue_waiting_tasks gauge
mcptask_queue_waiting_tasks{queue="q"} 1
# HELP mcptask_tasks Unfinished tasks that are not waiting in a queue, by tool and status (working, input_required), read from the store at scrape time.
# TYPE mcptask_tasks gauge
mcptask_tasks{status="working",tool="slow"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(gauges), "mcptask_queue_waiting_tasks", "mcptask_tasks"); err != nil {
		t.Fatal(err)
	}
	close(release)
	for _, id := range []task.ID{first.ID, second.ID} {
		waitFor(t, "task "+string(id)+" completed", func() bool {
			tk, err := e.Get(ctx, owner, id)
			return err == nil && tk.Status == task.Completed
		})
	}
	waitFor(t, "both tasks counted finished", func() bool {
		return testutil.ToFloat64(counterVec(t, reg, "mcptask_tasks_finished_total")) == 2
	})
	if n, err := testutil.GatherAndCount(reg, "mcptask_queue_wait_seconds"); err != nil || n != 1 {
		t.Fatalf("queue wait series: %d, %v; want 1", n, err)
	}
	if got := histogramCount(t, reg, "mcptask_queue_wait_seconds"); got != 1 {
		t.Fatalf("queue waits observed: %d, want 1 (the second task)", got)
	}
	if got := testutil.ToFloat64(counterVec(t, reg, "mcptask_tasks_created_total")); got != 2 {
		t.Fatalf("tasks created: %v, want 2", got)
	}
	if n, err := testutil.GatherAndCount(reg, "mcptask_tasks", "mcptask_queue_waiting_tasks"); err != nil || n != 0 {
		t.Fatalf("gauges with every task finished: %d series, %v; want none", n, err)
	}

	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()
	const failed = `
# HELP mcptask_store_count_errors_total Scrape-time store reads that failed (their gauges were left out of the scrape), by read (tasks, queues, webhooks).
# TYPE mcptask_store_count_errors_total counter
mcptask_store_count_errors_total{read="queues"} 1
mcptask_store_count_errors_total{read="tasks"} 1
mcptask_store_count_errors_total{read="webhooks"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(failed), "mcptask_store_count_errors_total", "mcptask_tasks"); err != nil {
		t.Fatal(err)
	}
}

// counterVec gathers the family name of reg as one collector summing its
// samples, for testutil.ToFloat64.
func counterVec(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sum"}, func() float64 { return sum })
}

// histogramCount returns the sample count of the histogram family name.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// TestUpstreamUp: mcptask_upstream_up follows the health function at
// each scrape.
func TestUpstreamUp(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	health := map[string]error{"builder": nil, "search": errors.New("connection refused")}
	if err := m.CollectUpstreams(func() map[string]error { return health }); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP mcptask_upstream_up Whether an upstream (a gateway's upstream MCP server) answered last: 1, or 0 when it did not, by upstream, at scrape time.
# TYPE mcptask_upstream_up gauge
mcptask_upstream_up{upstream="builder"} 1
mcptask_upstream_up{upstream="search"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcptask_upstream_up"); err != nil {
		t.Fatal(err)
	}
}

// TestJobAPIUp: mcptask_jobapi_up follows the health function at each
// scrape.
func TestJobAPIUp(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	health := map[string]error{"build": nil, "deploy": errors.New("HTTP 503")}
	if err := m.CollectJobAPIs(func() map[string]error { return health }); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP mcptask_jobapi_up Whether the job API of an HTTP job tool answered its last request: 1, or 0 when it failed (no answer, HTTP 5xx), by tool, at scrape time.
# TYPE mcptask_jobapi_up gauge
mcptask_jobapi_up{tool="build"} 1
mcptask_jobapi_up{tool="deploy"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcptask_jobapi_up"); err != nil {
		t.Fatal(err)
	}
}

// gauge returns the value of the sample of name with exactly labels
// (name=value pairs), and whether it is present.
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestDeclaredAndToolErrors: the gauges of a declared tool and queue are
// present at 0 while nothing runs or waits, and a task that completed
// with isError: true is counted with outcome tool_error (status
// completed), apart from a success.
func TestDeclaredAndToolErrors(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	declared := func() (tools, queues []string) { return []string{"build", "test"}, []string{"ci", "ci"} }
	if err := m.CollectStore(st, time.Second, declared); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"mcptask_tasks", map[string]string{"tool": "build", "status": "working"}},
		{"mcptask_tasks", map[string]string{"tool": "test", "status": "input_required"}},
		{"mcptask_queue_waiting_tasks", map[string]string{"queue": "ci"}},
	} {
		if v, ok := gauge(t, reg, c.name, c.labels); !ok || v != 0 {
			t.Errorf("%s%v = %v (present %v); want present at 0", c.name, c.labels, v, ok)
		}
	}
	e, err := engine.New(engine.Options{Store: st, Observer: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SweepInterval: -1, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	for _, result := range []string{`{"content":[],"isError":true}`, `{"content":[]}`} {
		if _, err := e.Start(ctx, engine.StartSpec{Tool: "test"}, func(context.Context) (json.RawMessage, error) {
			return json.RawMessage(result), nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Counted just after the change is stored: wait for the counts.
	finished := func(outcome string) float64 {
		v, _ := gauge(t, reg, "mcptask_tasks_finished_total", map[string]string{"tool": "test", "status": "completed", "outcome": outcome})
		return v
	}
	waitFor(t, "both tasks counted", func() bool { return finished("tool_error")+finished("ok") == 2 })
	if finished("tool_error") != 1 || finished("ok") != 1 {
		t.Errorf("finished tool_error %v, ok %v; want 1 each", finished("tool_error"), finished("ok"))
	}
}
