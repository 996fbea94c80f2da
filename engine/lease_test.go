package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// sharedEngine starts a non-exclusive engine on its own connection to the
// SQLite file at path, as one of several engines sharing a store.
func sharedEngine(t *testing.T, path string, lease time.Duration, recover func(context.Context, *task.Task) engine.Runner) (*engine.Engine, *sqlite.Store) {
	t.Helper()
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Options{
		Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SweepInterval: -1, Lease: lease, Recover: recover,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Shutdown(context.Background())
		_ = st.Close()
	})
	return e, st
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestTakeoverAfterLeaseExpiry: a task held by an engine that died is left
// alone while its lease lives, then taken over and resolved by policy.
func TestTakeoverAfterLeaseExpiry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	ctx := context.Background()
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	dead := func(tool string) task.ID {
		tk := task.New(task.Policy{}, "", tool, nil, now)
		tk.Runner = "engine-that-died"
		tk.LeaseExpiresAt = now.Add(400 * time.Millisecond)
		tk.Attempts = 1
		if err := st.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
		return tk.ID
	}
	unsafe, safe := dead("unsafe"), dead("safe")
	st.Close()

	var reruns atomic.Int32
	e, st2 := sharedEngine(t, path, 150*time.Millisecond, func(_ context.Context, tk *task.Task) engine.Runner {
		if tk.Tool != "safe" {
			return nil
		}
		return func(context.Context) (json.RawMessage, error) {
			reruns.Add(1)
			return json.RawMessage(`{"content":[]}`), nil
		}
	})
	_ = e
	// The lease is alive: nothing happens to the tasks yet.
	if got, _ := st2.Get(ctx, unsafe); got.Status != task.Working || got.Runner != "engine-that-died" {
		t.Fatalf("task taken over before its lease expired: %+v", got)
	}
	waitFor(t, "takeover of both tasks", func() bool {
		a, _ := st2.Get(ctx, unsafe)
		b, _ := st2.Get(ctx, safe)
		return a.Status.Terminal() && b.Status.Terminal()
	})
	a, _ := st2.Get(ctx, unsafe)
	b, _ := st2.Get(ctx, safe)
	if a.Status != task.Failed || a.Error == nil || a.Error.Code != engine.CodeOutcomeUnknown {
		t.Errorf("non-re-runnable task after takeover = %+v", a)
	}
	if b.Status != task.Completed || b.Attempts != 2 || reruns.Load() != 1 {
		t.Errorf("re-runnable task after takeover = %+v (re-runs %d)", b, reruns.Load())
	}
}

// TestCancelReachesAnotherEngine: a task cancelled through engine B stops
// the work running on engine A (by the heartbeat's polling: SQLite has no
// change feed).
func TestCancelReachesAnotherEngine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	a, _ := sharedEngine(t, path, 150*time.Millisecond, nil)
	b, _ := sharedEngine(t, path, 150*time.Millisecond, nil)
	ctx := context.Background()
	started, stopped := make(chan struct{}), make(chan error, 1)
	tk, err := a.Start(ctx, engine.StartSpec{Tool: "t"}, func(ctx context.Context) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		stopped <- ctx.Err()
		return nil, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if got, err := b.Cancel(ctx, "", tk.ID); err != nil || got.Status != task.Cancelled {
		t.Fatalf("Cancel through B = %+v, %v", got, err)
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("work stopped with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the work on engine A never saw the cancellation")
	}
	if got, _ := a.Get(ctx, "", tk.ID); got.Status != task.Cancelled {
		t.Errorf("status = %s", got.Status)
	}
}

// TestHandBackOnShutdown: re-runnable work of an engine that shuts down is
// taken over by another engine at once, not after a lease.
func TestHandBackOnShutdown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	ran := make(chan string, 4)
	recover := func(_ context.Context, tk *task.Task) engine.Runner {
		return func(ctx context.Context) (json.RawMessage, error) {
			ran <- "rerun"
			return json.RawMessage(`{"content":[]}`), nil
		}
	}
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := engine.New(engine.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SweepInterval: -1, Lease: time.Hour, Recover: recover})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	started := make(chan struct{})
	tk, err := a.Start(ctx, engine.StartSpec{Tool: "safe"}, func(ctx context.Context) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	sctx, cancel := context.WithCancel(ctx)
	cancel()
	_ = a.Shutdown(sctx) // no grace: hand the work back
	st.Close()
	// A lease of an hour: only a hand-back lets B take the task at once.
	_, st2 := sharedEngine(t, path, time.Hour, recover)
	waitFor(t, "re-run on the other engine", func() bool {
		got, _ := st2.Get(ctx, tk.ID)
		return got.Status == task.Completed
	})
	if got := <-ran; got != "rerun" {
		t.Fatal(got)
	}
}

// TestIdempotentStart: a retried Start with the same key returns the first
// task and does not run the work again.
func TestIdempotentStart(t *testing.T) {
	e, _ := newEngine(t, engine.Options{})
	ctx := context.Background()
	var runs atomic.Int32
	work := func(context.Context) (json.RawMessage, error) {
		runs.Add(1)
		return json.RawMessage(`{"content":[]}`), nil
	}
	first, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "t", IdempotencyKey: "k1"}, work)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "t", IdempotencyKey: "k1"}, work)
	if err != nil || again.ID != first.ID {
		t.Fatalf("retry = %v, %v; want task %s", again, err, first.ID)
	}
	other, err := e.Start(ctx, engine.StartSpec{Owner: "bob", Tool: "t", IdempotencyKey: "k1"}, work)
	if err != nil || other.ID == first.ID {
		t.Fatalf("another owner's key reached alice's task: %v, %v", other, err)
	}
	if _, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "u", IdempotencyKey: "k1"}, work); !errors.Is(err, engine.ErrIdempotencyConflict) {
		t.Fatalf("key reused for another tool: %v", err)
	}
	for _, w := range []struct {
		owner string
		id    task.ID
	}{{"alice", first.ID}, {"bob", other.ID}} {
		waitFor(t, "the tasks to end", func() bool {
			g, err := e.Get(ctx, w.owner, w.id)
			return err == nil && g.Status.Terminal()
		})
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("work ran %d times, want 2 (alice once, bob once)", n)
	}
}
