package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runIdempotency checks Create with an idempotency key: a retry of an
// owner's key is answered with a *store.DuplicateError holding the task.
func (s *suite) runIdempotency(t *testing.T) {
	run(t, []testCase{
		{"Key", s.createIdempotencyKey},
		{"KeyConcurrent", s.createIdempotencyKeyConcurrent},
		{"KeyScope", s.createIdempotencyKeyScope},
		{"GetByKey", s.getByKey},
	})
}

// getByKey: GetByKey finds the task of a key in the owner's key scope
// (another anonymous session's too), not another owner's, and no task
// for an empty or unknown key.
func (s *suite) getByKey(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	alice := newTaskWithKey(task.UserOwner("acme", "alice"), "k1")
	anon := newTaskWithKey(task.AnonymousOwner("session-a"), "k2")
	mustCreate(t, st, alice, anon, newTask(task.UserOwner("acme", "alice"), base))
	if got, err := st.GetByKey(ctx, task.UserOwner("acme", "alice"), "k1"); err != nil || got.ID != alice.ID {
		t.Fatalf("GetByKey of alice's key: %+v, %v", got, err)
	}
	if got, err := st.GetByKey(ctx, task.AnonymousOwner("session-b"), "k2"); err != nil || got.ID != anon.ID {
		t.Fatalf("GetByKey of another anonymous session's key: %+v, %v", got, err)
	}
	for _, c := range []struct {
		owner task.Owner
		key   string
	}{{task.UserOwner("acme", "bob"), "k1"}, {task.UserOwner("acme", "alice"), ""}, {task.UserOwner("acme", "alice"), "nope"}} {
		if got, err := st.GetByKey(ctx, c.owner, c.key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetByKey(%s, %q) = %+v, %v; want ErrNotFound", c.owner, c.key, got, err)
		}
	}
}

// createIdempotencyKeyScope: a key is unique per key owner
// (task.Owner.KeyScope): every anonymous owner shares one scope, so a retry
// from another anonymous session finds the task; two authenticated owners
// each have their own.
func (s *suite) createIdempotencyKeyScope(t *testing.T) {
	st := s.store(t)
	first := newTaskWithKey(task.AnonymousOwner("session-a"), "shared-key")
	mustCreate(t, st, first)
	checkDuplicateKey(t, st, newTaskWithKey(task.AnonymousOwner("session-b"), "shared-key"), want(first))
	checkDuplicateKey(t, st, newTaskWithKey(task.AnonymousOwner(""), "shared-key"), want(first))

	alice := newTaskWithKey(task.UserOwner("acme", "alice"), "shared-key")
	mustCreate(t, st, alice)
	mustCreate(t, st, newTaskWithKey(task.UserOwner("acme", "bob"), "shared-key"))
	checkDuplicateKey(t, st, newTaskWithKey(task.UserOwner("acme", "alice"), "shared-key"), want(alice))
}

// checkDuplicateKey creates tk, whose owner already has the task existing
// with tk's idempotency key, and checks the outcome: a *store.DuplicateError
// holding existing as it is now, and nothing stored.
func checkDuplicateKey(t *testing.T, st store.Store, tk *task.Task, existing *task.Task) {
	t.Helper()
	err := st.Create(t.Context(), tk, store.CreateOptions{})
	var de *store.DuplicateError
	if !errors.As(err, &de) {
		t.Fatalf("Create with the idempotency key %q that %q already used: err = %v, want a *store.DuplicateError",
			tk.IdempotencyKey, tk.Owner, err)
	}
	if de.Task == nil {
		t.Fatal("DuplicateError.Task is nil")
	}
	checkTask(t, "DuplicateError.Task", de.Task, existing)
	if _, err := st.Get(t.Context(), tk.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the task refused as a duplicate was stored (Get err = %v)", err)
	}
}

