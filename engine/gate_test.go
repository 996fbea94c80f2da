package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/pgtest"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/postgres"
	"github.com/mcptask/mcptask/task"
)

// gateEngines runs n engines on one new PostgreSQL schema whose WorkOf
// counts the runs of a held task's work in runs and returns {"ok":true}.
func gateEngines(t *testing.T, n int, runs *atomic.Int64) []*engine.Engine {
	t.Helper()
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn, "engine_gate_")
	var out []*engine.Engine
	for range n {
		st, err := postgres.Open(context.Background(), dsn, &postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		e, err := hooked(engine.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SweepInterval: -1}, engine.Hooks{
			WorkOf: func(context.Context, *task.Task) engine.Work {
				return func(context.Context) (json.RawMessage, error) {
					runs.Add(1)
					return json.RawMessage(`{"ok":true}`), nil
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
		out = append(out, e)
	}
	return out
}

// TestGateReleaseOnce: a task started with a Gate is created held
// (working, queued in the gate, no runner, not started, the gate's
// message), its work not run; twenty Releases racing on two engines
// sharing PostgreSQL start it exactly once (one run, Attempts 1), and the
// losers get a *NotHeldError with the task as it is.
func TestGateReleaseOnce(t *testing.T) {
	var runs atomic.Int64
	es := gateEngines(t, 2, &runs)
	ctx := context.Background()
	tk, err := es[0].Start(ctx, engine.StartSpec{Owner: "alice", Tool: "deploy", Request: json.RawMessage(`{}`), Gate: engine.GatePrefix + "approval", GateMessage: "waiting for approval by bob"},
		func(context.Context) (json.RawMessage, error) {
			t.Error("the work given to Start ran")
			return nil, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if !engine.Held(tk, engine.GatePrefix+"approval") || tk.Runner != "" || tk.Attempts != 0 || tk.StatusMessage != "waiting for approval by bob" || tk.Status != task.Working {
		t.Fatalf("the held task: %+v", tk)
	}
	held, _, err := es[1].Store().Browse(ctx, store.BrowseQuery{Waiting: engine.GatePrefix + "approval"})
	if err != nil || len(held) != 1 || held[0].ID != tk.ID {
		t.Fatalf("HeldTasks on the other engine: %v, %v", held, err)
	}
	var wg sync.WaitGroup
	var won, lost atomic.Int64
	for i := range 20 {
		wg.Go(func() {
			_, err := es[i%2].Release(ctx, tk.ID, engine.GatePrefix+"approval", "", "approved")
			var nh *engine.NotHeldError
			switch {
			case err == nil:
				won.Add(1)
			case errors.As(err, &nh):
				lost.Add(1)
			default:
				t.Errorf("Release: %v", err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 || lost.Load() != 19 {
		t.Fatalf("releases: %d won, %d not held; want 1 and 19", won.Load(), lost.Load())
	}
	var done *task.Task
	deadline := time.Now().Add(30 * time.Second)
	for done == nil || !done.Status.Terminal() {
		if time.Now().After(deadline) {
			t.Fatalf("the released task did not end: %+v", done)
		}
		done, err = es[0].Get(ctx, "alice", tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !done.Status.Terminal() {
			time.Sleep(10 * time.Millisecond) // poll interval, not synchronization
		}
	}
	if done.Status != task.Completed || done.Attempts != 1 || runs.Load() != 1 {
		t.Fatalf("the released task: %s, %d attempts, %d runs; want completed, 1, 1", done.Status, done.Attempts, runs.Load())
	}
	if held, _, _ := es[0].Store().Browse(ctx, store.BrowseQuery{Waiting: engine.GatePrefix + "approval"}); len(held) != 0 {
		t.Fatalf("still held: %v", held)
	}
}

// TestGateResolve: Resolve ends a held task without running its work,
// once: a second Resolve, and a Release after it, are *NotHeldError; a
// Resolve that leaves the task unfinished is refused and changes nothing;
// a task of a gate is never started by the queue service, nor by an
// exclusive engine's start-up (the gate is not an undeclared queue).
func TestGateResolve(t *testing.T) {
	var runs atomic.Int64
	es := gateEngines(t, 1, &runs)
	e := es[0]
	ctx := context.Background()
	gate := engine.GatePrefix + "handoff"
	tk, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "deploy", Request: json.RawMessage(`{}`), Gate: gate, GateMessage: "waiting for an operator"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Resolve(ctx, tk.ID, gate, func(*task.Task, time.Time) error { return nil }); err == nil {
		t.Fatal("a Resolve that left the task unfinished returned nil")
	}
	got, err := e.Resolve(ctx, tk.ID, gate, func(t *task.Task, now time.Time) error {
		return t.Complete(json.RawMessage(`{"content":[{"type":"text","text":"done by hand"}]}`), now)
	})
	if err != nil || got.Status != task.Completed || got.Queued || got.Queue != "" {
		t.Fatalf("Resolve: %+v, %v", got, err)
	}
	var nh *engine.NotHeldError
	if _, err := e.Resolve(ctx, tk.ID, gate, func(t *task.Task, now time.Time) error { return t.Cancel("x", now) }); !errors.As(err, &nh) || nh.Task.Status != task.Completed {
		t.Fatalf("a second Resolve: %v", err)
	}
	if _, err := e.Release(ctx, tk.ID, gate, "", "late"); !errors.As(err, &nh) {
		t.Fatalf("a Release after the Resolve: %v", err)
	}
	if err := e.SetQueue(engine.GatePrefix+"x", 1); err == nil {
		t.Error("SetQueue of a gate's name returned nil")
	}
	if runs.Load() != 0 {
		t.Fatalf("the held task's work ran %d times", runs.Load())
	}
	// Exclusive start-up over a held task: it stays held.
	st, ok := e.Store().(*postgres.Store)
	if !ok {
		t.Fatal("not the PostgreSQL store")
	}
	tk2, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "deploy", Request: json.RawMessage(`{}`), Gate: gate, GateMessage: "waiting"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := hooked(engine.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SweepInterval: -1, Exclusive: true}, engine.Hooks{
		WorkOf: func(context.Context, *task.Task) engine.Work {
			return func(context.Context) (json.RawMessage, error) { runs.Add(1); return nil, nil }
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer ex.Shutdown(ctx)
	again, err := st.Get(ctx, tk2.ID)
	if err != nil || !engine.Held(again, gate) || runs.Load() != 0 {
		t.Fatalf("after an exclusive start-up: %+v, %v, %d runs", again, err, runs.Load())
	}
}

// TestGateReleaseAfterShutdown: a Release once Shutdown began is
// ErrClosed and leaves the task held (another engine releases it).
func TestGateReleaseAfterShutdown(t *testing.T) {
	var runs atomic.Int64
	es := gateEngines(t, 2, &runs)
	ctx := context.Background()
	gate := engine.GatePrefix + "approval"
	tk, err := es[0].Start(ctx, engine.StartSpec{Owner: "alice", Tool: "deploy", Request: json.RawMessage(`{}`), Gate: gate, GateMessage: "waiting"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := es[0].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := es[0].Release(ctx, tk.ID, gate, "", "approved"); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Release after Shutdown: %v; want ErrClosed", err)
	}
	cur, err := es[1].Get(ctx, "alice", tk.ID)
	if err != nil || !engine.Held(cur, gate) {
		t.Fatalf("the task after the refused release: %+v %v; want it held", cur, err)
	}
	if _, err := es[1].Release(ctx, tk.ID, gate, "", "approved"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for runs.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the released task never ran on the other engine")
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronization
	}
}
