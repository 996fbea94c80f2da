package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runLedger checks the domain operation ledger ([store.Ledger]): a record
// is idempotent by key, updates follow the states' moves atomically,
// queries select by owner, state and task and paginate, retention deletes
// by last update, and a task's expiry or deletion keeps its operations.
func (s *suite) runLedger(t *testing.T) {
	run(t, []testCase{
		{"RecordIdempotent", s.ledgerRecord},
		{"UpdateMoves", s.ledgerUpdate},
		{"Queries", s.ledgerQueries},
		{"Retention", s.ledgerRetention},
		{"OutlivesTask", s.ledgerOutlivesTask},
		{"Shared", s.ledgerShared},
	})
}

// ledger returns a new store that must be a store.Ledger, or skips.
func (s *suite) ledger(t *testing.T) (store.Store, store.Ledger) {
	t.Helper()
	st := s.store(t)
	l := st
	return st, l
}

func newOp(key string, id task.ID, owner task.Owner, created time.Time) *task.Operation {
	return &task.Operation{
		Key: key, TaskID: id, Tool: "deploy", Owner: owner,
		Object: "service/api", ObjectVersion: "v42", Effect: "deploy api to production",
		CreatedAt: created, UpdatedAt: created,
	}
}

func mustRecord(t *testing.T, l store.Ledger, op *task.Operation) *task.Operation {
	t.Helper()
	got, err := l.RecordOperation(context.Background(), op)
	if err != nil {
		t.Fatalf("RecordOperation(%q): %v", op.Key, err)
	}
	return got
}

func checkOp(t *testing.T, what string, got, want *task.Operation) {
	t.Helper()
	g, w := *got, *want
	w.CreatedAt, w.UpdatedAt, w.ReconciledAt = msOr0(w.CreatedAt), msOr0(w.UpdatedAt), msOr0(w.ReconciledAt)
	if w.State == "" {
		w.State = task.OpIntended
	}
	if fmt.Sprint(g) != fmt.Sprint(w) || !g.CreatedAt.Equal(w.CreatedAt) || !g.UpdatedAt.Equal(w.UpdatedAt) || !g.ReconciledAt.Equal(w.ReconciledAt) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, g, w)
	}
}

func msOr0(tm time.Time) time.Time {
	if tm.IsZero() {
		return tm
	}
	return ms(tm)
}

func (s *suite) ledgerRecord(t *testing.T) {
	_, l := s.ledger(t)
	id := task.NewID()
	op := newOp("op-1", id, "alice", base)
	got := mustRecord(t, l, op)
	checkOp(t, "recorded", got, op)

	// A second record of the key (a re-run) returns the stored one and
	// changes nothing, whatever it says.
	again := newOp("op-1", task.NewID(), "bob", base.Add(time.Hour))
	again.Effect = "something else"
	got = mustRecord(t, l, again)
	checkOp(t, "recorded again", got, op)

	// Strings are capped, an empty key or task ID refused.
	long := newOp("op-long", id, "alice", base)
	long.Effect = strings.Repeat("é", 3*task.MaxEffect)
	if got := mustRecord(t, l, long); len(got.Effect) > task.MaxEffect {
		t.Errorf("effect of %d bytes stored", len(got.Effect))
	}
	for _, bad := range []*task.Operation{newOp("", id, "alice", base), newOp("op-x", "", "alice", base)} {
		if _, err := l.RecordOperation(context.Background(), bad); err == nil {
			t.Errorf("RecordOperation(%+v) = nil error", bad)
		}
	}
}

