package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runView checks the one-statement read of tasks/get ([store.Viewer]):
// the task with the payloads asked for only, its newest operation exactly
// as the ledger's Operations picks it, and its log's position exactly as
// ReadLog(id, 0, 0) gives it.
func (s *suite) runView(t *testing.T) {
	run(t, []testCase{
		{"NoOperationNoLog", s.viewBare},
		{"LatestOperation", s.viewLatestOperation},
		{"LogDropped", s.viewLogDropped},
		{"Payloads", s.viewPayloads},
		{"ToolError", s.viewToolError},
		{"Unknown", s.viewUnknown},
		{"Deleted", s.viewDeleted},
	})
}

// viewer returns a new store that must be a store.Viewer, or skips.
func (s *suite) viewer(t *testing.T) (store.Store, store.Viewer) {
	t.Helper()
	st := s.store(t)
	v := st
	return st, v
}

func mustView(t *testing.T, v store.Viewer, id task.ID, opts store.ViewOptions) *store.View {
	t.Helper()
	got, err := v.View(context.Background(), id, opts)
	if err != nil {
		t.Fatalf("View(%s, %+v): %v", id, opts, err)
	}
	if got == nil || got.Task == nil {
		t.Fatalf("View(%s, %+v) = %+v: no task", id, opts, got)
	}
	return got
}

// checkViewExtras checks that view's operation and log position are what
// the ledger's Operations (Limit 1) and ReadLog(id, 0, 0) of st say.
func checkViewExtras(t *testing.T, st store.Store, id task.ID, view *store.View) {
	t.Helper()
	ctx := context.Background()
	ops, _, err := st.Operations(ctx, store.OperationQuery{TaskID: id, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case len(ops) == 0 && view.Operation != nil:
		t.Errorf("View: operation %+v, want none", view.Operation)
	case len(ops) > 0 && view.Operation == nil:
		t.Errorf("View: no operation, want %+v", ops[0])
	case len(ops) > 0:
		checkOp(t, "View's operation", view.Operation, ops[0])
	}
	p := mustRead(t, st, id, 0, 0)
	if view.Log == nil {
		t.Fatalf("View: no log position, want %+v", p)
	}
	checkPage(t, "View's log position", view.Log, "", p.Next, p.Last, p.Missed, p.Dropped, p.More)
}

func (s *suite) viewBare(t *testing.T) {
	st, v := s.viewer(t)
	tk := newTask("alice", base)
	mustCreate(t, st, tk)
	got := mustView(t, v, tk.ID, store.ViewOptions{Request: true})
	checkTask(t, "View", got.Task, want(tk))
	if got.Operation != nil {
		t.Errorf("View: operation %+v, want none", got.Operation)
	}
	if got.Log != nil {
		checkPage(t, "View's log position", got.Log, "", 0, 0, 0, 0, false)
	}
	checkViewExtras(t, st, tk.ID, got)
}

func (s *suite) viewLatestOperation(t *testing.T) {
	ctx := context.Background()
	st, v := s.viewer(t)
	l := st
	tk, other := newTask("alice", base), newTask("alice", base)
	mustCreate(t, st, tk, other)
	// Created in this order: b-old first; then, at one millisecond, the
	// keys a-tie and c-tie (ties broken by the greater key); the other
	// task's operation is newer still.
	mustRecord(t, l, newOp("b-old", tk.ID, "alice", base))
	mustRecord(t, l, newOp("c-tie", tk.ID, "alice", base.Add(time.Second)))
	mustRecord(t, l, newOp("a-tie", tk.ID, "alice", base.Add(time.Second)))
	mustRecord(t, l, newOp("z-other", other.ID, "alice", base.Add(time.Hour)))
	// An update later than every creation does not make an operation the
	// newest: "latest" is by creation.
	if _, err := l.UpdateOperation(ctx, "b-old", func(o *task.Operation) error {
		return o.Move(task.OpUnknown, "no answer", base.Add(2*time.Hour))
	}); err != nil {
		t.Fatal(err)
	}
	got := mustView(t, v, tk.ID, store.ViewOptions{})
	if got.Operation == nil || got.Operation.Key != "c-tie" {
		t.Fatalf("View's operation = %+v, want c-tie", got.Operation)
	}
	checkViewExtras(t, st, tk.ID, got)

	// A reconciled operation comes back with its reconciliation time.
	if _, err := l.UpdateOperation(ctx, "c-tie", func(o *task.Operation) error {
		o.Receipt, o.Detail = "r-1", "detail"
		o.ReconciledAt = base.Add(3 * time.Hour)
		return o.Move(task.OpConfirmed, "confirmed", base.Add(3*time.Hour))
	}); err != nil {
		t.Fatal(err)
	}
	got = mustView(t, v, tk.ID, store.ViewOptions{})
	checkViewExtras(t, st, tk.ID, got)
	if got.Operation.ReconciledAt.IsZero() || got.Operation.State != task.OpConfirmed {
		t.Errorf("View's operation = %+v, want confirmed and reconciled", got.Operation)
	}
	if o := mustView(t, v, other.ID, store.ViewOptions{}).Operation; o == nil || o.Key != "z-other" {
		t.Errorf("View(other)'s operation = %+v, want z-other", o)
	}
}

func (s *suite) viewLogDropped(t *testing.T) {
	st, v := s.viewer(t)
	l := st
	id := logTask(t, st)
	lim := store.LogLimits{MaxLines: 3}
	mustAppend(t, l, id, store.LogBatch{Lines: textLines(numbered("a", 1, 5)...), Limits: lim})
	mustAppend(t, l, id, store.LogBatch{Lines: textLines("b1"), Skipped: 2, Limits: lim})
	got := mustView(t, v, id, store.ViewOptions{})
	// 5 + 2 skipped + 1 lines, 3 kept.
	checkPage(t, "View's log position", got.Log, "", 0, 8, 0, 5, true)
	checkViewExtras(t, st, id, got)
}

// viewPayloads checks that each payload is loaded when asked, and only
// then, the other fields always.
func (s *suite) viewPayloads(t *testing.T) {
	st, v := s.viewer(t)
	full := fullTask()
	mustCreate(t, st, full)
	for _, opts := range []store.ViewOptions{
		{},
		{Request: true},
		{Result: true},
		{Error: true},
		{InputRequests: true},
		{InputResponses: true},
		{Result: true, Error: true, InputRequests: true},
		{Request: true, Result: true, Error: true, InputRequests: true, InputResponses: true},
	} {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) {
			w := want(full)
			if !opts.Request {
				w.Request = nil
			}
			if !opts.Result {
				w.Result = nil
			}
			if !opts.Error {
				w.Error = nil
			}
			if !opts.InputRequests {
				w.InputRequests = nil
			}
			if !opts.InputResponses {
				w.InputResponses = nil
			}
			got := mustView(t, v, full.ID, opts)
			checkTask(t, "View", got.Task, w)
			// diff takes a nil payload for an empty one: make sure the
			// payloads not asked for are absent.
			g := got.Task
			if !opts.Request && g.Request != nil || !opts.Result && g.Result != nil || !opts.Error && g.Error != nil ||
				!opts.InputRequests && g.InputRequests != nil || !opts.InputResponses && g.InputResponses != nil {
				t.Errorf("View loaded a payload not asked for: %+v", g)
			}
		})
	}
}

