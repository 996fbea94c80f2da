package metrics_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/pgtest"
	"github.com/mcptask/mcptask/metrics"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/postgres"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// sample returns the sample of family name in reg whose labels are
// labels (name, value pairs): a counter's value or a histogram's count;
// 0 when there is none.
func sample(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel())*2 != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if !hasLabel(labels, lp) {
					continue metric
				}
			}
			if m.Histogram != nil {
				return float64(m.Histogram.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func hasLabel(labels []string, lp *dto.LabelPair) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		if labels[i] == lp.GetName() && labels[i+1] == lp.GetValue() {
			return true
		}
	}
	return false
}

// TestTakeoverAndStoreCallMetrics: an exclusive engine starting on a
// SQLite file with two unfinished tasks left by a stopped process re-runs
// the re-runnable one and fails the other "outcome unknown", each counted
// as a takeover with its outcome; its store calls are timed by operation;
// a call on a closed store counts as a store error.
func TestTakeoverAndStoreCallMetrics(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	owner := task.UserOwner("acme", "alice")
	left := map[string]*task.Task{}
	for _, tool := range []string{"rerunnable", "once"} {
		tk := task.New(task.Policy{}, owner, tool, nil, time.Now().Add(-time.Minute))
		tk.Request, tk.Runner, tk.Attempts = json.RawMessage(`{}`), "gone", 1
		tk.LeaseExpiresAt = time.Now().Add(-time.Second)
		if err := st.Create(ctx, tk, store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		left[tool] = tk
	}
	reg := prometheus.NewRegistry()
	e, err := engine.New(engine.Options{Store: st, Observer: metrics.New(reg), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SweepInterval: -1, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetHooks(engine.Hooks{Recover: func(_ context.Context, tk *task.Task) engine.Work {
		if tk.Tool != "rerunnable" {
			return nil
		}
		return func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }
	}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]task.Status{"rerunnable": task.Completed, "once": task.Failed} {
		waitFor(t, tool+" "+string(want), func() bool {
			tk, err := e.Get(ctx, owner, left[tool].ID)
			return err == nil && tk.Status == want
		})
	}
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"mcptask_takeovers_total", []string{"tool", "rerunnable", "outcome", "rerun"}, 1},
		{"mcptask_takeovers_total", []string{"tool", "once", "outcome", "failed_unknown"}, 1},
		{"mcptask_tasks_finished_total", []string{"tool", "rerunnable", "status", "completed", "outcome", "ok"}, 1},
		{"mcptask_tasks_finished_total", []string{"tool", "once", "status", "failed", "outcome", "failed"}, 1},
		{"mcptask_store_errors_total", []string{"operation", "get"}, 0},
	} {
		if got := sample(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, op := range []string{"claim", "update", "get"} {
		if got := sample(t, reg, "mcptask_store_operation_duration_seconds", "operation", op); got < 1 {
			t.Errorf("store calls %q timed: %v, want some", op, got)
		}
	}
	gets := sample(t, reg, "mcptask_store_operation_duration_seconds", "operation", "get")
	st.Close()
	if _, err := e.Get(ctx, owner, left["once"].ID); err == nil {
		t.Fatal("Get on a closed store succeeded")
	}
	if got := sample(t, reg, "mcptask_store_errors_total", "operation", "get"); got != 1 {
		t.Errorf("store errors of get after one on a closed store: %v, want 1", got)
	}
	if got := sample(t, reg, "mcptask_store_operation_duration_seconds", "operation", "get"); got != gets+1 {
		t.Errorf("store gets timed: %v, want %v", got, gets+1)
	}
}

// TestFeedReconnectMetric: on PostgreSQL, when the connection of the
// change feed is terminated by the server, the engine follows the feed
// again and counts the reconnect.
func TestFeedReconnectMetric(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn, "metrics_feed_")
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg := prometheus.NewRegistry()
	e, err := engine.New(engine.Options{Store: st, Observer: metrics.New(reg), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SweepInterval: -1, FeedRetryInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(ctx)
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var channel []byte
	if err := admin.QueryRow(ctx, "SELECT value FROM "+pgx.Identifier{schema}.Sanitize()+".meta WHERE key = 'channel'").Scan(&channel); err != nil {
		t.Fatal(err)
	}
	listen := "LISTEN " + pgx.Identifier{string(channel)}.Sanitize()
	terminate := func() int {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = $1`, listen).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor(t, "the feed's connection terminated", func() bool { return terminate() > 0 })
	waitFor(t, "the feed reconnected", func() bool { return sample(t, reg, "mcptask_change_feed_reconnects_total") >= 1 })
}
