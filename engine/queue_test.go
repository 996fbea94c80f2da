package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// queuedEngine runs an engine on a new SQLite file with the queue "q"
// capped at 1, whose WorkOf builds work that reports "rebuilt".
func queuedEngine(t *testing.T, ran func(string)) *engine.Engine {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "engine.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e, err := hooked(engine.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SweepInterval: -1, Exclusive: true}, engine.Hooks{
		WorkOf: func(context.Context, *task.Task) engine.Work {
			return func(context.Context) (json.RawMessage, error) { ran("rebuilt"); return json.RawMessage(`{}`), nil }
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetQueue("q", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return e
}

// TestQueuedWorkRunsLocally: a task created waiting runs, once a slot
// frees, the very work given to Start on the engine that created it (with
// its request's values), not work rebuilt from the stored call; a task
// cancelled while it waits never runs.
func TestQueuedWorkRunsLocally(t *testing.T) {
	var mu sync.Mutex
	var runs []string
	ran := func(s string) { mu.Lock(); runs = append(runs, s); mu.Unlock() }
	e := queuedEngine(t, ran)
	ctx := context.Background()
	release := make(chan struct{})
	first, err := e.Start(ctx, engine.StartSpec{Tool: "t", Queue: "q", Request: json.RawMessage(`{}`)}, func(context.Context) (json.RawMessage, error) {
		<-release
		ran("first")
		return json.RawMessage(`{}`), nil
	})
	if err != nil || first.Queued {
		t.Fatalf("first task: %+v, %v; want it running", first, err)
	}
	start := func(name string) *task.Task {
		tk, err := e.Start(ctx, engine.StartSpec{Tool: "t", Queue: "q", Request: json.RawMessage(`{}`)}, func(context.Context) (json.RawMessage, error) {
			ran(name)
			return json.RawMessage(`{}`), nil
		})
		if err != nil || !tk.Queued || tk.Status != task.Working {
			t.Fatalf("task %s beyond the cap: %+v, %v; want working, waiting", name, tk, err)
		}
		return tk
	}
	second, third := start("second"), start("third")
	if third.StatusMessage != "queued: 1 ahead" {
		t.Errorf("third task: %q", third.StatusMessage)
	}
	if _, err := e.Cancel(ctx, "", second.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	for _, tk := range []*task.Task{first, third} {
		if got := waitTerminal(t, e, tk.ID); got.Status != task.Completed {
			t.Errorf("task: %+v", got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 2 || runs[0] != "first" || runs[1] != "third" {
		t.Errorf("runs %v, want [first third]: the waiting task's own work, the cancelled one never", runs)
	}
	if _, err := e.Start(ctx, engine.StartSpec{Tool: "t", Queue: "nope"}, nil); !errors.Is(err, engine.ErrNoQueue) {
		t.Errorf("Start in an undeclared queue: %v, want ErrNoQueue", err)
	}
	if err := e.SetQueue("late", 1); err == nil {
		t.Error("SetQueue after Run succeeded")
	}
}

// TestUndeclaredQueueStarts: tasks left waiting in a queue that the
// restarted engine no longer declares (its cap was removed) start at Run,
// instead of waiting for ever.
func TestUndeclaredQueueStarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "engine.db")
	open := func() *sqlite.Store {
		st, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := open()
	e, err := engine.New(engine.Options{Store: st, Logger: logger, SweepInterval: -1, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetQueue("q", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	block := func(ctx context.Context) (json.RawMessage, error) { <-ctx.Done(); return nil, ctx.Err() }
	if _, err := e.Start(ctx, engine.StartSpec{Tool: "t", Queue: "q", Request: json.RawMessage(`{}`)}, block); err != nil {
		t.Fatal(err)
	}
	waiting, err := e.Start(ctx, engine.StartSpec{Tool: "t", Queue: "q", Request: json.RawMessage(`{}`)}, block)
	if err != nil || !waiting.Queued {
		t.Fatalf("second task: %+v, %v; want it waiting", waiting, err)
	}
	stop, cancel := context.WithCancel(ctx)
	cancel()
	_ = e.Shutdown(stop)
	st.Close()

	ran := make(chan string, 1)
	st = open()
	t.Cleanup(func() { st.Close() })
	e2, err := hooked(engine.Options{Store: st, Logger: logger, SweepInterval: -1, Exclusive: true}, engine.Hooks{
		WorkOf: func(_ context.Context, tk *task.Task) engine.Work {
			return func(context.Context) (json.RawMessage, error) {
				ran <- string(tk.ID)
				return json.RawMessage(`{}`), nil
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.Run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e2.Shutdown(context.Background()) })
	if id := <-ran; id != string(waiting.ID) {
		t.Errorf("ran %s, want the waiting task %s", id, waiting.ID)
	}
	if got := waitTerminal(t, e2, waiting.ID); got.Status != task.Completed {
		t.Errorf("the waiting task: %+v", got)
	}
}

// cancelOnStart is a store on which the task victim, when StartQueued
// starts it, is cancelled (as by another instance) before the engine gets
// it back: the window between a start and the run's registration.
type cancelOnStart struct {
	*sqlite.Store
	victim *atomic.Value // task.ID
}

func (s cancelOnStart) StartQueued(ctx context.Context, req store.QueueRequest) ([]*task.Task, error) {
	started, err := s.Store.StartQueued(ctx, req)
	for _, t := range started {
		if id, _ := s.victim.Load().(task.ID); id == t.ID {
			if _, err := s.Store.Update(ctx, t.ID, func(t *task.Task) error { return t.Cancel("cancelled elsewhere", time.Now()) }); err != nil {
				return nil, err
			}
		}
	}
	return started, err
}

// TestCancelRacingQueueStart: a waiting task cancelled just as it leaves
// its queue (before its run is registered, so the cancel found nothing
// to stop) never runs its work.
func TestCancelRacingQueueStart(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "engine.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	victim := &atomic.Value{}
	e, err := engine.New(engine.Options{Store: cancelOnStart{st, victim}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SweepInterval: -1, Exclusive: true, QueueInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetQueue("q", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	ctx := context.Background()
	release := make(chan struct{})
	spec := engine.StartSpec{Tool: "t", Queue: "q", Request: json.RawMessage(`{}`)}
	first, err := e.Start(ctx, spec, func(context.Context) (json.RawMessage, error) {
		<-release
		return json.RawMessage(`{}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Bool
	second, err := e.Start(ctx, spec, func(context.Context) (json.RawMessage, error) {
		ran.Store(true)
		return json.RawMessage(`{}`), nil
	})
	if err != nil || !second.Queued {
		t.Fatalf("second task: %+v, %v", second, err)
	}
	victim.Store(second.ID)
	third, err := e.Start(ctx, spec, func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{}`), nil })
	if err != nil || !third.Queued {
		t.Fatalf("third task: %+v, %v", third, err)
	}
	close(release)
	waitTerminal(t, e, first.ID)
	if got := waitTerminal(t, e, second.ID); got.Status != task.Cancelled {
		t.Errorf("second task: %+v, want cancelled", got)
	}
	// The third starts in a later round of the queue service than the
	// one that started (and dropped) the second.
	if got := waitTerminal(t, e, third.ID); got.Status != task.Completed {
		t.Errorf("third task: %+v", got)
	}
	if ran.Load() {
		t.Error("the work of a task cancelled as it left its queue ran")
	}
}