func (s *suite) viewUnknown(t *testing.T) {
	st, v := s.viewer(t)
	mustCreate(t, st, newTask("alice", base))
	for _, id := range []task.ID{task.NewID(), "no-such-task", "x"} {
		got, err := v.View(context.Background(), id, store.ViewOptions{Result: true})
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("View(%q): err = %v, want store.ErrNotFound", id, err)
		}
		if got != nil {
			t.Errorf("View(%q) returned %+v with an error", id, got)
		}
	}
}

// viewDeleted checks that a deleted task is not found, although its
// operations outlive it.
func (s *suite) viewDeleted(t *testing.T) {
	st, v := s.viewer(t)
	tk := newTask("alice", base)
	mustCreate(t, st, tk)
	mustRecord(t, st, newOp("op-1", tk.ID, "alice", base))

	mustAppend(t, st, tk.ID, store.LogBatch{Lines: textLines("x")})

	mustView(t, v, tk.ID, store.ViewOptions{})
	if err := deleterOf(t, st).Delete(context.Background(), tk.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := v.View(context.Background(), tk.ID, store.ViewOptions{}); !errors.Is(err, store.ErrNotFound) || got != nil {
		t.Errorf("View of a deleted task = %+v, %v; want store.ErrNotFound", got, err)
	}
}

// viewToolError checks that a View tells a completed task's tool error
// (Task.ToolError, Outcome) without loading its result.
func (s *suite) viewToolError(t *testing.T) {
	st, v := s.viewer(t)
	for _, c := range []struct {
		name, result string
		complete     bool
		toolError    bool
	}{
		{"tool error", `{"content":[],"isError":true}`, true, true},
		{"true elsewhere", `{"content":[{"type":"text","text":"true"}],"isError":false}`, true, false},
		{"no isError", `{"content":[]}`, true, false},
		{"not completed", `{"content":[],"isError":true}`, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tk := newTask("alice", base)
			if c.complete {
				if err := tk.Complete(json.RawMessage(c.result), base); err != nil {
					t.Fatal(err)
				}
			}
			mustCreate(t, st, tk)
			got := mustView(t, v, tk.ID, store.ViewOptions{})
			if got.Task.ToolError != c.toolError || got.Task.Result != nil {
				t.Errorf("View of %s: ToolError %v, result %s; want %v and no result", c.result, got.Task.ToolError, got.Task.Result, c.toolError)
			}
			if all := mustView(t, v, tk.ID, store.ViewOptions{Result: true}); c.complete && !sameJSON(all.Task.Result, tk.Result) {
				t.Errorf("View(Result): result %s, want %s", all.Task.Result, tk.Result)
			}
		})
	}
}