func (s *suite) ledgerUpdate(t *testing.T) {
	ctx := context.Background()
	_, l := s.ledger(t)
	op := mustRecord(t, l, newOp("op-1", task.NewID(), "alice", base))

	at := base.Add(time.Minute)
	got, err := l.UpdateOperation(ctx, "op-1", func(o *task.Operation) error {
		o.Receipt = "job-17"
		return o.Move(task.OpSubmitted, "", at)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := *op
	want.State, want.Receipt, want.UpdatedAt = task.OpSubmitted, "job-17", at
	checkOp(t, "submitted", got, &want)

	// A refused move writes nothing.
	_, err = l.UpdateOperation(ctx, "op-1", func(o *task.Operation) error {
		o.Receipt = "lost"
		return o.Move(task.OpIntended, "", at)
	})
	var oe *task.OpError
	if !errors.As(err, &oe) {
		t.Fatalf("move back to intended: err = %v, want a *task.OpError", err)
	}
	at2 := base.Add(2 * time.Minute)
	got, err = l.UpdateOperation(ctx, "op-1", func(o *task.Operation) error {
		if o.Receipt != "job-17" {
			t.Errorf("receipt %q after a refused move", o.Receipt)
		}
		o.ReconciledAt = at2
		return o.Move(task.OpConfirmed, "applied", at2)
	})
	if err != nil {
		t.Fatal(err)
	}
	want.State, want.Detail, want.UpdatedAt, want.ReconciledAt = task.OpConfirmed, "applied", at2, at2
	checkOp(t, "confirmed", got, &want)
	ops, _, err := l.Operations(ctx, store.OperationQuery{TaskID: op.TaskID})
	if err != nil || len(ops) != 1 {
		t.Fatalf("Operations = %v, %v", ops, err)
	}
	checkOp(t, "read back", ops[0], &want)

	if _, err := l.UpdateOperation(ctx, "nope", func(*task.Operation) error { return nil }); !errors.Is(err, store.ErrNoOperation) {
		t.Errorf("unknown key: err = %v, want ErrNoOperation", err)
	}
	if _, err := l.UpdateOperation(ctx, "op-1", func(o *task.Operation) error { o.Key = "other"; return nil }); err == nil {
		t.Error("changing the key: nil error")
	}
}

func (s *suite) ledgerQueries(t *testing.T) {
	ctx := context.Background()
	_, l := s.ledger(t)
	t1, t2 := task.NewID(), task.NewID()
	var alice []string
	for i := range 7 {
		id := t1
		if i%2 == 1 {
			id = t2
		}
		key := fmt.Sprintf("a-%d", i)
		mustRecord(t, l, newOp(key, id, "alice", base.Add(time.Duration(i)*time.Second)))
		alice = append([]string{key}, alice...) // newest first
	}
	mustRecord(t, l, newOp("b-0", task.NewID(), "bob", base))
	for _, k := range []string{"a-1", "a-4"} {
		if _, err := l.UpdateOperation(ctx, k, func(o *task.Operation) error {
			return o.Move(task.OpUnknown, "no answer", base.Add(time.Hour))
		}); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(q store.OperationQuery) []string {
		t.Helper()
		var out []string
		for pages := 0; ; pages++ {
			ops, next, err := l.Operations(ctx, q)
			if err != nil {
				t.Fatalf("Operations(%+v): %v", q, err)
			}
			for _, o := range ops {
				out = append(out, o.Key)
			}
			if next == "" {
				return out
			}
			if pages > 20 {
				t.Fatal("endless pages")
			}
			q.Cursor = next
		}
	}
	for _, c := range []struct {
		q    store.OperationQuery
		want []string
	}{
		{store.OperationQuery{Owner: "alice"}, alice},
		{store.OperationQuery{Owner: "alice", Limit: 2}, alice},
		{store.OperationQuery{Owner: "alice", State: task.OpUnknown}, []string{"a-4", "a-1"}},
		{store.OperationQuery{Owner: "alice", State: task.OpIntended, Limit: 1}, []string{"a-6", "a-5", "a-3", "a-2", "a-0"}},
		{store.OperationQuery{TaskID: t2, Limit: 2}, []string{"a-5", "a-3", "a-1"}},
		{store.OperationQuery{Owner: "bob"}, []string{"b-0"}},
		{store.OperationQuery{Owner: "carol"}, nil},
	} {
		if got := keys(c.q); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("Operations(%+v) = %v, want %v", c.q, got, c.want)
		}
	}
	// A cursor is valid for its selection only.
	_, next, err := l.Operations(ctx, store.OperationQuery{Owner: "alice", Limit: 1})
	if err != nil || next == "" {
		t.Fatalf("first page: %q, %v", next, err)
	}
	for _, q := range []store.OperationQuery{{Owner: "bob", Cursor: next}, {Owner: "alice", Cursor: next + "x"}} {
		if _, _, err := l.Operations(ctx, q); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("Operations(%+v): err = %v, want ErrBadCursor", q, err)
		}
	}
}

func (s *suite) ledgerRetention(t *testing.T) {
	ctx := context.Background()
	_, l := s.ledger(t)
	id := task.NewID()
	mustRecord(t, l, newOp("old", id, "alice", base))
	mustRecord(t, l, newOp("edge", id, "alice", base.Add(time.Hour)))
	mustRecord(t, l, newOp("updated", id, "alice", base))
	if _, err := l.UpdateOperation(ctx, "updated", func(o *task.Operation) error {
		return o.Move(task.OpSubmitted, "", base.Add(2*time.Hour))
	}); err != nil {
		t.Fatal(err)
	}
	n, err := l.DeleteOperations(ctx, base.Add(time.Hour).Truncate(time.Millisecond))
	if err != nil || n != 1 {
		t.Fatalf("DeleteOperations = %d, %v; want 1", n, err)
	}
	ops, _, err := l.Operations(ctx, store.OperationQuery{TaskID: id})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range ops {
		got = append(got, o.Key)
	}
	if fmt.Sprint(got) != "[edge updated]" {
		t.Errorf("kept %v, want [edge updated]", got)
	}
}

func (s *suite) ledgerOutlivesTask(t *testing.T) {
	ctx := context.Background()
	st, l := s.ledger(t)
	expiring := newTask("alice", base)
	deleted := newTask("alice", base)
	mustCreate(t, st, expiring, deleted)
	mustRecord(t, l, newOp("op-exp", expiring.ID, "alice", base))
	mustRecord(t, l, newOp("op-del", deleted.ID, "alice", base))
	if _, err := st.Update(ctx, expiring.ID, func(tk *task.Task) error {
		tk.Status = task.Completed
		tk.TTL = time.Millisecond
		tk.LastUpdatedAt = base
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := st.DeleteExpired(ctx, base.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("DeleteExpired = %d, %v; want 1", n, err)
	}
	deleterOf(t, st).Delete(ctx, deleted.ID)
	for _, id := range []task.ID{expiring.ID, deleted.ID} {
		if _, err := st.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("task %s still there: %v", id, err)
		}
		ops, _, err := l.Operations(ctx, store.OperationQuery{TaskID: id})
		if err != nil || len(ops) != 1 {
			t.Errorf("operations of the gone task %s: %v, %v", id, ops, err)
		}
	}
}

func (s *suite) ledgerShared(t *testing.T) {
	ctx := context.Background()
	st, l := s.ledger(t)
	l2 := s.shared(t, st)
	op := mustRecord(t, l, newOp("op-1", task.NewID(), "alice", base))
	got := mustRecord(t, l2, newOp("op-1", task.NewID(), "bob", base.Add(time.Hour)))
	checkOp(t, "recorded on the other store", got, op)
	if _, err := l2.UpdateOperation(ctx, "op-1", func(o *task.Operation) error {
		o.Receipt = "r"
		return o.Move(task.OpSubmitted, "", base.Add(time.Minute))
	}); err != nil {
		t.Fatal(err)
	}
	ops, _, err := l.Operations(ctx, store.OperationQuery{Owner: "alice", State: task.OpSubmitted})
	if err != nil || len(ops) != 1 || ops[0].Receipt != "r" {
		t.Errorf("Operations on the first store = %v, %v", ops, err)
	}
}
