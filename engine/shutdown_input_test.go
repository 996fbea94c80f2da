package engine_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// TestShutdownDoesNotWaitForInput: work waiting for the client's input
// cannot finish within a shutdown grace, so Shutdown stops it at once
// (it waited the whole grace, then failed every such task "outcome
// unknown"): a re-runnable task is handed back, any other fails with a
// message that says the shutdown, not the tool, ended it.
func TestShutdownDoesNotWaitForInput(t *testing.T) {
	for _, rerunnable := range []bool{false, true} {
		var recover func(context.Context, *task.Task) engine.Work
		if rerunnable {
			recover = func(context.Context, *task.Task) engine.Work {
				return func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }
			}
		}
		e, st := newHookedEngine(t, engine.Options{}, engine.Hooks{Recover: recover})
		ctx := context.Background()
		asked := make(chan struct{})
		tk, err := e.Start(ctx, engine.StartSpec{Tool: "deploy"}, func(ctx context.Context) (json.RawMessage, error) {
			h := engine.FromContext(ctx)
			go func() {
				for {
					if cur, err := st.Get(ctx, h.TaskID()); err == nil && cur.Status == task.InputRequired {
						close(asked)
						return
					}
					select {
					case <-ctx.Done():
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			}()
			return h.RequestInput(ctx, json.RawMessage(`{"method":"elicitation/create","params":{"message":"Deploy?"}}`))
		})
		if err != nil {
			t.Fatal(err)
		}
		<-asked
		done := make(chan error, 1)
		go func() { done <- e.Shutdown(context.Background()) }() // no deadline: only the waiting work could hold it
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("rerunnable=%v: Shutdown (without a deadline) waited for a task that waits for input", rerunnable)
		}
		got, err := st.Get(ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rerunnable {
			if got.Status.Terminal() || got.Runner != "" {
				t.Errorf("re-runnable task after shutdown: %s, runner %q; want it handed back", got.Status, got.Runner)
			}
			continue
		}
		if got.Status != task.Failed || !strings.Contains(got.StatusMessage, "shut down") || !strings.Contains(got.StatusMessage, "not the tool") {
			t.Errorf("task after shutdown: %s %q; want failed, saying the shutdown ended it", got.Status, got.StatusMessage)
		}
	}
}

// countingHeartbeats is the real store, counting the Heartbeat calls.
type countingHeartbeats struct {
	store.Store
	calls atomic.Int64
}

func (s *countingHeartbeats) Heartbeat(ctx context.Context, runner string, ids []task.ID, until time.Time) ([]task.ID, error) {
	s.calls.Add(1)
	return s.Store.Heartbeat(ctx, runner, ids, until)
}

// TestHandedBackTaskStaysHandedBack: at shutdown, a re-runnable task
// waiting for input is handed back at once while Shutdown waits for other
// work. The engine's takeover service must not claim it again meanwhile:
// it re-ran it, handed it back again, and counted a start each time, until
// the task failed "started 3 times".
func TestHandedBackTaskStaysHandedBack(t *testing.T) {
	lite, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	st := &countingHeartbeats{Store: lite}
	rerun := func(context.Context, *task.Task) engine.Work {
		return func(ctx context.Context) (json.RawMessage, error) {
			return engine.FromContext(ctx).RequestInput(ctx, json.RawMessage(`{"method":"elicitation/create","params":{"message":"again?"}}`))
		}
	}
	e, err := hooked(engine.Options{Store: st, Logger: slog.New(slog.DiscardHandler), Exclusive: true, SweepInterval: -1,
		Lease: 200 * time.Millisecond, HeartbeatInterval: 20 * time.Millisecond, ClaimInterval: 20 * time.Millisecond}, engine.Hooks{Recover: rerun})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	asking, err := e.Start(ctx, engine.StartSpec{Tool: "ask"}, rerun(ctx, nil))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "input_required", func() bool {
		cur, err := lite.Get(ctx, asking.ID)
		return err == nil && cur.Status == task.InputRequired
	})
	release := make(chan struct{})
	if _, err := e.Start(ctx, engine.StartSpec{Tool: "slow"}, func(context.Context) (json.RawMessage, error) {
		<-release
		return json.RawMessage(`{}`), nil
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Shutdown(ctx) }()
	waitFor(t, "the waiting task handed back", func() bool {
		cur, err := lite.Get(ctx, asking.ID)
		return err == nil && cur.Runner == ""
	})
	// Many rounds of the background services (the heartbeat and the
	// takeover run at the same interval) while Shutdown waits.
	from := st.calls.Load()
	waitFor(t, "heartbeat rounds during the shutdown", func() bool { return st.calls.Load() >= from+10 })
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cur, err := lite.Get(ctx, asking.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Status.Terminal() || cur.Runner != "" || cur.Attempts != 1 {
		t.Fatalf("the handed-back task after shutdown: %s, runner %q, %d starts; want it handed back once, started once", cur.Status, cur.Runner, cur.Attempts)
	}
}
