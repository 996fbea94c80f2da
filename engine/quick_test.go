package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
)

// kinds returns the kinds and target statuses of a task's history.
func kinds(t *testing.T, st interface {
	History(context.Context, task.ID) ([]task.Event, error)
}, id task.ID) []string {
	t.Helper()
	evs, err := st.History(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Kind)+":"+string(e.To))
	}
	return out
}

// TestFinishWithinOneWrite: work that returns within FinishWithin, and
// writes nothing before, is answered terminal from Start, its task
// created with its outcome in one write (its history has one event).
func TestFinishWithinOneWrite(t *testing.T) {
	e, st := newEngine(t, engine.Options{FinishWithin: time.Minute})
	ctx := context.Background()
	tk, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "noop"}, func(ctx context.Context) (json.RawMessage, error) {
		if engine.FromContext(ctx).TaskID() == "" {
			return nil, errors.New("no task ID")
		}
		return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
	})
	if err != nil || tk.Status != task.Completed || string(tk.Result) != `{"content":[{"type":"text","text":"done"}]}` {
		t.Fatalf("Start = %+v, %v; want completed with the result", tk, err)
	}
	got, err := st.Get(ctx, tk.ID)
	if err != nil || got.Status != task.Completed || got.Runner != "" {
		t.Fatalf("stored: %+v, %v", got, err)
	}
	if k := kinds(t, st, tk.ID); len(k) != 1 || k[0] != "created:completed" {
		t.Errorf("history %v; want one creation, completed", k)
	}
	failed, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "noop"}, func(context.Context) (json.RawMessage, error) {
		return nil, errors.New("it broke")
	})
	if err != nil || failed.Status != task.Failed || failed.Error == nil || failed.Error.Message != "it broke" {
		t.Fatalf("Start of failing work = %+v, %v; want failed", failed, err)
	}
}

// TestFinishWithinWorkWrites: work that writes (a status message) before
// it returns gets its task created first; it is still answered terminal
// when it returns within the window.
func TestFinishWithinWorkWrites(t *testing.T) {
	e, st := newEngine(t, engine.Options{FinishWithin: time.Minute})
	ctx := context.Background()
	tk, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "steps"}, func(ctx context.Context) (json.RawMessage, error) {
		if err := engine.FromContext(ctx).SetStatusMessage(ctx, "step 1"); err != nil {
			return nil, err
		}
		return json.RawMessage(`{"content":[]}`), nil
	})
	if err != nil || tk.Status != task.Completed {
		t.Fatalf("Start = %+v, %v; want completed", tk, err)
	}
	if k := kinds(t, st, tk.ID); len(k) != 3 || k[0] != "created:working" || k[2] != "status:completed" {
		t.Errorf("history %v; want created working, started, completed", k)
	}
}

// TestFinishWithinSlowWork: work still running at the window's end goes
// on in the background; Start answers working; the task completes later.
func TestFinishWithinSlowWork(t *testing.T) {
	e, st := newEngine(t, engine.Options{FinishWithin: time.Millisecond})
	ctx := context.Background()
	release := make(chan struct{})
	tk, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "slow"}, func(ctx context.Context) (json.RawMessage, error) {
		<-release
		return json.RawMessage(`{"content":[]}`), nil
	})
	if err != nil || tk.Status != task.Working {
		t.Fatalf("Start = %+v, %v; want working", tk, err)
	}
	if got, err := st.Get(ctx, tk.ID); err != nil || got.Status != task.Working || got.Runner != e.InstanceID() {
		t.Fatalf("stored at Start's return: %+v, %v; want working, run here", got, err)
	}
	close(release)
	for {
		w := e.Watch(tk.ID)
		got, err := st.Get(ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == task.Completed {
			break
		}
		<-w
	}
}

// TestFinishWithinKeyed: a call with an idempotency key is created before
// its work runs (a retry must find it taken): answered terminal all the
// same, and a retry returns it without running the work again.
func TestFinishWithinKeyed(t *testing.T) {
	e, st := newEngine(t, engine.Options{FinishWithin: time.Minute})
	ctx := context.Background()
	runs := 0
	work := func(context.Context) (json.RawMessage, error) {
		runs++
		return json.RawMessage(`{"content":[]}`), nil
	}
	tk, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "t", IdempotencyKey: "k"}, work)
	if err != nil || tk.Status != task.Completed {
		t.Fatalf("Start = %+v, %v; want completed", tk, err)
	}
	if k := kinds(t, st, tk.ID); len(k) < 2 || k[0] != "created:working" {
		t.Errorf("history %v; want created working first", k)
	}
	again, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "t", IdempotencyKey: "k"}, work)
	if err != nil || again.ID != tk.ID || runs != 1 {
		t.Fatalf("retry = %+v, %v, runs %d; want the same task, one run", again, err, runs)
	}
}

// TestFinishWithinOff: a negative FinishWithin answers as soon as the
// task is committed, working.
func TestFinishWithinOff(t *testing.T) {
	e, _ := newEngine(t, engine.Options{FinishWithin: -1})
	release := make(chan struct{})
	defer close(release)
	tk, err := e.Start(context.Background(), engine.StartSpec{Owner: "alice", Tool: "t"}, func(context.Context) (json.RawMessage, error) {
		<-release
		return nil, nil
	})
	if err != nil || tk.Status != task.Working {
		t.Fatalf("Start = %+v, %v", tk, err)
	}
}
