package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// awaitTerminal waits, on the engine's Watch channels (no polling), until
// the task is terminal, and returns it.
func awaitTerminal(t *testing.T, e *engine.Engine, owner task.Owner, id task.ID) *task.Task {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		changed := e.Watch(id)
		tk, err := e.Get(context.Background(), owner, id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Status.Terminal() {
			return tk
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("task %s never ended", id)
		}
	}
}

// eventSummary is what the tests compare of a history event.
type eventSummary struct {
	Kind     task.EventKind
	From, To task.Status
	Instance string
	Attempt  int64
}

// summarize returns the summaries of evs.
func summarize(evs []task.Event) []eventSummary {
	out := make([]eventSummary, len(evs))
	for i, e := range evs {
		out[i] = eventSummary{e.Kind, e.From, e.To, e.Instance, e.Attempt}
	}
	return out
}

// checkEvents checks the history of id against want and returns it.
func checkEvents(t *testing.T, h store.Historian, id task.ID, want []eventSummary) []task.Event {
	t.Helper()
	evs, err := h.History(context.Background(), id)
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	got := summarize(evs)
	if len(got) != len(want) {
		t.Fatalf("history = %+v; want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("history = %+v; want %+v", got, want)
		}
	}
	return evs
}

// TestHistoryNamesInstance: a task run by an engine on a SQLite store has
// a history naming the engine's instance for its creation, the start of
// its work and its completion.
func TestHistoryNamesInstance(t *testing.T) {
	e, st := newEngine(t, engine.Options{InstanceID: "engine-h1"})
	ctx := context.Background()
	owner := task.UserOwner("alice", "")
	release := make(chan struct{})
	tk, err := e.Start(ctx, engine.StartSpec{Owner: owner, Tool: "t"}, func(ctx context.Context) (json.RawMessage, error) {
		<-release
		return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	final := awaitTerminal(t, e, owner, tk.ID)
	if final.Status != task.Completed {
		t.Fatalf("the task ended %s", final.Status)
	}
	evs := checkEvents(t, st, tk.ID, []eventSummary{
		{task.EventCreated, "", task.Working, "engine-h1", 1},
		{task.EventStarted, task.Working, task.Working, "engine-h1", 1},
		{task.EventStatus, task.Working, task.Completed, "engine-h1", 1},
	})
	if !evs[2].At.Equal(final.LastUpdatedAt) {
		t.Errorf("the completion's event is at %v; the task was last updated at %v", evs[2].At, final.LastUpdatedAt)
	}
}

// TestCancelAsOperatorRecorded: an operator cancels another owner's task,
// which its owner's Cancel cannot be asked to by anyone else; the
// cancellation is in the task's history, naming the engine.
func TestCancelAsOperatorRecorded(t *testing.T) {
	e, st := newEngine(t, engine.Options{InstanceID: "engine-op"})
	ctx := context.Background()
	owner := task.UserOwner("alice", "")
	started := make(chan struct{})
	tk, err := e.Start(ctx, engine.StartSpec{Owner: owner, Tool: "t"}, func(ctx context.Context) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	var nf *engine.NotFoundError
	if _, err := e.Cancel(ctx, task.UserOwner("mallory", ""), tk.ID); !errors.As(err, &nf) {
		t.Fatalf("Cancel by another owner: %v; want a *NotFoundError", err)
	}
	got, err := e.CancelAsOperator(ctx, task.UserOwner("admin", ""), tk.ID)
	if err != nil || got.Status != task.Cancelled {
		t.Fatalf("CancelAsOperator = %+v, %v", got, err)
	}
	if got.StatusMessage != "The task was cancelled by an operator." {
		t.Errorf("status message %q", got.StatusMessage)
	}
	final := awaitTerminal(t, e, owner, tk.ID)
	if final.Status != task.Cancelled || final.Owner != owner {
		t.Fatalf("after CancelAsOperator: %s of %s", final.Status, final.Owner)
	}
	evs := checkEvents(t, st, tk.ID, []eventSummary{
		{task.EventCreated, "", task.Working, "engine-op", 1},
		{task.EventStarted, task.Working, task.Working, "engine-op", 1},
		{task.EventStatus, task.Working, task.Cancelled, "engine-op", 1},
	})
	if evs[2].Message != "The task was cancelled by an operator." {
		t.Errorf("the cancellation's event says %q", evs[2].Message)
	}
	var term *engine.TerminalError
	if _, err := e.CancelAsOperator(ctx, task.UserOwner("admin", ""), tk.ID); !errors.As(err, &term) {
		t.Fatalf("second CancelAsOperator: %v; want a *TerminalError", err)
	}
	if _, err := e.CancelAsOperator(ctx, task.UserOwner("admin", ""), task.NewID()); !errors.As(err, &nf) {
		t.Fatalf("CancelAsOperator of an unknown task: %v; want a *NotFoundError", err)
	}
	if evs, _ := st.History(ctx, tk.ID); len(evs) != 3 {
		t.Fatalf("a refused cancellation changed the history: %+v", evs)
	}
}
