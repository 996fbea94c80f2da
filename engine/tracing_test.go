package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
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

// failingGets is a store whose Get fails while fail is set.
type failingGets struct {
	store.Store
	fail chan struct{} // closed: Get fails
}

var errDiskGone = errors.New("disk gone")

func (s *failingGets) Get(ctx context.Context, id task.ID) (*task.Task, error) {
	select {
	case <-s.fail:
		return nil, errDiskGone
	default:
		return s.Store.Get(ctx, id)
	}
}

func (s *failingGets) DBSystem() string { return s.Store.(store.Systemer).DBSystem() }

func hasSpan(rec *tracetest.SpanRecorder, name string) bool {
	for _, s := range rec.Ended() {
		if s.Name() == name {
			return true
		}
	}
	return false
}

func spanAttr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// TestStoreSpans: with a TracerProvider, each store operation of the
// engine in a caller's trace is a span of its own, a child of the
// caller's, with the database system, the operation and the task (none
// outside a trace); a failure of the store is recorded as the span's
// error, an answer that is the caller's concern (not found) is not.
func TestStoreSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "engine.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	fs := &failingGets{Store: st, fail: make(chan struct{})}
	// FinishWithin off: the outcome is a write (an update span) of its own.
	e, err := engine.New(engine.Options{Store: fs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SweepInterval: -1, Exclusive: true, FinishWithin: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetHooks(engine.Hooks{TracerProvider: tp}); err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	if err := e.SetHooks(engine.Hooks{}); err == nil {
		t.Error("SetHooks after Run: no error")
	}

	ctx, parent := tp.Tracer("test").Start(context.Background(), "caller")
	tk, err := e.Start(ctx, engine.StartSpec{Tool: "t"}, func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[]}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, e, tk.ID)
	if _, err := e.Get(context.Background(), "", tk.ID); err != nil { // outside any trace: no span
		t.Fatal(err)
	}
	if _, err := e.Get(ctx, "", "no-such-task"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Get of an unknown task: %v", err)
	}
	close(fs.fail)
	if _, err := e.Get(ctx, "", tk.ID); !errors.Is(err, errDiskGone) {
		t.Fatalf("Get on a failing store: %v", err)
	}
	parent.End()

	// The outcome's update span ends just after the write the task's end
	// was seen by.
	deadline := time.Now().Add(20 * time.Second)
	for !hasSpan(rec, "mcptask.store.update") {
		if time.Now().After(deadline) {
			t.Fatal("no mcptask.store.update span for the outcome")
		}
		time.Sleep(time.Millisecond) // polling the recorder, not timing the test
	}
	var create sdktrace.ReadOnlySpan
	var gets []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "mcptask.store.create":
			create = s
		case "mcptask.store.get":
			if s.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Errorf("a store get span outside the caller's trace: parent %s", s.Parent().SpanID())
			}
			gets = append(gets, s)
		}
	}
	if create == nil {
		t.Fatal("no mcptask.store.create span")
	}
	if create.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("create span's parent %s, want the caller's %s", create.Parent().SpanID(), parent.SpanContext().SpanID())
	}
	for key, want := range map[string]string{"db.system.name": "sqlite", "db.operation.name": "create", "mcptask.task.id": string(tk.ID)} {
		if got := spanAttr(create, key); got != want {
			t.Errorf("create span %s = %q, want %q", key, got, want)
		}
	}
	var notFound, failed sdktrace.ReadOnlySpan
	for _, s := range gets {
		switch spanAttr(s, "mcptask.task.id") {
		case "no-such-task":
			notFound = s
		case string(tk.ID):
			if s.Status().Code == codes.Error {
				failed = s
			}
		}
	}
	if notFound == nil || notFound.Status().Code == codes.Error {
		t.Errorf("get of an unknown task: span %v", notFound)
	}
	if failed == nil {
		t.Fatal("no get span with the store's failure")
	}
	if failed.Status().Description != errDiskGone.Error() || len(failed.Events()) == 0 || failed.Events()[0].Name != "exception" {
		t.Errorf("failed get span: status %+v, events %v", failed.Status(), failed.Events())
	}
}

// TestStoreSpansOff: without a TracerProvider the engine makes no store
// span, even for a caller whose span records.
func TestStoreSpansOff(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e, _ := newEngine(t, engine.Options{})
	ctx, parent := tp.Tracer("test").Start(context.Background(), "caller")
	tk, err := e.Start(ctx, engine.StartSpec{Tool: "t"}, func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[]}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, e, tk.ID)
	parent.End()
	if n := len(rec.Ended()); n != 1 {
		t.Errorf("%d spans ended, want only the caller's", n)
	}
}