func (s *suite) createIdempotencyKey(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	first := newTask("alice", base)
	first.IdempotencyKey = "key-1"
	mustCreate(t, st, first)

	retry := newTask("alice", base.Add(time.Second))
	retry.IdempotencyKey = "key-1"
	retry.Request = json.RawMessage(`{"name":"echo","arguments":{"text":"other"}}`)
	checkDuplicateKey(t, st, retry, want(first))

	// The existing task comes back as it is now.
	updated, err := st.Update(ctx, first.ID, func(tk *task.Task) error {
		tk.Runner = "engine-1"
		tk.LeaseExpiresAt = base.Add(time.Minute)
		return tk.SetStatusMessage("halfway", base.Add(2*time.Second))
	})
	if err != nil {
		t.Fatal(err)
	}
	checkDuplicateKey(t, st, retry, updated)

	// The same key for another owner, another key (keys are compared
	// exactly, case included), no key at all: distinct tasks.
	bob := newTask("bob", base)
	bob.IdempotencyKey = "key-1"
	other := newTask("alice", base)
	other.IdempotencyKey = "key-2"
	upper := newTask("alice", base)
	upper.IdempotencyKey = "KEY-1"
	noKey1, noKey2 := newTask("alice", base), newTask("alice", base)
	anon1, anon2 := newTask("", base), newTask("", base)
	mustCreate(t, st, bob, other, upper, noKey1, noKey2, anon1, anon2)
	for _, tk := range []*task.Task{bob, other, upper, noKey1, noKey2, anon1, anon2} {
		checkTask(t, "task created with a distinct (owner, key)", mustGet(t, st, tk.ID), want(tk))
	}
	checkSameSet(t, "alice's tasks", listAll(t, st, "alice", 100), []*task.Task{first, other, upper, noKey1, noKey2})

	// A terminal task keeps its key.
	completed, err := st.Update(ctx, first.ID, func(tk *task.Task) error {
		return tk.Complete(json.RawMessage(`{"content":[]}`), base.Add(3*time.Second))
	})
	if err != nil {
		t.Fatal(err)
	}
	checkDuplicateKey(t, st, retry, completed)

	// Deleting the task frees its key.
	if err := deleterOf(t, st).Delete(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if err := st.Create(ctx, retry, store.CreateOptions{}); err != nil {
		t.Fatalf("Create with the key of a deleted task: %v", err)
	}
	checkTask(t, "task created with the key of a deleted task", mustGet(t, st, retry.ID), want(retry))
	checkDuplicateKey(t, st, newTaskWithKey("alice", "key-1"), want(retry))

	// So does DeleteExpired.
	old := newTask("carol", base.Add(-48*time.Hour))
	old.IdempotencyKey = "key-3"
	if err := old.Complete(json.RawMessage(`{}`), base.Add(-47*time.Hour)); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, st, old)
	again := newTaskWithKey("carol", "key-3")
	checkDuplicateKey(t, st, again, want(old))
	if n, err := st.DeleteExpired(ctx, base); err != nil || n != 1 {
		t.Fatalf("DeleteExpired = %d, %v; want 1", n, err)
	}
	if err := st.Create(ctx, again, store.CreateOptions{}); err != nil {
		t.Fatalf("Create with the key of a task deleted by DeleteExpired: %v", err)
	}
	checkTask(t, "task created with the key of an expired task", mustGet(t, st, again.ID), want(again))
}

// createIdempotencyKeyConcurrent races Creates with one key: for each
// owner exactly one wins, and every other gets the winner.
func (s *suite) createIdempotencyKeyConcurrent(t *testing.T) {
	st := s.store(t)
	const n = 20
	var alice, others []*task.Task
	for i := range n {
		alice = append(alice, newTaskWithKey("alice", "same"))
		others = append(others, newTaskWithKey(task.Owner(fmt.Sprintf("owner-%d", i)), "same"))
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []*task.Task
		dups    []*task.Task // DuplicateError.Task
	)
	for i := range n {
		wg.Go(func() {
			err := st.Create(t.Context(), alice[i], store.CreateOptions{})
			var de *store.DuplicateError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, alice[i])
			case errors.As(err, &de) && de.Task != nil:
				dups = append(dups, de.Task)
			default:
				t.Errorf("concurrent Create with one key: %v", err)
			}
		})
		wg.Go(func() {
			if err := st.Create(t.Context(), others[i], store.CreateOptions{}); err != nil {
				t.Errorf("Create with a key that only another owner uses: %v", err)
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d concurrent Creates with one key: %d succeeded, want 1", n, len(winners))
	}
	if len(dups) != n-1 {
		t.Errorf("%d concurrent Creates with one key: %d DuplicateErrors, want %d", n, len(dups), n-1)
	}
	for _, d := range dups {
		checkTask(t, "DuplicateError.Task of a concurrent Create", d, want(winners[0]))
	}
	checkSameSet(t, "alice's tasks", listAll(t, st, "alice", 100), winners)
	for _, tk := range others {
		checkTask(t, "task of another owner", mustGet(t, st, tk.ID), want(tk))
	}
}
