package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newEngine(t *testing.T, opts engine.Options) (*engine.Engine, *sqlite.Store) {
	t.Helper()
	return newHookedEngine(t, opts, engine.Hooks{})
}

// newHookedEngine is newEngine with hooks installed before Run.
func newHookedEngine(t *testing.T, opts engine.Options, hooks engine.Hooks) (*engine.Engine, *sqlite.Store) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "engine.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	opts.Store = st
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.SweepInterval = -1
	e, err := hooked(opts, hooks)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return e, st
}

// waitStatus polls the engine until the task reaches a terminal status.
func waitTerminal(t *testing.T, e *engine.Engine, id task.ID) *task.Task {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		tk, err := e.Get(context.Background(), "", id)
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

func TestExpiryAndSweep(t *testing.T) {
	clk := &clock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	e, _ := newEngine(t, engine.Options{Now: clk.Now, Policy: task.Policy{DefaultTTL: time.Minute}})
	ctx := context.Background()
	tk, err := e.Start(ctx, engine.StartSpec{Tool: "t"}, func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[]}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, e, tk.ID)
	if n := engine.SweepNow(e, ctx); n != 0 {
		t.Fatalf("swept %d tasks before their TTL", n)
	}
	clk.Add(time.Minute + time.Millisecond)
	if _, err := e.Get(ctx, "", tk.ID); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("expired task: err = %v, want ErrNotFound", err)
	}
	if n := engine.SweepNow(e, ctx); n != 1 {
		t.Fatalf("swept %d, want 1", n)
	}
}

func TestOwnerBinding(t *testing.T) {
	e, _ := newEngine(t, engine.Options{})
	ctx := context.Background()
	release := make(chan struct{})
	tk, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "t"}, func(ctx context.Context) (json.RawMessage, error) {
		<-release
		return json.RawMessage(`{}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer close(release)
	// Every refusal is ErrNotFound to the caller, and says why to the
	// audit trail: another owner's task, or no task at all.
	otherOwner := func(op string, err error) {
		t.Helper()
		var nf *engine.NotFoundError
		if !errors.Is(err, engine.ErrNotFound) || !errors.As(err, &nf) || nf.Reason != audit.ReasonOtherOwner || nf.Owner != "alice" {
			t.Errorf("%s by another owner: %#v, want a NotFoundError of reason %s naming alice", op, err, audit.ReasonOtherOwner)
		}
	}
	_, err = e.Get(ctx, "mallory", tk.ID)
	otherOwner("Get", err)
	_, err = e.Cancel(ctx, "mallory", tk.ID)
	otherOwner("Cancel", err)
	_, _, err = e.Respond(ctx, "mallory", tk.ID, map[string]json.RawMessage{"k": json.RawMessage(`{}`)}, nil)
	otherOwner("Respond", err)
	var nf *engine.NotFoundError
	if _, err := e.Cancel(ctx, "mallory", task.NewID()); !errors.As(err, &nf) || nf.Reason != audit.ReasonUnknown {
		t.Errorf("Cancel of an unknown task: %#v, want reason %s", err, audit.ReasonUnknown)
	}
	if got, err := e.Get(ctx, "alice", tk.ID); err != nil || got.Status != task.Working {
		t.Errorf("owner's Get = %+v, %v", got, err)
	}
}

// TestNotFoundReasons: every refusal of a task is a *NotFoundError (and
// an ErrNotFound) whose Reason says why, for the audit trail: another
// owner's task, an unknown one, an expired one; for reads and for writes.
func TestNotFoundReasons(t *testing.T) {
	clk := &clock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	e, _ := newEngine(t, engine.Options{Now: clk.Now, Policy: task.Policy{DefaultTTL: time.Minute}})
	ctx := context.Background()
	release := make(chan struct{})
	defer close(release)
	running, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "t"}, func(ctx context.Context) (json.RawMessage, error) {
		<-release
		return json.RawMessage(`{}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	done, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "t"}, func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the finished task to end", func() bool {
		got, err := e.Get(ctx, "alice", done.ID)
		return err == nil && got.Status.Terminal()
	})
	answer := map[string]json.RawMessage{"k": json.RawMessage(`{}`)}
	ops := map[string]func(owner task.Owner, id task.ID) error{
		"Get": func(o task.Owner, id task.ID) error { _, err := e.Get(ctx, o, id); return err },
		"View": func(o task.Owner, id task.ID) error {
			_, err := e.View(ctx, o, id, store.ViewOptions{Result: true})
			return err
		},
		"Cancel":  func(o task.Owner, id task.ID) error { _, err := e.Cancel(ctx, o, id); return err },
		"Respond": func(o task.Owner, id task.ID) error { _, _, err := e.Respond(ctx, o, id, answer, nil); return err },
		"Delete":  func(o task.Owner, id task.ID) error { _, err := e.Delete(ctx, o, id); return err },
	}
	check := func(what string, err error, reason string) {
		t.Helper()
		var nf *engine.NotFoundError
		if !errors.As(err, &nf) || !errors.Is(err, engine.ErrNotFound) || nf.Reason != reason {
			t.Errorf("%s: err = %#v, want a *NotFoundError with Reason %q", what, err, reason)
		}
	}
	for name, op := range ops {
		check(name+" of another owner's task", op("mallory", running.ID), audit.ReasonOtherOwner)
		check(name+" of an unknown task", op("alice", task.NewID()), audit.ReasonUnknown)
	}
	clk.Add(time.Minute + time.Millisecond)
	for name, op := range ops {
		check(name+" of an expired task", op("alice", done.ID), audit.ReasonExpired)
	}
}

