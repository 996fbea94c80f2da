package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runHistory checks [store.Historian]: the events Create, Update and
// StartQueued record (see task.EventsOf), with the instance of the
// write's context, oldest first, deleted with the task.
func (s *suite) runHistory(t *testing.T) {
	run(t, []testCase{
		{"Lifecycle", s.historyLifecycle},
		{"StartQueued", s.historyStartQueued},
		{"CreatedRunning", s.historyCreatedRunning},
		{"MessageCut", s.historyMessageCut},
		{"Deleted", s.historyDeleted},
		{"Unknown", s.historyUnknown},
	})
}

// historianOf returns a fresh store that is a [store.Historian].
func (s *suite) historianOf(t *testing.T) (store.Store, store.Historian) {
	t.Helper()
	st := s.store(t)
	h := st
	return st, h
}

// checkHistory checks the history of id against want, Seq aside (it must
// count from 1).
func checkHistory(t *testing.T, h store.Historian, id task.ID, want []task.Event) {
	t.Helper()
	got, err := h.History(t.Context(), id)
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("History has %d events: %+v; want %d: %+v", len(got), got, len(want), want)
	}
	for i := range want {
		w := want[i]
		w.Seq, w.At = int64(i+1), ms(w.At)
		if got[i] != w {
			t.Errorf("event %d = %+v; want %+v", i, got[i], w)
		}
	}
}

