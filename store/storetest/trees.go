package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runTrees checks task trees: a child's Parent and Root read back, and
// Browse selects the children of a task, the tree under a root, and the
// tasks with no parent.
func (s *suite) runTrees(t *testing.T) {
	run(t, []testCase{
		{"Browse", s.treesBrowse},
		{"ExpiryKeepsSteps", s.treesExpiry},
	})
}

// treesBrowse builds root → {a, b}, a → {c}, beside an unrelated task,
// and browses them by parent, by root and at the top level, counting
// the tree too.
func (s *suite) treesBrowse(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	root := newTask("alice", base)
	root.Root = root.ID // the top of a tree may name itself its root
	other := newTask("bob", base.Add(time.Second))
	mustCreate(t, st, root, other)
	child := func(parent *task.Task, at time.Duration) *task.Task {
		c := newTask(parent.Owner, base.Add(at))
		c.Parent, c.Root = parent.ID, root.ID
		mustCreate(t, st, c)
		return c
	}
	a := child(root, 2*time.Second)
	b := child(root, 3*time.Second)
	c := child(a, 4*time.Second)
	if got := mustGet(t, st, c.ID); got.Parent != a.ID || got.Root != root.ID {
		t.Fatalf("child read back with parent %q, root %q; want %q, %q", got.Parent, got.Root, a.ID, root.ID)
	}
	if got := mustGet(t, st, root.ID); got.Parent != "" || got.Root != root.ID {
		t.Fatalf("a task with no parent read back with parent %q, root %q", got.Parent, got.Root)
	}
	browse := func(q store.BrowseQuery) []task.ID {
		t.Helper()
		tasks, _, err := st.Browse(ctx, q)
		if err != nil {
			t.Fatalf("Browse(%+v): %v", q, err)
		}
		return ids(tasks)
	}
	for _, tc := range []struct {
		name string
		q    store.BrowseQuery
		want []task.ID
	}{
		{"children", store.BrowseQuery{Parent: root.ID}, []task.ID{b.ID, a.ID}},
		{"grandchildren", store.BrowseQuery{Parent: a.ID}, []task.ID{c.ID}},
		{"none", store.BrowseQuery{Parent: c.ID}, nil},
		{"tree", store.BrowseQuery{Root: root.ID}, []task.ID{c.ID, b.ID, a.ID}},
		{"top level", store.BrowseQuery{TopLevel: true}, []task.ID{other.ID, root.ID}},
		{"children of an owner", store.BrowseQuery{Parent: root.ID, Owner: "bob"}, nil},
	} {
		if got := browse(tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v; want %v", tc.name, got, tc.want)
		}
	}
	counts, err := st.CountByStatus(ctx, store.BrowseQuery{Root: root.ID})
	if err != nil || counts.ByStatus[task.Working] != 3 {
		t.Fatalf("CountByStatus of the tree = %+v, %v; want 3 working", counts, err)
	}
}

// treesExpiry checks that DeleteExpired keeps the expired children of a
// parent that has not ended, and deletes them once it has.
func (s *suite) treesExpiry(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	parent := newTask("alice", base)
	parent.Root = parent.ID
	mustCreate(t, st, parent)
	done := newTask("alice", base.Add(time.Second))
	done.Parent, done.Root = parent.ID, parent.ID
	done.Status, done.Result, done.TTL = task.Completed, json.RawMessage(`{"content":[]}`), time.Minute
	other := newTask("bob", base.Add(time.Second))
	other.Status, other.Result, other.TTL = task.Completed, json.RawMessage(`{"content":[]}`), time.Minute
	mustCreate(t, st, done, other)
	later := base.Add(time.Hour)
	if n, err := st.DeleteExpired(ctx, later); err != nil || n != 1 {
		t.Fatalf("DeleteExpired with a running parent = %d, %v; want only the task with no parent", n, err)
	}
	mustGet(t, st, done.ID)
	if _, err := st.Update(ctx, parent.ID, func(p *task.Task) error {
		p.Status, p.Result, p.LastUpdatedAt = task.Completed, json.RawMessage(`{"content":[]}`), later
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := st.DeleteExpired(ctx, later.Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("DeleteExpired once the parent ended = %d, %v; want its expired child", n, err)
	}
	if _, err := st.Get(ctx, done.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the expired child of an ended parent: %v; want it deleted", err)
	}
}
