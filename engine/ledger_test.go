package engine_test

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

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// TestReconcileAtStartup: a task left unfinished with a submitted
// operation is reconciled before the recovery policy, at the start of an
// exclusive engine on its SQLite file, to what the system of record says.
func TestReconcileAtStartup(t *testing.T) {
	for _, c := range []struct {
		name      string
		answer    task.OpState
		err       error
		wantTask  task.Status
		wantOp    task.OpState
		wantRerun bool
	}{
		{"Confirmed", task.OpConfirmed, nil, task.Completed, task.OpConfirmed, false},
		{"Rejected", task.OpRejected, nil, task.Completed, task.OpRejected, true},
		{"Unknown", task.OpUnknown, nil, task.Failed, task.OpUnknown, false},
		{"Error", "", errors.New("system of record down"), task.Failed, task.OpUnknown, false},
		{"NoReconcile", "", engine.ErrNoReconcile, task.Failed, task.OpUnknown, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "engine.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			tk := task.New(task.Policy{}, "alice", "deploy", nil, time.Now())
			tk.Runner, tk.Attempts = "dead-engine", 1
			if err := st.Create(ctx, tk, store.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			op := &task.Operation{Key: "op-1", TaskID: tk.ID, Tool: "deploy", Owner: "alice", Effect: "deploy api", State: task.OpSubmitted, Receipt: "job-7"}
			if _, err := st.RecordOperation(ctx, op); err != nil {
				t.Fatal(err)
			}
			var asked []task.Operation
			reran := make(chan struct{}, 1)
			e, err := hooked(engine.Options{
				Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SweepInterval: -1, Exclusive: true,
			}, engine.Hooks{
				Reconcile: func(_ context.Context, _ *task.Task, op task.Operation) (task.OpState, string, error) {
					asked = append(asked, op)
					return c.answer, "asked", c.err
				},
				WorkOf: func(context.Context, *task.Task) engine.Work {
					return func(ctx context.Context) (json.RawMessage, error) {
						reran <- struct{}{}
						o, err := engine.FromContext(ctx).RecordOperation(ctx, engine.OperationSpec{Key: "op-1", Effect: "deploy api"})
						if err != nil {
							return nil, err
						}
						if o.Key() != "op-1#2" || o.State() != task.OpIntended {
							t.Errorf("re-run recorded %q in %s, want a new attempt op-1#2", o.Key(), o.State())
						}
						if err := o.Confirmed(ctx, "done"); err != nil {
							return nil, err
						}
						return json.RawMessage(`{"content":[]}`), nil
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Run(ctx); err != nil {
				t.Fatal(err)
			}
			defer e.Shutdown(ctx)
			got := waitStored(t, st, tk.ID)
			if got.Status != c.wantTask {
				t.Fatalf("task %s (%+v), want %s", got.Status, got.Error, c.wantTask)
			}
			if len(asked) != 1 || asked[0].Receipt != "job-7" {
				t.Errorf("reconcile asked about %+v", asked)
			}
			if (len(reran) == 1) != c.wantRerun {
				t.Errorf("re-run: %v, want %v", len(reran) == 1, c.wantRerun)
			}
			ops, _, err := st.Operations(ctx, store.OperationQuery{Owner: "alice"})
			if err != nil {
				t.Fatal(err)
			}
			var first *task.Operation
			for _, o := range ops {
				if o.Key == "op-1" {
					first = o
				}
			}
			if first == nil || first.State != c.wantOp {
				t.Fatalf("operation after recovery: %+v, want %s", first, c.wantOp)
			}
			if c.err != engine.ErrNoReconcile && first.ReconciledAt.IsZero() {
				t.Error("ReconciledAt not set")
			}
			switch c.wantTask {
			case task.Completed:
				if !c.wantRerun && !strings.Contains(string(got.Result), "Reconciled") || !c.wantRerun && !strings.Contains(string(got.Result), "job-7") {
					t.Errorf("result %s does not say it was reconciled, with the receipt", got.Result)
				}
			case task.Failed:
				if got.Error == nil || !strings.Contains(got.Error.Message, "outcome is unknown") {
					t.Errorf("error %+v", got.Error)
				}
			}
		})
	}
}

// TestLateReceipt: a receipt recorded by work whose task was taken over
// and settled meanwhile is still kept on the ledger.
func TestLateReceipt(t *testing.T) {
	e, st := newEngine(t, engine.Options{})
	ctx := context.Background()
	recorded := make(chan *engine.Op)
	release := make(chan struct{})
	tk, err := e.Start(ctx, engine.StartSpec{Tool: "deploy", Owner: "alice"}, func(ctx context.Context) (json.RawMessage, error) {
		o, err := engine.FromContext(ctx).RecordOperation(ctx, engine.OperationSpec{Effect: "deploy api"})
		if err != nil {
			return nil, err
		}
		if o.State() != task.OpIntended {
			t.Errorf("recorded in %s", o.State())
		}
		recorded <- o
		<-release
		return json.RawMessage(`{}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	o := <-recorded
	// The operation is durable before the side effect starts.
	ops, _, err := st.Operations(ctx, store.OperationQuery{TaskID: tk.ID})
	if err != nil || len(ops) != 1 || ops[0].State != task.OpIntended || ops[0].Owner != "alice" {
		t.Fatalf("ledger before the side effect: %v, %v", ops, err)
	}
	// Another engine settles it as unknown meanwhile (it took the task over).
	if _, err := st.UpdateOperation(ctx, o.Key(), func(op *task.Operation) error {
		return op.Move(task.OpRejected, "taken over", time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	var oe *task.OpError
	if err := o.Submitted(ctx, "job-late"); !errors.As(err, &oe) {
		t.Errorf("late receipt: err = %v, want a *task.OpError", err)
	}
	close(release)
	waitStored(t, st, tk.ID)
	ops, _, _ = st.Operations(ctx, store.OperationQuery{TaskID: tk.ID})
	if len(ops) != 1 || ops[0].Receipt != "job-late" || ops[0].State != task.OpRejected {
		t.Errorf("late receipt not kept: %+v", ops[0])
	}
	if got, err := e.LatestOperation(ctx, tk.ID); err != nil || got.Key != o.Key() {
		t.Errorf("LatestOperation = %+v, %v", got, err)
	}
}

// TestLedgerRetentionSweep: the sweeper deletes operations past the
// ledger's retention, never younger ones.
func TestLedgerRetentionSweep(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "engine.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	for key, age := range map[string]time.Duration{"old": 31 * 24 * time.Hour, "young": 29 * 24 * time.Hour} {
		if _, err := st.RecordOperation(ctx, &task.Operation{Key: key, TaskID: task.NewID(), Owner: "alice", CreatedAt: now.Add(-age), UpdatedAt: now.Add(-age)}); err != nil {
			t.Fatal(err)
		}
	}
	e, err := engine.New(engine.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SweepInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ops, _, err := st.Operations(ctx, store.OperationQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ops) == 1 && ops[0].Key == "young" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledger after sweeps: %d operations", len(ops))
		}
		time.Sleep(time.Millisecond)
	}
}

// waitStored waits until the stored task with id is terminal.
func waitStored(t *testing.T, st store.Store, id task.ID) *task.Task {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		tk, err := st.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Status.Terminal() {
			return tk
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("task %s never ended", id)
	return nil
}

// TestReconcileAtShutdown: work of a tool not re-runnable, stopped by
// shutdown after its operation was submitted, is reconciled instead of
// failed "outcome unknown" when the system of record confirms it.
func TestReconcileAtShutdown(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "engine.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := hooked(engine.Options{
		Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SweepInterval: -1,
	}, engine.Hooks{
		Reconcile: func(_ context.Context, _ *task.Task, op task.Operation) (task.OpState, string, error) {
			if op.Receipt != "r-1" {
				return task.OpUnknown, "", nil
			}
			return task.OpConfirmed, "applied", nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	submitted := make(chan struct{})
	tk, err := e.Start(ctx, engine.StartSpec{Tool: "deploy"}, func(ctx context.Context) (json.RawMessage, error) {
		o, err := engine.FromContext(ctx).RecordOperation(ctx, engine.OperationSpec{Effect: "deploy"})
		if err != nil {
			return nil, err
		}
		if err := o.Submitted(ctx, "r-1"); err != nil {
			return nil, err
		}
		close(submitted)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	<-submitted
	sctx, cancel := context.WithCancel(ctx)
	cancel() // no grace
	if err := e.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != task.Completed || !strings.Contains(string(got.Result), "r-1") {
		t.Fatalf("task after shutdown: %s %s %+v", got.Status, got.Result, got.Error)
	}
	ops, _, _ := st.Operations(ctx, store.OperationQuery{TaskID: tk.ID})
	if len(ops) != 1 || ops[0].State != task.OpConfirmed || ops[0].ReconciledAt.IsZero() {
		t.Errorf("operation after shutdown: %+v", ops)
	}
}

// TestReconcileOperations: an operator's reconciliation of a task's
// unsettled operations records every answer of the system of record for
// a task no engine runs (no runner), and only a confirmation for one
// with a runner, its lease lapsed or not (its work may still apply what
// the system has not seen; the takeover settles a dead one); the task
// itself is not changed.
func TestReconcileOperations(t *testing.T) {
	for _, c := range []struct {
		name   string
		lease  time.Duration // from now: negative lapsed
		answer task.OpState
		want   task.OpState
	}{
		{"no runner, rejected", 0, task.OpRejected, task.OpRejected},
		{"no runner, unknown", 0, task.OpUnknown, task.OpUnknown},
		{"running, confirmed", time.Hour, task.OpConfirmed, task.OpConfirmed},
		{"running, rejected", time.Hour, task.OpRejected, task.OpSubmitted},
		{"running, unknown", time.Hour, task.OpUnknown, task.OpSubmitted},
		{"lease lapsed, rejected", -time.Minute, task.OpRejected, task.OpSubmitted},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "engine.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			e, err := hooked(engine.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SweepInterval: -1}, engine.Hooks{
				Reconcile: func(context.Context, *task.Task, task.Operation) (task.OpState, string, error) {
					return c.answer, "asked", nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			tk := task.New(task.Policy{}, "alice", "deploy", nil, time.Now())
			tk.Runner, tk.Attempts, tk.LeaseExpiresAt = "another-engine", 1, time.Now().Add(c.lease)
			if c.lease == 0 {
				tk.Runner, tk.LeaseExpiresAt = "", time.Time{} // handed back: nobody runs it
			}
			if err := st.Create(ctx, tk, store.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.RecordOperation(ctx, &task.Operation{Key: "op-1", TaskID: tk.ID, Tool: "deploy", Owner: "alice", Effect: "deploy api", State: task.OpSubmitted, Receipt: "job-7"}); err != nil {
				t.Fatal(err)
			}
			if err := e.ReconcileOperations(ctx, tk); err != nil {
				t.Fatal(err)
			}
			ops, _, err := st.Operations(ctx, store.OperationQuery{Owner: "alice"})
			if err != nil || len(ops) != 1 || ops[0].State != c.want {
				t.Fatalf("the operation: %+v %v; want %s", ops, err, c.want)
			}
			if got, _ := st.Get(ctx, tk.ID); got.Status != task.Working {
				t.Fatalf("the task was changed: %s", got.Status)
			}
		})
	}
}