func TestCancelDropsLateResult(t *testing.T) {
	e, _ := newEngine(t, engine.Options{})
	ctx := context.Background()
	started := make(chan struct{})
	tk, err := e.Start(ctx, engine.StartSpec{Tool: "t"}, func(ctx context.Context) (json.RawMessage, error) {
		close(started)
		<-ctx.Done() // returns a result after cancellation anyway
		return json.RawMessage(`{"content":[{"type":"text","text":"late"}]}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	got, err := e.Cancel(ctx, "", tk.ID)
	if err != nil || got.Status != task.Cancelled {
		t.Fatalf("Cancel = %+v, %v", got, err)
	}
	final := waitTerminal(t, e, tk.ID)
	if final.Status != task.Cancelled || final.Result != nil {
		t.Fatalf("after late result: %+v", final)
	}
	var term *engine.TerminalError
	if _, err := e.Cancel(ctx, "", tk.ID); !errors.As(err, &term) || term.Status != task.Cancelled {
		t.Fatalf("second Cancel: %v", err)
	}
}

func TestStatusMessageAndInput(t *testing.T) {
	e, _ := newEngine(t, engine.Options{})
	ctx := context.Background()
	tk, err := e.Start(ctx, engine.StartSpec{Tool: "t"}, func(ctx context.Context) (json.RawMessage, error) {
		h := engine.FromContext(ctx)
		if err := h.SetStatusMessage(ctx, "halfway"); err != nil {
			return nil, err
		}
		return h.RequestInput(ctx, json.RawMessage(`{"method":"elicitation/create","params":{}}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	var key string
	for key == "" {
		got, err := e.Get(ctx, "", tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		for k := range got.InputRequests {
			key = k
			if got.Status != task.InputRequired || got.StatusMessage != "halfway" {
				t.Fatalf("waiting task = %+v", got)
			}
		}
	}
	// An answer the check refuses is an *AnswerError, and nothing is stored.
	refuse := func(_, answer json.RawMessage) error { return errors.New("not this one") }
	var bad *engine.AnswerError
	if _, _, err := e.Respond(ctx, "", tk.ID, map[string]json.RawMessage{key: json.RawMessage(`{"action":"maybe"}`)}, refuse); !errors.As(err, &bad) || bad.Key != key {
		t.Fatalf("Respond with a refusing check: %v, want an AnswerError for %s", err, key)
	}
	if got, _ := e.Get(ctx, "", tk.ID); got.Status != task.InputRequired || got.InputRequests[key] == nil {
		t.Fatalf("after a refused answer: %s, outstanding %v", got.Status, got.InputRequests)
	}
	if _, ignored, err := e.Respond(ctx, "", tk.ID, map[string]json.RawMessage{key: json.RawMessage(`{"action":"accept"}`), "other": nil}, nil); err != nil || len(ignored) != 1 {
		t.Fatalf("Respond: ignored %v, %v", ignored, err)
	}
	final := waitTerminal(t, e, tk.ID)
	if final.Status != task.Completed || string(final.Result) != `{"action":"accept"}` {
		t.Fatalf("final = %+v (%s)", final, final.Result)
	}
}

// TestShutdownResolvesByPolicy checks that work still running when the
// shutdown grace ends is resolved by its recovery policy: re-runnable work
// is handed back (working, no runner), other work fails.
func TestShutdownResolvesByPolicy(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "engine.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := hooked(engine.Options{
		Store:         st,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		SweepInterval: -1,
	}, engine.Hooks{
		Recover: func(_ context.Context, t *task.Task) engine.Work {
			if t.Tool != "safe" {
				return nil
			}
			return func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ready sync.WaitGroup
	block := func(ctx context.Context) (json.RawMessage, error) {
		ready.Done()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ready.Add(2)
	safe, _ := e.Start(ctx, engine.StartSpec{Tool: "safe"}, block)
	unsafe, _ := e.Start(ctx, engine.StartSpec{Tool: "unsafe"}, block)
	ready.Wait()
	sctx, cancel := context.WithCancel(ctx)
	cancel() // no grace: resolve at once
	if err := e.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(ctx, engine.StartSpec{Tool: "late"}, block); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Start after Shutdown: %v", err)
	}
	got, _ := st.Get(ctx, safe.ID)
	if got.Status != task.Working || got.Runner != "" {
		t.Errorf("re-runnable task after shutdown = %+v", got)
	}
	got, _ = st.Get(ctx, unsafe.ID)
	if got.Status != task.Failed || got.Error == nil || got.Error.Code != engine.CodeOutcomeUnknown {
		t.Errorf("non-re-runnable task after shutdown = %+v", got)
	}
}

// TestRerunAttemptsBounded: a re-runnable task whose runs never finish is
// not re-run forever.
func TestRerunAttemptsBounded(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(dir, "engine.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tk := task.New(task.Policy{}, "", "crashy", nil, time.Now())
	tk.Attempts = 3
	if err := st.Create(ctx, tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e, err := hooked(engine.Options{
		Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SweepInterval: -1,
	}, engine.Hooks{
		Recover: func(context.Context, *task.Task) engine.Work {
			return func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer e.Shutdown(ctx)
	got, _ := st.Get(ctx, tk.ID)
	if got.Status != task.Failed || got.Attempts != 3 {
		t.Fatalf("task after 3 attempts = %+v", got)
	}
}

// hooked returns an engine on opts with hooks installed (not yet run).
func hooked(opts engine.Options, hooks engine.Hooks) (*engine.Engine, error) {
	e, err := engine.New(opts)
	if err != nil {
		return nil, err
	}
	if err := e.SetHooks(hooks); err != nil {
		return nil, err
	}
	return e, nil
}
