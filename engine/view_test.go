package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// storeCalls is an Observer that counts the store calls by op.
type storeCalls struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *storeCalls) StoreCall(op string, _ time.Duration, _ error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[op]++
}

// take returns the counts since the last take.
func (o *storeCalls) take() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := o.n
	o.n = nil
	return n
}

func (*storeCalls) TaskCreated(string)                               {}
func (*storeCalls) TaskFinished(string, task.Outcome, time.Duration) {}
func (*storeCalls) QueueWaited(string, time.Duration)                {}
func (*storeCalls) CallRouted(string, string)                        {}
func (*storeCalls) Request(string, string)                           {}
func (*storeCalls) Denied(string)                                    {}
func (*storeCalls) Limited(string)                                   {}
func (*storeCalls) TaskRefused(string, string)                       {}
func (*storeCalls) PollRaised()                                      {}
func (*storeCalls) FeedReconnect()                                   {}
func (*storeCalls) TaskTakenOver(string, string)                     {}

// TestView: Engine.View answers what Get, LatestOperation and
// LogPosition answer, in one read, and refuses exactly as Get refuses (another owner's,
// an unknown, an expired task).
func TestView(t *testing.T) {
	clk := &clock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	sq, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	st := sq
	calls := &storeCalls{}
	e, err := engine.New(engine.Options{Store: st, Logger: slog.New(slog.DiscardHandler), SweepInterval: -1,
		Now: clk.Now, Policy: task.Policy{DefaultTTL: time.Minute}, Observer: calls})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	ctx := context.Background()
	tk, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "deploy"}, func(ctx context.Context) (json.RawMessage, error) {
		h := engine.FromContext(ctx)
		for _, eff := range []string{"first", "second"} {
			if _, err := h.RecordOperation(ctx, engine.OperationSpec{Key: eff, Effect: eff}); err != nil {
				return nil, err
			}
		}
		h.Log("stdout", "one\ntwo")
		return json.RawMessage(`{"content":[],"isError":true}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the task to end", func() bool {
		got, err := e.Get(ctx, "alice", tk.ID)
		return err == nil && got.Status.Terminal()
	})

	// One store call. The engine's background work (a log flush, say)
	// may read too while View runs: a View alone in its window shows
	// its own calls, and one of a few is.
	want := map[string]int{"view": 1}
	var got *store.View
	var n map[string]int
	for range 5 {
		calls.take()
		got, err = e.View(ctx, "alice", tk.ID, store.ViewOptions{Result: true})
		if err != nil {
			t.Fatal(err)
		}
		n = calls.take()
		for op := range n {
			if op != "get" && op != "view" {
				delete(n, op) // the engine's background calls, if any
			}
		}
		if reflect.DeepEqual(n, want) {
			break
		}
	}
	if !reflect.DeepEqual(n, want) {
		t.Errorf("store calls of View: %v, want %v", n, want)
	}
	whole, err := e.Get(ctx, "alice", tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Task.Status != task.Completed || string(got.Task.Result) != string(whole.Result) ||
		got.Task.Owner != whole.Owner || got.Task.Tool != whole.Tool || !got.Task.LastUpdatedAt.Equal(whole.LastUpdatedAt) {
		t.Errorf("View's task = %+v, want %+v", got.Task, whole)
	}
	op, err := e.LatestOperation(ctx, tk.ID)
	if err != nil || op == nil {
		t.Fatalf("LatestOperation = %v, %v", op, err)
	}
	if got.Operation == nil || got.Operation.Key != op.Key || got.Operation.Key != "second" {
		t.Errorf("View's operation = %+v, want %+v", got.Operation, op)
	}
	pos, err := e.LogPosition(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Log, pos) || pos.Last != 2 {
		t.Errorf("View's log position = %+v, want %+v (2 lines)", got.Log, pos)
	}

	// The refusals are Get's, word for word.
	same := func(what string, owner task.Owner, id task.ID) {
		t.Helper()
		_, gerr := e.Get(ctx, owner, id)
		v, verr := e.View(ctx, owner, id, store.ViewOptions{})
		var nf *engine.NotFoundError
		if v != nil || !errors.As(verr, &nf) || !errors.Is(verr, engine.ErrNotFound) || !reflect.DeepEqual(verr, gerr) {
			t.Errorf("View of %s = %+v, %#v; want Get's error %#v", what, v, verr, gerr)
		}
	}
	same("another owner's task", "mallory", tk.ID)
	same("an unknown task", "alice", task.NewID())
	clk.Add(time.Minute + time.Millisecond)
	same("an expired task", "alice", tk.ID)
}

// TestViewSpan: a View in a caller's trace is one span,
// mcptask.store.view, a child of the caller's, naming the operation and
// the task; an unknown task is no failure of the store; outside a trace
// there is no span.
func TestViewSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e, _ := newHookedEngine(t, engine.Options{}, engine.Hooks{TracerProvider: tp})
	ctx := context.Background()
	tk, err := e.Start(ctx, engine.StartSpec{Tool: "t"}, func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[]}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, e, tk.ID)
	if _, err := e.View(ctx, "", tk.ID, store.ViewOptions{}); err != nil { // outside any trace
		t.Fatal(err)
	}
	tctx, parent := tp.Tracer("test").Start(ctx, "caller")
	if _, err := e.View(tctx, "", tk.ID, store.ViewOptions{Result: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.View(tctx, "", task.NewID(), store.ViewOptions{}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("View of an unknown task: %v", err)
	}
	parent.End()
	var views []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "mcptask.store.view" {
			views = append(views, s)
		}
	}
	if len(views) != 2 {
		t.Fatalf("%d mcptask.store.view spans, want 2 (the traced views)", len(views))
	}
	for _, s := range views {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.Status().Code == codes.Error {
			t.Errorf("view span: parent %s, status %v; want the caller's, no error", s.Parent().SpanID(), s.Status())
		}
		if got := spanAttr(s, "db.operation.name"); got != "view" {
			t.Errorf("view span's db.operation.name = %q", got)
		}
	}
	if got := spanAttr(views[0], "mcptask.task.id"); got != string(tk.ID) {
		t.Errorf("view span's task = %q, want %s", got, tk.ID)
	}
}
