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

// runQuota checks Create with a quota (CreateOptions.MaxActive): what
// counts against it, and that racing creations never overshoot it, on one
// store and on two stores of one task space.
func (s *suite) runQuota(t *testing.T) {
	run(t, []testCase{
		{"Quota", s.quota},
		{"Concurrent", s.quotaConcurrent},
		{"Shared", func(t *testing.T) {
			a := s.store(t)
			QuotaShared(t, a, s.shared(t, a))
		}},
	})
}

// mustCreateQuota creates each of tasks with Create and the quota
// maxActive, failing the test on any error.
func mustCreateQuota(t *testing.T, st store.Store, maxActive int, tasks ...*task.Task) {
	t.Helper()
	for _, tk := range tasks {
		if err := st.Create(t.Context(), tk, store.CreateOptions{MaxActive: maxActive}); err != nil {
			t.Fatalf("Create(%s of %q, MaxActive %d): %v", tk.ID, tk.Owner, maxActive, err)
		}
	}
}

// checkTooMany creates tk with Create and the quota maxActive, which
// tk's owner has reached, and checks the outcome: ErrTooManyActive, and
// nothing stored.
func checkTooMany(t *testing.T, st store.Store, tk *task.Task, maxActive int) {
	t.Helper()
	err := st.Create(t.Context(), tk, store.CreateOptions{MaxActive: maxActive})
	if !errors.Is(err, store.ErrTooManyActive) {
		t.Fatalf("Create of a task of %q at the quota %d: err = %v, want store.ErrTooManyActive",
			tk.Owner, maxActive, err)
	}
	if _, err := st.Get(t.Context(), tk.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the task refused by the quota was stored (Get err = %v)", err)
	}
}

// unfinished returns the tasks of owner that are not terminal, read with
// List: a view of the store independent of the count Create makes.
func unfinished(t *testing.T, st store.Store, owner task.Owner) []*task.Task {
	t.Helper()
	var out []*task.Task
	for _, tk := range listAll(t, st, owner, 100) {
		if !tk.Status.Terminal() {
			out = append(out, tk)
		}
	}
	return out
}

