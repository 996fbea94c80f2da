package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runExtras checks [store.Deleter], which both backends implement, and
// the method that both keep outside [store.Store] (see activeLister),
// which the suite also uses to set up some cases.
func (s *suite) runExtras(t *testing.T) {
	run(t, []testCase{
		{"ListActive", s.listActive},
		{"Delete", s.delete},
		{"DeleteHoldings", s.deleteHoldings},
	})
}

// activeLister is a store that lists every unfinished task: both backends
// are, outside [store.Store] (the engine claims unfinished tasks instead).
type activeLister interface {
	// ListActive returns every working or input_required task, oldest
	// first.
	ListActive(ctx context.Context) ([]*task.Task, error)
}

// deleterOf returns st as a [store.Deleter], or skips the test if st is
// none.
func deleterOf(t *testing.T, st store.Store) store.Deleter {
	t.Helper()
	d := st
	return d
}

// activeListerOf returns st as an activeLister, or skips the test if st
// is none.
func activeListerOf(t *testing.T, st store.Store) activeLister {
	t.Helper()
	l, ok := st.(activeLister)
	if !ok {
		t.Skipf("storetest: %T has no ListActive method, which this case needs", st)
	}
	return l
}

func (s *suite) listActive(t *testing.T) {
	st := s.store(t)
	tasks, err := activeListerOf(t, st).ListActive(t.Context())
	if err != nil || len(tasks) != 0 {
		t.Fatalf("ListActive of an empty store = %v, %v", tasks, err)
	}
	var active []*task.Task
	statuses := []task.Status{task.Working, task.Completed, task.InputRequired, task.Failed, task.Cancelled}
	for i := range 20 {
		// Creation times out of insertion order.
		created := base.Add(time.Duration((i*11)%20) * time.Minute)
		tk := newTask(task.Owner(fmt.Sprintf("owner-%d", i%3)), created)
		tk.Status = statuses[i%len(statuses)]
		tk.Runner = "engine-old"
		if !tk.Status.Terminal() {
			active = append(active, tk)
		}
		mustCreate(t, st, tk)
	}
	slices.SortFunc(active, func(a, b *task.Task) int { return a.CreatedAt.Compare(b.CreatedAt) })
	got, err := activeListerOf(t, st).ListActive(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), ids(active)) {
		t.Fatalf("ListActive = %v, want oldest first %v", ids(got), ids(active))
	}
	for i := range got {
		checkTask(t, "active task", got[i], want(active[i]))
	}

	// Ending a task removes it from the list; input_required stays.
	if _, err := st.Update(t.Context(), active[0].ID, func(tk *task.Task) error { return tk.Cancel("", base) }); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(t.Context(), active[1].ID, func(tk *task.Task) error {
		_, err := tk.AddInputRequest(json.RawMessage(`{}`), base)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	got, err = activeListerOf(t, st).ListActive(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), ids(active[1:])) {
		t.Errorf("ListActive after cancelling the oldest = %v, want %v", ids(got), ids(active[1:]))
	}
}

func (s *suite) delete(t *testing.T) {
	st := s.store(t)
	a, b := newTask("alice", base), newTask("alice", base)
	mustCreate(t, st, a, b)
	if err := deleterOf(t, st).Delete(t.Context(), a.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := st.Get(t.Context(), a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after Delete: err = %v, want ErrNotFound", err)
	}
	if err := deleterOf(t, st).Delete(t.Context(), a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second Delete: err = %v, want ErrNotFound", err)
	}
	if err := deleterOf(t, st).Delete(t.Context(), task.NewID()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Delete of an unknown task: err = %v, want ErrNotFound", err)
	}
	if _, err := st.Update(t.Context(), a.ID, func(*task.Task) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Update after Delete: err = %v, want ErrNotFound", err)
	}
	checkTask(t, "the other task", mustGet(t, st, b.ID), want(b))
	tasks, _, err := st.List(t.Context(), "alice", "", 10)
	if err != nil || !slices.Equal(ids(tasks), []task.ID{b.ID}) {
		t.Errorf("List after Delete = %v, %v; want only %s", ids(tasks), err, b.ID)
	}
	// The ID can be used again.
	again := newTask("bob", base)
	again.ID = a.ID
	mustCreate(t, st, again)
	checkTask(t, "task re-created under a deleted ID", mustGet(t, st, a.ID), want(again))
}

// deleteHoldings deletes finished tasks that hold a result, an error, and
// input requests with their answers: nothing of them is readable after,
// not even through a task created again with the same ID, and the
// neighbours keep theirs.
func (s *suite) deleteHoldings(t *testing.T) {
	st := s.store(t)
	done, failed, neighbour := newTask("alice", base), newTask("alice", base), newTask("alice", base)
	mustCreate(t, st, done, failed, neighbour)
	for _, id := range []task.ID{done.ID, neighbour.ID} {
		if _, err := st.Update(t.Context(), id, func(tk *task.Task) error {
			key, err := tk.AddInputRequest(json.RawMessage(`{"q":"secret question"}`), base)
			if err != nil {
				return err
			}
			if _, _, err := tk.Answer(map[string]json.RawMessage{key: json.RawMessage(`{"a":"secret answer"}`)}, base); err != nil {
				return err
			}
			return tk.Complete(json.RawMessage(`{"secret":"`+string(id)+`"}`), base)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Update(t.Context(), failed.ID, func(tk *task.Task) error {
		return tk.Fail(&task.Error{Code: -32603, Message: "secret failure"}, "failed", base)
	}); err != nil {
		t.Fatal(err)
	}
	before := mustGet(t, st, neighbour.ID)
	for _, id := range []task.ID{done.ID, failed.ID} {
		if err := deleterOf(t, st).Delete(t.Context(), id); err != nil {
			t.Fatalf("Delete(%s): %v", id, err)
		}
		if _, err := st.Get(t.Context(), id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%s) after Delete: err = %v, want ErrNotFound", id, err)
		}
		again := newTask("alice", base)
		again.ID = id
		mustCreate(t, st, again)
		got := mustGet(t, st, id)
		if got.Result != nil || got.Error != nil || len(got.InputRequests) != 0 || got.Status != task.Working {
			t.Errorf("a task created again as %s holds the deleted one's: %+v", id, got)
		}
	}
	checkTask(t, "the neighbour", mustGet(t, st, neighbour.ID), want(before))
}