func (s *suite) historyLifecycle(t *testing.T) {
	st, h := s.historianOf(t)
	ctxA := store.WithInstance(t.Context(), "engine-a")
	ctxB := store.WithInstance(t.Context(), "engine-b")
	tk := newTask("alice", base)
	if err := st.Create(ctxA, tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	update := func(ctx context.Context, fn func(*task.Task) error) {
		t.Helper()
		if _, err := st.Update(ctx, tk.ID, fn); err != nil {
			t.Fatal(err)
		}
	}
	// The start of its work, by engine-a.
	update(ctxA, func(tk *task.Task) error {
		tk.Runner, tk.Attempts, tk.LastUpdatedAt = "engine-a", 1, at(1)
		return nil
	})
	// Neither the status nor the run changes: no event.
	update(ctxA, func(tk *task.Task) error { return tk.SetStatusMessage("step 1", at(2)) })
	update(ctxB, func(tk *task.Task) error {
		if err := tk.Transition(task.InputRequired, at(3)); err != nil {
			return err
		}
		return tk.SetStatusMessage("your name?", at(3))
	})
	// A write that fails records nothing.
	errNo := errors.New("no")
	if _, err := st.Update(ctxB, tk.ID, func(tk *task.Task) error {
		_ = tk.Transition(task.Working, at(4))
		return errNo
	}); !errors.Is(err, errNo) {
		t.Fatalf("failing Update: %v", err)
	}
	update(ctxB, func(tk *task.Task) error { return tk.Transition(task.Working, at(5)) })
	// A write without an instance records "".
	update(t.Context(), func(tk *task.Task) error { return tk.Complete(nil, at(6)) })
	checkHistory(t, h, tk.ID, []task.Event{
		{Kind: task.EventCreated, At: base, To: task.Working, Instance: "engine-a"},
		{Kind: task.EventStarted, At: at(1), From: task.Working, To: task.Working, Instance: "engine-a", Attempt: 1},
		{Kind: task.EventStatus, At: at(3), From: task.Working, To: task.InputRequired, Instance: "engine-b", Attempt: 1, Message: "your name?"},
		{Kind: task.EventStatus, At: at(5), From: task.InputRequired, To: task.Working, Instance: "engine-b", Attempt: 1, Message: "your name?"},
		{Kind: task.EventStatus, At: at(6), From: task.Working, To: task.Completed, Attempt: 1, Message: "your name?"},
	})
}

// historyCreatedRunning: a task created with its work started records
// its creation and its start.
func (s *suite) historyCreatedRunning(t *testing.T) {
	st, h := s.historianOf(t)
	tk := newTask("alice", base)
	tk.Runner, tk.Attempts, tk.LeaseExpiresAt = "engine-a", 1, base.Add(time.Minute)
	if err := st.Create(store.WithInstance(t.Context(), "engine-a"), tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	checkHistory(t, h, tk.ID, []task.Event{
		{Kind: task.EventCreated, At: base, To: task.Working, Instance: "engine-a", Attempt: 1},
		{Kind: task.EventStarted, At: base, From: task.Working, To: task.Working, Instance: "engine-a", Attempt: 1},
	})
	// A Create that inserts nothing records nothing.
	dup := *tk
	if err := st.Create(t.Context(), &dup, store.CreateOptions{}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("Create of a taken ID: %v", err)
	}
	got, err := h.History(t.Context(), tk.ID)
	if err != nil || len(got) != 2 {
		t.Fatalf("History after a refused Create: %+v, %v", got, err)
	}
}

func (s *suite) historyStartQueued(t *testing.T) {
	st, h := s.historianOf(t)
	qr := st
	ctx := store.WithInstance(t.Context(), "engine-a")
	first := queueTask("q", base, "engine-a")
	second := queueTask("q", base.Add(time.Second), "engine-a")
	for _, tk := range []*task.Task{first, second} {
		if err := st.Create(ctx, tk, store.CreateOptions{MaxConcurrent: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if !second.Queued {
		t.Fatal("the second task does not wait")
	}
	if _, err := st.Update(ctx, first.ID, func(tk *task.Task) error { return tk.Complete(nil, base.Add(2*time.Second)) }); err != nil {
		t.Fatal(err)
	}
	now := base.Add(3 * time.Second)
	started, err := qr.StartQueued(t.Context(), store.QueueRequest{Runner: "engine-b", Queue: "q", Max: 1, Now: now, Lease: time.Minute})
	if err != nil || len(started) != 1 || started[0].ID != second.ID {
		t.Fatalf("StartQueued = %v, %v; want the second task", ids(started), err)
	}
	checkHistory(t, h, second.ID, []task.Event{
		{Kind: task.EventCreated, At: second.CreatedAt, To: task.Working, Instance: "engine-a", Message: task.QueuedMessage(0)},
		{Kind: task.EventStarted, At: now, From: task.Working, To: task.Working, Instance: "engine-b", Attempt: 1},
	})
	checkHistory(t, h, first.ID, []task.Event{
		{Kind: task.EventCreated, At: base, To: task.Working, Instance: "engine-a", Attempt: 1},
		{Kind: task.EventStarted, At: base, From: task.Working, To: task.Working, Instance: "engine-a", Attempt: 1},
		{Kind: task.EventStatus, At: base.Add(2 * time.Second), From: task.Working, To: task.Completed, Instance: "engine-a", Attempt: 1},
	})
}

// historyMessageCut: an event keeps the first task.MaxEventMessage bytes
// of the status message, cut on a character boundary.
func (s *suite) historyMessageCut(t *testing.T) {
	st, h := s.historianOf(t)
	tk := newTask("alice", base)
	mustCreate(t, st, tk)
	long := strings.Repeat("€", 1000) // 3 bytes each
	if _, err := st.Update(t.Context(), tk.ID, func(tk *task.Task) error {
		return tk.Fail(&task.Error{Code: task.CodeInternalError, Message: "x"}, long, base.Add(time.Second))
	}); err != nil {
		t.Fatal(err)
	}
	got, err := h.History(t.Context(), tk.ID)
	if err != nil || len(got) != 2 {
		t.Fatalf("History = %+v, %v; want 2 events", got, err)
	}
	m := got[1].Message
	if len(m) > task.MaxEventMessage || len(m) < task.MaxEventMessage-3 || !utf8.ValidString(m) || !strings.HasPrefix(long, m) {
		t.Fatalf("the event's message has %d bytes (valid UTF-8: %v); want a prefix of the status message of at most %d", len(m), utf8.ValidString(m), task.MaxEventMessage)
	}
	if got[1].To != task.Failed {
		t.Fatalf("event = %+v; want a move to failed", got[1])
	}
}

// historyDeleted: Delete and DeleteExpired delete the history; a task
// created again with the same ID starts a new one.
func (s *suite) historyDeleted(t *testing.T) {
	st, h := s.historianOf(t)
	d := deleterOf(t, st)
	tk := newTask("alice", base)
	mustCreate(t, st, tk)
	if _, err := st.Update(t.Context(), tk.ID, func(tk *task.Task) error { return tk.Cancel("", base.Add(time.Second)) }); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(t.Context(), tk.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := h.History(t.Context(), tk.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("History of a deleted task = %+v, %v; want store.ErrNotFound", got, err)
	}
	again := newTask("bob", base.Add(time.Hour))
	again.ID = tk.ID
	mustCreate(t, st, again)
	checkHistory(t, h, tk.ID, []task.Event{{Kind: task.EventCreated, At: again.CreatedAt, To: task.Working}})

	exp := newTask("alice", base)
	exp.TTL = time.Minute
	if err := exp.Complete(nil, base); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, st, exp)
	if n, err := st.DeleteExpired(t.Context(), base.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("DeleteExpired = %d, %v", n, err)
	}
	if got, err := h.History(t.Context(), exp.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("History of an expired task deleted = %+v, %v; want store.ErrNotFound", got, err)
	}
}

func (s *suite) historyUnknown(t *testing.T) {
	_, h := s.historianOf(t)
	if got, err := h.History(t.Context(), task.NewID()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("History of an unknown task = %+v, %v; want store.ErrNotFound", got, err)
	}
}