// quota checks Create's quota (CreateOptions.MaxActive): what counts against it (the
// owner's working and input_required tasks, however created), what does
// not (finished tasks, other owners' tasks), that a refusal stores
// nothing, and that an idempotent retry is answered as such at the quota.
func (s *suite) quota(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()

	// No quota: 0 and negative quotas mean none, as with Create,
	// duplicate ID and idempotency key included.
	for _, maxActive := range []int{0, -1} {
		owner := fmt.Sprintf("unlimited%d", maxActive)
		for i := range 10 {
			mustCreateQuota(t, st, maxActive, newTask(task.Owner(owner), base.Add(time.Duration(i)*time.Second)))
		}
		if n := len(unfinished(t, st, task.Owner(owner))); n != 10 {
			t.Errorf("Create with quota %d: %q has %d unfinished tasks, want 10", maxActive, owner, n)
		}
		// (Which of ID and key a backend checks first is its own
		// business: the task that exists has no key.)
		plain := newTask(task.Owner(owner), base)
		keyed := newTaskWithKey(task.Owner(owner), "k")
		mustCreateQuota(t, st, maxActive, plain, keyed)
		if err := st.Create(ctx, plain, store.CreateOptions{MaxActive: maxActive}); !errors.Is(err, store.ErrExists) {
			t.Errorf("Create with quota %d of a task that exists: err = %v, want store.ErrExists", maxActive, err)
		}
		var de *store.DuplicateError
		if err := st.Create(ctx, newTaskWithKey(task.Owner(owner), "k"), store.CreateOptions{MaxActive: maxActive}); !errors.As(err, &de) || de.Task == nil {
			t.Errorf("Create with quota %d and a used idempotency key: err = %v, want a *store.DuplicateError", maxActive, err)
		} else {
			checkTask(t, "DuplicateError.Task", de.Task, want(keyed))
		}
	}

	// Quota 3: the fourth unfinished task is refused; a task waiting for
	// input counts as unfinished, and so do tasks made by plain Create.
	const quota = 3
	first := newTaskWithKey("alice", "key-1")
	second := newTask("alice", base.Add(time.Second))
	mustCreateQuota(t, st, quota, first, second)
	// Below the quota, a taken ID is refused as by Create.
	if err := st.Create(ctx, second, store.CreateOptions{MaxActive: quota}); !errors.Is(err, store.ErrExists) {
		t.Errorf("Create below the quota of a task that exists: err = %v, want store.ErrExists", err)
	}
	if _, err := st.Update(ctx, second.ID, func(tk *task.Task) error {
		_, err := tk.AddInputRequest(json.RawMessage(`{"method":"elicitation/create"}`), base.Add(2*time.Second))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	third := newTask("alice", base.Add(3*time.Second))
	mustCreate(t, st, third)
	checkTooMany(t, st, newTask("alice", base.Add(4*time.Second)), quota)
	// A larger quota has room; a smaller one is already exceeded.
	checkTooMany(t, st, newTask("alice", base.Add(4*time.Second)), 1)
	roomy := newTask("alice", base.Add(4*time.Second))
	mustCreateQuota(t, st, quota+1, roomy)
	checkTooMany(t, st, newTask("alice", base.Add(5*time.Second)), quota+1)

	// Other owners have quotas of their own, the empty owner included.
	for _, owner := range []string{"bob", "ALICE", ""} {
		var tasks []*task.Task
		for i := range quota {
			tasks = append(tasks, newTask(task.Owner(owner), base.Add(time.Duration(i)*time.Second)))
		}
		mustCreateQuota(t, st, quota, tasks...)
		checkTooMany(t, st, newTask(task.Owner(owner), base), quota)
		checkSameSet(t, fmt.Sprintf("unfinished tasks of %q", owner), unfinished(t, st, task.Owner(owner)), tasks)
	}

	// An idempotent retry at the quota is a duplicate, not a refusal,
	// with a quota of 1 too; a new key is refused.
	retry := newTaskWithKey("alice", "key-1")
	for _, q := range []int{quota, 1} {
		var de *store.DuplicateError
		err := st.Create(ctx, retry, store.CreateOptions{MaxActive: q})
		if !errors.As(err, &de) || de.Task == nil {
			t.Fatalf("Create at the quota %d with the idempotency key of an unfinished task: err = %v, want a *store.DuplicateError", q, err)
		}
		if errors.Is(err, store.ErrTooManyActive) {
			t.Errorf("the DuplicateError of an idempotent retry at the quota is also ErrTooManyActive")
		}
		checkTask(t, "DuplicateError.Task of a retry at the quota", de.Task, want(first))
		if _, err := st.Get(ctx, retry.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the task refused as a duplicate was stored (Get err = %v)", err)
		}
	}
	checkTooMany(t, st, newTaskWithKey("alice", "key-2"), quota+1)

	// Finishing a task frees its slot, whichever way it ends; the
	// finished task's key still answers retries.
	completed, err := st.Update(ctx, first.ID, func(tk *task.Task) error {
		return tk.Complete(json.RawMessage(`{"content":[]}`), base.Add(6*time.Second))
	})
	if err != nil {
		t.Fatal(err)
	}
	var de *store.DuplicateError
	if err := st.Create(ctx, retry, store.CreateOptions{MaxActive: quota + 1}); !errors.As(err, &de) || de.Task == nil {
		t.Fatalf("Create with the quota and the idempotency key of a completed task: err = %v, want a *store.DuplicateError", err)
	}
	checkTask(t, "DuplicateError.Task of a retry of a completed task", de.Task, completed)
	freed := newTask("alice", base.Add(7*time.Second))
	mustCreateQuota(t, st, quota+1, freed)
	checkTooMany(t, st, newTask("alice", base.Add(8*time.Second)), quota+1)
	if _, err := st.Update(ctx, second.ID, func(tk *task.Task) error {
		return tk.Cancel("stop", base.Add(9*time.Second))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(ctx, third.ID, func(tk *task.Task) error {
		return tk.Fail(&task.Error{Code: task.CodeInternalError, Message: "boom"}, "", base.Add(9*time.Second))
	}); err != nil {
		t.Fatal(err)
	}
	last := newTaskWithKey("alice", "key-2")
	another := newTask("alice", base.Add(10*time.Second))
	mustCreateQuota(t, st, quota+1, last, another)
	checkTooMany(t, st, newTask("alice", base.Add(11*time.Second)), quota+1)
	checkSameSet(t, "alice's unfinished tasks", unfinished(t, st, "alice"), []*task.Task{roomy, freed, last, another})

	// A task created finished takes no slot either.
	done := newTask("carol", base)
	if err := done.Complete(json.RawMessage(`{}`), base.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	mustCreateQuota(t, st, 1, done)
	mustCreateQuota(t, st, 1, newTask("carol", base.Add(2*time.Second)))
	checkTooMany(t, st, newTask("carol", base.Add(3*time.Second)), 1)
}

// quotaConcurrent races Creates with a quota of one owner: exactly
// the quota's worth succeed, whatever their interleaving, and the owner
// ends with exactly that many unfinished tasks.
func (s *suite) quotaConcurrent(t *testing.T) {
	st := s.store(t)
	const n, quota = 40, 5
	// Finished tasks of the owner and unfinished tasks of another owner
	// must not count.
	old := newTask("alice", base.Add(-time.Hour))
	if err := old.Cancel("", base.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, st, old, newTask("bob", base), newTask("bob", base))

	// Warm up: concurrent calls first, so that a backend with a
	// connection pool has its connections open and the racing calls
	// below overlap instead of queueing for the first connection.
	var warm sync.WaitGroup
	for i := range n {
		warm.Go(func() {
			if err := st.Create(t.Context(), newTask("warm-up", base.Add(time.Duration(i)*time.Millisecond)), store.CreateOptions{MaxActive: 0}); err != nil {
				t.Errorf("Create without quota: %v", err)
			}
		})
	}
	warm.Wait()

	tasks := make([]*task.Task, n)
	for i := range tasks {
		tasks[i] = newTask("alice", base.Add(time.Duration(i)*time.Millisecond))
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		created  []*task.Task
		refused  []*task.Task
		start    = make(chan struct{})
		ctx      = t.Context()
		bobTasks []*task.Task
	)
	for i := range n {
		wg.Go(func() {
			<-start
			err := st.Create(ctx, tasks[i], store.CreateOptions{MaxActive: quota})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created = append(created, tasks[i])
			case errors.Is(err, store.ErrTooManyActive):
				refused = append(refused, tasks[i])
			default:
				t.Errorf("concurrent Create with a quota: %v", err)
			}
		})
	}
	// Meanwhile another owner creates up to the same quota: unaffected.
	for i := range quota - 2 {
		tk := newTask("bob", base.Add(time.Duration(i)*time.Millisecond))
		bobTasks = append(bobTasks, tk)
		wg.Go(func() {
			<-start
			if err := st.Create(ctx, tk, store.CreateOptions{MaxActive: quota}); err != nil {
				t.Errorf("Create of another owner below the quota: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(created) != quota || len(refused) != n-quota {
		t.Fatalf("%d concurrent Creates with quota %d: %d created, %d refused; want %d and %d",
			n, quota, len(created), len(refused), quota, n-quota)
	}
	checkSameSet(t, "alice's unfinished tasks", unfinished(t, st, "alice"), created)
	for _, tk := range refused {
		if _, err := st.Get(ctx, tk.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("task %s refused by the quota was stored (Get err = %v)", tk.ID, err)
		}
	}
	if n := len(unfinished(t, st, "bob")); n != quota {
		t.Errorf("bob has %d unfinished tasks, want %d", n, quota)
	}
	for _, tk := range bobTasks {
		checkTask(t, "task of another owner", mustGet(t, st, tk.ID), want(tk))
	}
}

// QuotaShared races Creates with a quota of one owner ("alice") over two
// stores sharing one task space (one SQLite file, one PostgreSQL schema),
// as two processes would: exactly the quota's worth succeed, and a List
// through either store shows exactly those. The Quota area runs it on the
// stores of Backend.Open and Backend.OpenShared; backends may also call it
// from their own tests, with stores of different settings. a and b must
// hold no task of alice.
func QuotaShared(t *testing.T, a, b store.Store) {
	t.Helper()
	ctx := t.Context()
	const n, quota = 40, 5
	stores := []store.Store{a, b}
	// Warm up both (connection pools, statement caches), so that the
	// racing calls overlap instead of queueing for a first connection.
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, _, err := stores[i%2].List(ctx, "warm-up", "", 1); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var (
		mu      sync.Mutex
		created int
		start   = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			err := stores[i%2].Create(ctx, newTask("alice", base.Add(time.Duration(i)*time.Millisecond)), store.CreateOptions{MaxActive: quota})
			switch {
			case err == nil:
				mu.Lock()
				created++
				mu.Unlock()
			case !errors.Is(err, store.ErrTooManyActive):
				t.Errorf("Create with a quota: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if created != quota {
		t.Errorf("%d racing Creates with a quota on two stores with quota %d: %d created", n, quota, created)
	}
	for _, st := range stores {
		if got := unfinished(t, st, "alice"); len(got) != quota {
			t.Errorf("alice has %d unfinished tasks, want %d", len(got), quota)
		}
	}
}
