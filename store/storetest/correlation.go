package storetest

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runCorrelation checks that a task's and an operation's Correlation (the
// host's correlation keys of the call) round-trip through every read
// (Get, List, View, Browse, Operations), change with an Update, and that
// a map over the bounds is refused and writes nothing.
func (s *suite) runCorrelation(t *testing.T) {
	run(t, []testCase{
		{"Task", s.correlationTask},
		{"Operation", s.correlationOperation},
		{"Bounds", s.correlationBounds},
	})
}

// sampleCorrelation is a correlation map at the bounds: the most keys, the
// longest key and value, characters JSON escapes.
func sampleCorrelation() map[string]string {
	c := map[string]string{
		"claudecode/toolUseId":                      "toolu_01A09q90qw90lq917835lq9",
		strings.Repeat("k", task.MaxCorrelationKey): strings.Repeat("é", task.MaxCorrelationValue/2),
		"quote\"d/<key>":                            "line\nbreak\t\"&\"",
	}
	for i := len(c); i < task.MaxCorrelationKeys; i++ {
		c[fmt.Sprintf("host%d/id", i)] = fmt.Sprintf("v%d", i)
	}
	return c
}

func (s *suite) correlationTask(t *testing.T) {
	ctx := context.Background()
	st := s.store(t)
	tk := newTask("alice", base)
	tk.Correlation = sampleCorrelation()
	plain := newTask("alice", base.Add(1))
	mustCreate(t, st, tk, plain)
	checkTask(t, "Get", mustGet(t, st, tk.ID), want(tk))
	if got := mustGet(t, st, plain.ID); got.Correlation != nil {
		t.Errorf("Get of a task without correlation: %v, want nil", got.Correlation)
	}
	for _, got := range listAll(t, st, "alice", 10) {
		if got.ID == tk.ID && !maps.Equal(got.Correlation, tk.Correlation) {
			t.Errorf("List: correlation %v, want %v", got.Correlation, tk.Correlation)
		}
	}
	got, err := st.View(ctx, tk.ID, store.ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got.Task.Correlation, tk.Correlation) {
		t.Errorf("View: correlation %v, want %v", got.Task.Correlation, tk.Correlation)
	}

	browsed, _, err := st.Browse(ctx, store.BrowseQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range browsed {
		if g.ID == tk.ID && !maps.Equal(g.Correlation, tk.Correlation) {
			t.Errorf("Browse: correlation %v, want %v", g.Correlation, tk.Correlation)
		}
	}

	// An Update keeps it, or writes what fn left.
	if _, err := st.Update(ctx, tk.ID, func(x *task.Task) error { return x.SetStatusMessage("step 2", base) }); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, st, tk.ID); !maps.Equal(got.Correlation, tk.Correlation) {
		t.Errorf("after an Update: correlation %v, want %v", got.Correlation, tk.Correlation)
	}
	if _, err := st.Update(ctx, tk.ID, func(x *task.Task) error { x.Correlation = map[string]string{"a": "b"}; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, st, tk.ID); !maps.Equal(got.Correlation, map[string]string{"a": "b"}) {
		t.Errorf("after an Update that set it: correlation %v, want map[a:b]", got.Correlation)
	}
}

func (s *suite) correlationOperation(t *testing.T) {
	ctx := context.Background()
	st, l := s.ledger(t)
	tk := newTask("alice", base)
	tk.Correlation = map[string]string{"claudecode/toolUseId": "toolu_01"}
	mustCreate(t, st, tk)
	op := newOp("op-corr", tk.ID, "alice", base)
	op.Correlation = sampleCorrelation()
	got := mustRecord(t, l, op)
	checkOp(t, "recorded", got, op)
	up, err := l.UpdateOperation(ctx, op.Key, func(o *task.Operation) error {
		return o.Move(task.OpSubmitted, "", base.Add(1e9))
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(up.Correlation, op.Correlation) {
		t.Errorf("UpdateOperation: correlation %v, want %v", up.Correlation, op.Correlation)
	}
	ops, _, err := l.Operations(ctx, store.OperationQuery{TaskID: tk.ID})
	if err != nil || len(ops) != 1 {
		t.Fatalf("Operations: %v, %v; want one", ops, err)
	}
	if !maps.Equal(ops[0].Correlation, op.Correlation) {
		t.Errorf("Operations: correlation %v, want %v", ops[0].Correlation, op.Correlation)
	}
	view, err := st.View(ctx, tk.ID, store.ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if view.Operation == nil || !maps.Equal(view.Operation.Correlation, op.Correlation) {
		t.Errorf("View: operation %+v, want correlation %v", view.Operation, op.Correlation)
	}

	plain := mustRecord(t, l, newOp("op-plain", tk.ID, "alice", base.Add(2e9)))
	if plain.Correlation != nil {
		t.Errorf("an operation without correlation reads %v, want nil", plain.Correlation)
	}
}

func (s *suite) correlationBounds(t *testing.T) {
	ctx := context.Background()
	st, l := s.ledger(t)
	tooMany := sampleCorrelation()
	tooMany["one/more"] = "x"
	for name, c := range map[string]map[string]string{
		"too many keys":  tooMany,
		"long key":       {strings.Repeat("k", task.MaxCorrelationKey+1): "v"},
		"long value":     {"k": strings.Repeat("v", task.MaxCorrelationValue+1)},
		"empty key":      {"": "v"},
		"NUL in a value": {"k": "a\x00b"},
	} {
		tk := newTask("alice", base)
		tk.Correlation = c
		if err := st.Create(ctx, tk, store.CreateOptions{}); err == nil {
			t.Errorf("Create with a correlation of %s: nil error", name)
		}
		if _, err := st.Get(ctx, tk.ID); err == nil {
			t.Errorf("Create with a correlation of %s stored the task", name)
		}
		op := newOp("op-"+name, task.NewID(), "alice", base)
		op.Correlation = c
		if _, err := l.RecordOperation(ctx, op); err == nil {
			t.Errorf("RecordOperation with a correlation of %s: nil error", name)
		}
	}
}

// CorrelationMigrated checks a store just migrated from a schema without
// correlation columns: the task id and the operation opKey (of that task),
// written before the migration, read with no correlation and unchanged
// otherwise; a task and an operation written after it keep theirs.
func CorrelationMigrated(t *testing.T, st store.Store, id task.ID, opKey string) {
	t.Helper()
	ctx := context.Background()
	old, err := st.Get(ctx, id)
	if err != nil {
		t.Fatalf("the task written before the migration: %v", err)
	}
	if old.Correlation != nil {
		t.Errorf("the task written before the migration has correlation %v", old.Correlation)
	}
	tk := newTask(old.Owner, base)
	tk.Correlation = map[string]string{"claudecode/toolUseId": "toolu_01migrated"}
	mustCreate(t, st, tk)
	checkTask(t, "a task created after the migration", mustGet(t, st, tk.ID), want(tk))
	l := st
	ops, _, err := l.Operations(ctx, store.OperationQuery{TaskID: id})
	if err != nil || len(ops) != 1 || ops[0].Key != opKey {
		t.Fatalf("the operation written before the migration: %v, %v", ops, err)
	}
	if ops[0].Correlation != nil {
		t.Errorf("the operation written before the migration has correlation %v", ops[0].Correlation)
	}
	op := newOp("after-migration", tk.ID, tk.Owner, base)
	op.Correlation = tk.Correlation
	checkOp(t, "an operation recorded after the migration", mustRecord(t, l, op), op)
}
