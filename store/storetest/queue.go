package storetest

import (
	"cmp"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runQueue checks the concurrency queues ([store.Queuer] and
// CreateOptions.MaxConcurrent): who runs and who waits, in which order
// they start, that the cap holds under racing creations and starts on
// two stores of one task space, and that Claim leaves waiting tasks
// alone.
func (s *suite) runQueue(t *testing.T) {
	run(t, []testCase{
		{"CapAndOrder", s.queueCapAndOrder},
		{"StartQueued", s.queueStart},
		{"FairAcrossOwners", s.queueFair},
		{"ClaimSkipsWaiting", s.queueClaim},
		{"Shared", func(t *testing.T) {
			a := s.queuer(t)
			QueueShared(t, a, s.shared(t, a))
		}},
	})
}

// queuer returns a new store that must be a store.Queuer, or skips.
func (s *suite) queuer(t *testing.T) store.Store {
	t.Helper()
	st := s.store(t)
	return st
}

// queueTask returns a task of queue created at created, as an engine
// creates it: held by runner with a lease and its first attempt.
func queueTask(queue string, created time.Time, runner string) *task.Task {
	tk := newTask("alice", created)
	tk.Queue = queue
	tk.Runner = runner
	tk.LeaseExpiresAt = created.Add(time.Minute)
	tk.Attempts = 1
	tk.StartedAt = created
	return tk
}

// waitingAs is what a store must hold of orig inserted waiting with ahead
// tasks before it.
func waitingAs(orig *task.Task, ahead int64) *task.Task {
	w := want(orig)
	w.Queued, w.Runner, w.LeaseExpiresAt, w.Attempts, w.StartedAt = true, "", time.Time{}, 0, time.Time{}
	w.StatusMessage = task.QueuedMessage(ahead)
	return w
}

func mustCreateCapped(t *testing.T, st store.Store, max int, tasks ...*task.Task) {
	t.Helper()
	for _, tk := range tasks {
		if err := st.Create(t.Context(), tk, store.CreateOptions{MaxConcurrent: max}); err != nil {
			t.Fatalf("Create with MaxConcurrent %d: %v", max, err)
		}
	}
}

func (s *suite) queueCapAndOrder(t *testing.T) {
	st := s.queuer(t)
	ctx := t.Context()
	var q []*task.Task
	for i := range 4 {
		q = append(q, queueTask("deploys", base.Add(time.Duration(i)*time.Millisecond), "engine-a"))
	}
	// Another queue's tasks, and tasks of no queue, do not count.
	other := queueTask("builds", base, "engine-a")
	plain := newTask("alice", base)
	mustCreate(t, st, plain)
	mustCreateCapped(t, st, 1, other)
	mustCreateCapped(t, st, 2, q...)
	for i, tk := range q[:2] {
		if tk.Queued || tk.Runner != "engine-a" {
			t.Errorf("task %d under the cap: Queued %v, Runner %q; want it to run as given", i, tk.Queued, tk.Runner)
		}
		checkTask(t, "task under the cap", mustGet(t, st, tk.ID), want(tk))
	}
	for i, tk := range q[2:] {
		w := waitingAs(tk, int64(i))
		if !tk.Queued || tk.Runner != "" || tk.Attempts != 0 || tk.StatusMessage != w.StatusMessage || !tk.LeaseExpiresAt.IsZero() {
			t.Errorf("Create left task %d over the cap as Queued %v, Runner %q, Attempts %d, message %q, lease %v; want what it stored",
				i+2, tk.Queued, tk.Runner, tk.Attempts, tk.StatusMessage, tk.LeaseExpiresAt)
		}
		checkTask(t, "task over the cap", mustGet(t, st, tk.ID), w)
	}
	checkTask(t, "task of another queue", mustGet(t, st, other.ID), want(other))

	// An idempotent retry of a waiting task finds it waiting.
	keyed := queueTask("deploys", base.Add(time.Second), "engine-a")
	keyed.IdempotencyKey = "deploy-42"
	mustCreateCapped(t, st, 2, keyed)
	again := queueTask("deploys", base.Add(2*time.Second), "engine-b")
	again.IdempotencyKey = "deploy-42"
	var dup *store.DuplicateError
	if err := st.Create(ctx, again, store.CreateOptions{MaxConcurrent: 2}); !errors.As(err, &dup) || dup.Task.ID != keyed.ID || !dup.Task.Queued {
		t.Errorf("retry of a waiting task: %v, want a *DuplicateError holding it, waiting", err)
	}

	// A task that asks for input still runs: it keeps its slot.
	if _, err := st.Update(ctx, q[0].ID, func(tk *task.Task) error { return tk.Transition(task.InputRequired, base) }); err != nil {
		t.Fatal(err)
	}
	late := queueTask("deploys", base.Add(time.Hour), "engine-a")
	mustCreateCapped(t, st, 2, late)
	if !late.Queued || late.StatusMessage != task.QueuedMessage(3) {
		t.Errorf("task created behind 3 waiting ones while an input_required task holds a slot: Queued %v, %q", late.Queued, late.StatusMessage)
	}
	// A lower cap than the running count queues too; a missing queue is
	// an error.
	if err := st.Create(ctx, newTask("alice", base), store.CreateOptions{MaxConcurrent: 1}); err == nil {
		t.Error("Create with MaxConcurrent of a task without a Queue succeeded")
	}
}

func (s *suite) queueStart(t *testing.T) {
	st := s.queuer(t)
	qr := st
	ctx := t.Context()
	var q []*task.Task
	for i := range 5 {
		q = append(q, queueTask("deploys", base.Add(time.Duration(i)*time.Millisecond), "engine-a"))
	}
	mustCreateCapped(t, st, 2, q...)
	now := base.Add(time.Minute)
	req := store.QueueRequest{Runner: "engine-b", Queue: "deploys", Max: 2, Now: now, Lease: 30 * time.Second}
	start := func(want ...*task.Task) []*task.Task {
		t.Helper()
		got, err := qr.StartQueued(ctx, req)
		if err != nil {
			t.Fatalf("StartQueued: %v", err)
		}
		if !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("StartQueued started %v, want %v", ids(got), ids(want))
		}
		return got
	}
	start() // full: nothing starts
	// A task that ends with a tool error is stored as one.
	toolError := json.RawMessage(`{"content":[{"type":"text","text":"3 tests failed"}],"isError":true}`)
	if _, err := st.Update(ctx, q[0].ID, func(tk *task.Task) error { return tk.Complete(toolError, now) }); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, st, q[0].ID); !got.ToolError || got.Outcome() != task.OutcomeToolError || !got.StartedAt.Equal(ms(q[0].StartedAt)) {
		t.Errorf("task completed with isError: ToolError %v, outcome %q, started %v; want a tool error started at its creation",
			got.ToolError, got.Outcome(), got.StartedAt)
	}
	got := start(q[2])
	w := want(q[2])
	w.Queued, w.Runner, w.LeaseExpiresAt, w.Attempts, w.StatusMessage, w.LastUpdatedAt = false, "engine-b", ms(now.Add(30*time.Second)), 1, "", ms(now)
	w.StartedAt = ms(now) // its start from the queue, not its creation
	checkTask(t, "started task as returned", got[0], w)
	checkTask(t, "started task as stored", mustGet(t, st, q[2].ID), w)
	// The tasks behind moved up.
	checkTask(t, "first waiting task", mustGet(t, st, q[3].ID), waitingAs(q[3], 0))
	checkTask(t, "second waiting task", mustGet(t, st, q[4].ID), waitingAs(q[4], 1))

	// Two slots free (one ended, and a cancelled waiting task frees none
	// but leaves the queue): the next two start, oldest first.
	for _, id := range []task.ID{q[1].ID, q[2].ID} {
		if _, err := st.Update(ctx, id, func(tk *task.Task) error { return tk.Cancel("", now) }); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := qr.WaitingQueues(ctx); err != nil || len(got) != 1 || got["deploys"] != 2 {
		t.Errorf("WaitingQueues with two waiting tasks of deploys: %v, %v", got, err)
	}
	start(q[3], q[4])
	start()
	if got, err := qr.WaitingQueues(ctx); err != nil || len(got) != 0 {
		t.Errorf("WaitingQueues with none waiting: %v, %v", got, err)
	}
	// A raised cap starts more at once; a queue with nothing waiting
	// starts nothing.
	req.Queue = "empty"
	start()
}

// queueFair: StartQueued takes turns between the owners of a queue's
// waiting tasks: the owner with the fewest running tasks in the queue
// first, its oldest waiting task first, ties by age. An owner who
// enqueued 40 tasks before another enqueued one does not make the other
// wait for all 40: with a cap of 1, the other's task starts within the
// first two starts, and the waiting tasks' messages count the places in
// that order. One owner's tasks start in creation order.
func (s *suite) queueFair(t *testing.T) {
	st := s.queuer(t)
	qr := st
	ctx := t.Context()
	var flood []*task.Task
	for i := range 40 {
		tk := queueTask("deploys", base.Add(time.Duration(i)*time.Millisecond), "engine-a")
		tk.Owner = "tenant-a"
		flood = append(flood, tk)
	}
	mustCreateCapped(t, st, 1, flood...)
	other := queueTask("deploys", base.Add(time.Second), "engine-a")
	other.Owner = "tenant-b"
	mustCreateCapped(t, st, 1, other)
	if !other.Queued {
		t.Fatal("the other owner's task did not wait behind the full queue")
	}
	now := base.Add(time.Minute)
	req := store.QueueRequest{Runner: "engine-b", Queue: "deploys", Max: 1, Now: now, Lease: 30 * time.Second}
	running := flood[0].ID
	var order []task.ID
	for range len(flood) {
		if _, err := st.Update(ctx, running, func(tk *task.Task) error { return tk.Complete(nil, now) }); err != nil {
			t.Fatal(err)
		}
		got, err := qr.StartQueued(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("start %d with a free slot started %v", len(order)+1, ids(got))
		}
		running = got[0].ID
		order = append(order, running)
		if len(order) == 1 && running != other.ID {
			// The other owner has none running and the oldest of the
			// others' turns now: it waits first in line.
			if msg := mustGet(t, st, other.ID).StatusMessage; msg != task.QueuedMessage(0) {
				t.Errorf("the other owner's task after the first start says %q, want %q", msg, task.QueuedMessage(0))
			}
		}
	}
	if i := slices.Index(order, other.ID); i < 0 || i > 1 {
		t.Errorf("the other owner's task started %d-th (of %d starts), want within the first 2", i+1, len(order))
	}
	var rest []task.ID
	for _, id := range order {
		if id != other.ID {
			rest = append(rest, id)
		}
	}
	if !slices.Equal(rest, ids(flood[1:])) {
		t.Errorf("one owner's tasks started out of creation order: %v, want %v", rest, ids(flood[1:]))
	}
}

func (s *suite) queueClaim(t *testing.T) {
	st := s.queuer(t)
	ctx := t.Context()
	running := queueTask("deploys", base, "engine-a")
	waiting := queueTask("deploys", base.Add(time.Millisecond), "engine-a")
	mustCreateCapped(t, st, 1, running, waiting)
	for _, ignore := range []bool{false, true} {
		got, err := st.Claim(ctx, store.ClaimRequest{Runner: "engine-z", Now: base.Add(time.Hour), Lease: time.Minute, IgnoreLeases: ignore})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(ids(got), waiting.ID) {
			t.Errorf("Claim (IgnoreLeases %v) took a waiting task", ignore)
		}
	}
	checkTask(t, "waiting task after Claim", mustGet(t, st, waiting.ID), waitingAs(waiting, 0))
}

// QueueShared races 50 Creates of one queue with a cap of 3 over two
// stores sharing one task space (one SQLite file, one PostgreSQL schema),
// as two processes would, then ends the running tasks one at a time while
// both stores race to start the next: exactly 3 run at any moment, and
// the waiting tasks start in creation order. The Queue area runs it on
// the stores of Backend.Open and Backend.OpenShared. a and b must hold no
// task of the queue "shared-queue".
func QueueShared(t *testing.T, a, b store.Store) {
	t.Helper()
	ctx := t.Context()
	const n, max, queue = 50, 3, "shared-queue"
	stores := []store.Store{a, b}
	tasks := make([]*task.Task, n)
	for i := range tasks {
		tasks[i] = queueTask(queue, base.Add(time.Duration(i)*time.Millisecond), "engine-a")
	}
	var wg sync.WaitGroup
	startLine := make(chan struct{})
	for i, tk := range tasks {
		wg.Go(func() {
			<-startLine
			if err := stores[i%2].Create(ctx, tk, store.CreateOptions{MaxConcurrent: max}); err != nil {
				t.Errorf("racing Create with MaxConcurrent: %v", err)
			}
		})
	}
	close(startLine)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var running, waiting []*task.Task
	var messages []string
	for _, tk := range tasks {
		got := mustGet(t, a, tk.ID)
		if got.Queued {
			waiting = append(waiting, got)
			messages = append(messages, got.StatusMessage)
		} else {
			running = append(running, got)
		}
	}
	if len(running) != max {
		t.Fatalf("%d racing Creates with a cap of %d: %d run, want %d", n, max, len(running), max)
	}
	// Each waiting task was told its place when it was inserted: every
	// place from 0 to n-max-1 exactly once.
	var wantMsgs []string
	for i := range n - max {
		wantMsgs = append(wantMsgs, task.QueuedMessage(int64(i)))
	}
	slices.Sort(messages)
	slices.Sort(wantMsgs)
	if !slices.Equal(messages, wantMsgs) {
		t.Errorf("status messages of the waiting tasks: %q, want one of each place %q", messages, wantMsgs)
	}
	slices.SortFunc(waiting, func(x, y *task.Task) int {
		return cmp.Or(x.CreatedAt.Compare(y.CreatedAt), cmp.Compare(x.ID, y.ID))
	})

	now := base.Add(time.Hour)
	for len(waiting) > 0 {
		// End one running task, then let both stores race to start.
		done := running[0]
		running = running[1:]
		if _, err := a.Update(ctx, done.ID, func(tk *task.Task) error { return tk.Complete(nil, now) }); err != nil {
			t.Fatal(err)
		}
		var (
			mu      sync.Mutex
			started []*task.Task
		)
		for i, st := range stores {
			wg.Go(func() {
				got, err := st.StartQueued(ctx, store.QueueRequest{
					Runner: []string{"engine-a", "engine-b"}[i], Queue: queue, Max: max, Now: now, Lease: time.Minute})
				if err != nil {
					t.Errorf("StartQueued: %v", err)
				}
				mu.Lock()
				started = append(started, got...)
				mu.Unlock()
			})
		}
		wg.Wait()
		if len(started) != 1 || started[0].ID != waiting[0].ID {
			t.Fatalf("one slot freed, both stores raced to start: started %v, want exactly the oldest waiting task %s", ids(started), waiting[0].ID)
		}
		running = append(running, started[0])
		waiting = waiting[1:]
		if len(waiting) > 0 {
			if got := mustGet(t, b, waiting[0].ID); got.StatusMessage != task.QueuedMessage(0) {
				t.Errorf("head of the queue says %q, want %q", got.StatusMessage, task.QueuedMessage(0))
			}
		}
	}
}
