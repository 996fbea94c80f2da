package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// leaseTask returns a task in status held by runner until lease; runner ""
// and a zero lease mean held by no engine. Tasks get distinct creation
// times.
func leaseTask(status task.Status, runner string, lease time.Time) *task.Task {
	tk := newTask("alice", base.Add(-time.Duration(leaseSeq.Add(1))*time.Second))
	tk.Status = status
	tk.Runner = runner
	tk.LeaseExpiresAt = lease
	return tk
}

var leaseSeq atomic.Int64

// claimedAs is what a store must hold of orig after runner claimed it
// with a lease ending at until.
func claimedAs(orig *task.Task, runner string, until time.Time) *task.Task {
	w := want(orig)
	w.Runner = runner
	w.LeaseExpiresAt = ms(until)
	return w
}

// mustClaim calls Claim and checks that it returned exactly the tasks of
// wantClaimed, each (and its stored copy) as claimedAs says.
func mustClaim(t *testing.T, st store.Store, req store.ClaimRequest, wantClaimed []*task.Task) []*task.Task {
	t.Helper()
	got, err := st.Claim(t.Context(), req)
	if err != nil {
		t.Fatalf("Claim(%+v): %v", req, err)
	}
	what := fmt.Sprintf("Claim by %s at %s (IgnoreLeases %v, Limit %d)", req.Runner, task.FormatTime(req.Now), req.IgnoreLeases, req.Limit)
	checkSameSet(t, what, got, wantClaimed)
	for _, g := range got {
		for _, orig := range wantClaimed {
			if g.ID == orig.ID {
				w := claimedAs(orig, req.Runner, req.Now.Add(req.Lease))
				checkTask(t, what+": returned task", g, w)
				checkTask(t, what+": Get after the claim", mustGet(t, st, g.ID), w)
			}
		}
	}
	return got
}

// checkUnchanged checks that the store still holds each task as created.
func checkUnchanged(t *testing.T, st store.Store, what string, tasks ...*task.Task) {
	t.Helper()
	for _, tk := range tasks {
		checkTask(t, what, mustGet(t, st, tk.ID), want(tk))
	}
}

func (s *suite) claim(t *testing.T) {
	st := s.store(t)
	now := base // sub-millisecond digits, non-UTC zone
	const lease = 30 * time.Second

	if got, err := st.Claim(t.Context(), store.ClaimRequest{Runner: "engine-b", Now: now, Lease: lease}); err != nil || len(got) != 0 {
		t.Fatalf("Claim on an empty store = %v, %v; want nothing", ids(got), err)
	}

	claimable := []*task.Task{
		leaseTask(task.Working, "", time.Time{}), // never held
		leaseTask(task.InputRequired, "", time.Time{}),
		leaseTask(task.Working, "engine-dead", now.Add(-time.Hour)),
		leaseTask(task.Working, "engine-dead", now.Add(-time.Millisecond)),
		leaseTask(task.InputRequired, "engine-dead", now.Add(-time.Minute)),
		// The claimer's own task whose lease ended: without
		// IgnoreLeases only the lease counts.
		leaseTask(task.Working, "engine-b", now.Add(-time.Second)),
	}
	live := []*task.Task{
		leaseTask(task.Working, "engine-live", now.Add(time.Millisecond)),
		leaseTask(task.InputRequired, "engine-live", now.Add(time.Hour)),
		leaseTask(task.Working, "engine-b", now.Add(time.Minute)),
	}
	terminal := []*task.Task{
		leaseTask(task.Completed, "", time.Time{}),
		leaseTask(task.Failed, "", time.Time{}),
		leaseTask(task.Cancelled, "", time.Time{}),
		// Terminal, even if a runner's name and an ended lease are on it.
		leaseTask(task.Completed, "engine-dead", now.Add(-time.Hour)),
	}
	mustCreate(t, st, claimable...)
	mustCreate(t, st, live...)
	mustCreate(t, st, terminal...)

	mustClaim(t, st, store.ClaimRequest{Runner: "engine-b", Now: now, Lease: lease}, claimable)
	checkUnchanged(t, st, "task with a live lease after a Claim", live...)
	checkUnchanged(t, st, "terminal task after a Claim", terminal...)

	// The claimed tasks are held now: another engine gets nothing.
	mustClaim(t, st, store.ClaimRequest{Runner: "engine-c", Now: now, Lease: lease}, nil)

	// Much later every lease has ended: every non-terminal task is taken,
	// never a terminal one.
	later := now.Add(2 * time.Hour)
	mustClaim(t, st, store.ClaimRequest{Runner: "engine-c", Now: later, Lease: lease, Limit: 100},
		slices.Concat(asClaimed(claimable, "engine-b", now.Add(lease)), live))
	checkUnchanged(t, st, "terminal task after a Claim", terminal...)
}

// asClaimed returns the tasks as the store holds them after runner
// claimed them with a lease ending at until.
func asClaimed(tasks []*task.Task, runner string, until time.Time) []*task.Task {
	out := make([]*task.Task, len(tasks))
	for i, tk := range tasks {
		out[i] = claimedAs(tk, runner, until)
	}
	return out
}

// claimLeaseBoundary pins "before Now": a lease ending at Now has not
// ended, and the comparison is with the stored (millisecond) lease.
func (s *suite) claimLeaseBoundary(t *testing.T) {
	st := s.store(t)
	end := time.Date(2026, 7, 28, 9, 0, 0, 500_000_000, time.UTC)
	tk := leaseTask(task.Working, "engine-a", end)
	mustCreate(t, st, tk)
	for _, now := range []time.Time{
		end.Add(-time.Millisecond),
		end.Add(-time.Microsecond),
		end,
		end.In(time.FixedZone("UTC-5", -5*3600)),
	} {
		mustClaim(t, st, store.ClaimRequest{Runner: "engine-b", Now: now, Lease: time.Minute}, nil)
	}
	checkUnchanged(t, st, "task whose lease ends at Now", tk)
	// Within the lease's last millisecond, the lease (10:00:00.500) is
	// before Now (10:00:00.500250).
	mustClaim(t, st, store.ClaimRequest{Runner: "engine-b", Now: end.Add(250 * time.Microsecond), Lease: time.Minute}, []*task.Task{tk})
}

func (s *suite) claimLimit(t *testing.T) {
	st := s.store(t)
	now := base
	var tasks []*task.Task
	for range 10 {
		tasks = append(tasks, leaseTask(task.Working, "", time.Time{}))
	}
	done := leaseTask(task.Completed, "", time.Time{})
	mustCreate(t, st, tasks...)
	mustCreate(t, st, done)

	holder := map[task.ID]string{}
	for i, wantN := range []int{3, 3, 3, 1, 0} {
		runner := fmt.Sprintf("engine-%d", i)
		got, err := st.Claim(t.Context(), store.ClaimRequest{Runner: runner, Now: now, Lease: time.Minute, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != wantN {
			t.Fatalf("Claim %d with Limit 3 of 10 tasks claimed %d, want %d", i+1, len(got), wantN)
		}
		for _, tk := range got {
			if prev, ok := holder[tk.ID]; ok {
				t.Errorf("task %s claimed by %s, then again by %s while its lease is live", tk.ID, prev, runner)
			}
			holder[tk.ID] = runner
		}
	}
	if len(holder) != len(tasks) {
		t.Errorf("Claims with Limit 3 took %d distinct tasks, want %d", len(holder), len(tasks))
	}
	for _, tk := range tasks {
		if got := mustGet(t, st, tk.ID); got.Runner != holder[tk.ID] {
			t.Errorf("task %s: Runner = %q, want %q, its claimer", tk.ID, got.Runner, holder[tk.ID])
		}
	}

	// Limit <= 0: no cap.
	for i, limit := range []int{0, -1} {
		at := now.Add(time.Duration(i+1) * time.Hour)
		runner := fmt.Sprintf("engine-nolimit-%d", i)
		got, err := st.Claim(t.Context(), store.ClaimRequest{Runner: runner, Now: at, Lease: time.Minute, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		checkSameSet(t, fmt.Sprintf("Claim with Limit %d", limit), got, tasks)
	}
	checkUnchanged(t, st, "terminal task", done)
}

func (s *suite) claimIgnoreLeases(t *testing.T) {
	st := s.store(t)
	now := base
	const lease = time.Minute
	mine := []*task.Task{
		leaseTask(task.Working, "engine-a", now.Add(time.Hour)),
		leaseTask(task.Working, "engine-a", now.Add(-time.Hour)), // ended, but the claimer's own
	}
	others := []*task.Task{
		leaseTask(task.Working, "engine-x", now.Add(time.Hour)),
		leaseTask(task.InputRequired, "engine-x", now.Add(time.Hour)),
		leaseTask(task.Working, "engine-y", now.Add(-time.Hour)),
		leaseTask(task.Working, "", time.Time{}),
	}
	terminal := []*task.Task{
		leaseTask(task.Completed, "engine-x", now.Add(time.Hour)),
		leaseTask(task.Cancelled, "", time.Time{}),
	}
	mustCreate(t, st, mine...)
	mustCreate(t, st, others...)
	mustCreate(t, st, terminal...)

	mustClaim(t, st, store.ClaimRequest{Runner: "engine-a", Now: now, Lease: lease, IgnoreLeases: true}, others)
	checkUnchanged(t, st, "the claimer's own task", mine...)
	checkUnchanged(t, st, "terminal task", terminal...)

	// Now engine-a holds them all: a second such claim gets nothing.
	mustClaim(t, st, store.ClaimRequest{Runner: "engine-a", Now: now, Lease: lease, IgnoreLeases: true}, nil)

	// Another engine takes them all, live leases or not, up to Limit.
	got, err := st.Claim(t.Context(), store.ClaimRequest{Runner: "engine-z", Now: now, Lease: lease, IgnoreLeases: true, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("Claim with IgnoreLeases and Limit 4 of 6 tasks claimed %d", len(got))
	}
	got2, err := st.Claim(t.Context(), store.ClaimRequest{Runner: "engine-z", Now: now, Lease: lease, IgnoreLeases: true, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	checkSameSet(t, "two Claims with IgnoreLeases", slices.Concat(got, got2), slices.Concat(mine, others))
	for _, tk := range slices.Concat(got, got2) {
		if tk.Runner != "engine-z" || !tk.LeaseExpiresAt.Equal(ms(now.Add(lease))) {
			t.Errorf("task %s claimed with IgnoreLeases: Runner %q, LeaseExpiresAt %v; want engine-z, %v",
				tk.ID, tk.Runner, tk.LeaseExpiresAt, ms(now.Add(lease)))
		}
	}
	checkUnchanged(t, st, "terminal task", terminal...)
}

// claimConcurrent runs claimers side by side: no task is handed to two of
// them, and together they take every claimable task.
func (s *suite) claimConcurrent(t *testing.T) {
	st := s.store(t)
	now := base
	const (
		n        = 100
		claimers = 8
		lease    = time.Minute
	)
	var claimable []*task.Task
	for i := range n {
		switch i % 3 {
		case 0:
			claimable = append(claimable, leaseTask(task.Working, "", time.Time{}))
		case 1:
			claimable = append(claimable, leaseTask(task.Working, "engine-dead", now.Add(-time.Duration(i)*time.Second)))
		default:
			claimable = append(claimable, leaseTask(task.InputRequired, "engine-dead", now.Add(-time.Millisecond)))
		}
	}
	var untouchable []*task.Task
	for i := range 10 {
		untouchable = append(untouchable,
			leaseTask(task.Working, "engine-live", now.Add(time.Duration(i+1)*time.Minute)),
			leaseTask(task.Completed, "", time.Time{}))
	}
	mustCreate(t, st, claimable...)
	mustCreate(t, st, untouchable...)

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		holder = map[task.ID]string{}
	)
	for c := range claimers {
		runner := fmt.Sprintf("claimer-%d", c)
		limit := 1 + c%4
		wg.Go(func() {
			for calls := 0; ; calls++ {
				if calls > n {
					t.Errorf("%s: Claim never runs dry", runner)
					return
				}
				got, err := st.Claim(t.Context(), store.ClaimRequest{Runner: runner, Now: now, Lease: lease, Limit: limit})
				if err != nil {
					t.Errorf("%s: Claim: %v", runner, err)
					return
				}
				if len(got) == 0 {
					return
				}
				if len(got) > limit {
					t.Errorf("%s: Claim with Limit %d returned %d tasks", runner, limit, len(got))
				}
				mu.Lock()
				for _, tk := range got {
					if prev, ok := holder[tk.ID]; ok {
						t.Errorf("task %s claimed by both %s and %s", tk.ID, prev, runner)
					}
					holder[tk.ID] = runner
					if tk.Runner != runner || !tk.LeaseExpiresAt.Equal(ms(now.Add(lease))) {
						t.Errorf("%s: claimed task %s has Runner %q, LeaseExpiresAt %v", runner, tk.ID, tk.Runner, tk.LeaseExpiresAt)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(holder) != n {
		t.Errorf("%d concurrent claimers took %d tasks, want all %d", claimers, len(holder), n)
	}
	for _, tk := range claimable {
		r, ok := holder[tk.ID]
		if !ok {
			t.Errorf("task %s was never claimed", tk.ID)
			continue
		}
		checkTask(t, "concurrently claimed task", mustGet(t, st, tk.ID), claimedAs(tk, r, now.Add(lease)))
	}
	checkUnchanged(t, st, "task that no claimer may take", untouchable...)
	mustClaim(t, st, store.ClaimRequest{Runner: "claimer-late", Now: now, Lease: lease}, nil)
}

func sortedIDs(l []task.ID) []task.ID {
	return slices.Sorted(slices.Values(l))
}

func (s *suite) heartbeat(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	now := base
	const r1, r2 = "engine-1", "engine-2"
	live := now.Add(time.Minute)

	held := leaseTask(task.Working, r1, live)
	heldInput := leaseTask(task.InputRequired, r1, live)
	// Its lease ended, but no one took it over: still r1's.
	heldLapsed := leaseTask(task.Working, r1, now.Add(-time.Minute))
	takenOver := leaseTask(task.Working, r2, live)
	unheld := leaseTask(task.Working, "", time.Time{})
	// Terminal, even with r1's name and a live lease on it.
	endedHeld := leaseTask(task.Completed, r1, live)
	toCancel := leaseTask(task.Working, r1, live)
	toDelete := leaseTask(task.Working, r1, live)
	mustCreate(t, st, held, heldInput, heldLapsed, takenOver, unheld, endedHeld, toCancel, toDelete)
	cancelled, err := st.Update(ctx, toCancel.ID, func(tk *task.Task) error { return tk.Cancel("cancelled by the client", now) })
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, toDelete.ID); err != nil {
		t.Fatal(err)
	}
	unknown := task.NewID()

	until := now.Add(2 * time.Minute)
	lost, err := st.Heartbeat(ctx, r1, []task.ID{
		held.ID, takenOver.ID, heldInput.ID, unheld.ID, heldLapsed.ID, endedHeld.ID,
		toCancel.ID, toDelete.ID, unknown, "no-such-task",
	}, until)
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	wantLost := []task.ID{takenOver.ID, unheld.ID, endedHeld.ID, toCancel.ID, toDelete.ID, unknown, "no-such-task"}
	if !slices.Equal(sortedIDs(lost), sortedIDs(wantLost)) {
		t.Errorf("Heartbeat lost %v, want %v (in any order)", lost, wantLost)
	}
	for _, tk := range []*task.Task{held, heldInput, heldLapsed} {
		w := want(tk)
		w.LeaseExpiresAt = ms(until)
		checkTask(t, "task whose lease a Heartbeat extended", mustGet(t, st, tk.ID), w)
	}
	checkUnchanged(t, st, "task lost to a Heartbeat", takenOver, unheld, endedHeld)
	checkTask(t, "cancelled task after a Heartbeat", mustGet(t, st, toCancel.ID), cancelled)
	if _, err := st.Get(ctx, toDelete.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Heartbeat brought back a deleted task: %v", err)
	}

	// r2 keeps its task and has none of r1's.
	until2 := until.Add(time.Minute)
	lost, err = st.Heartbeat(ctx, r2, []task.ID{held.ID, takenOver.ID}, until2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lost, []task.ID{held.ID}) {
		t.Errorf("Heartbeat of %s lost %v, want [%s]", r2, lost, held.ID)
	}
	w := want(takenOver)
	w.LeaseExpiresAt = ms(until2)
	checkTask(t, "task whose lease a Heartbeat extended", mustGet(t, st, takenOver.ID), w)

	// No IDs: nothing to do, nothing lost.
	for _, none := range [][]task.ID{nil, {}} {
		lost, err := st.Heartbeat(ctx, r1, none, until)
		if err != nil || len(lost) != 0 {
			t.Errorf("Heartbeat(%#v) = %v, %v; want nothing lost and no error", none, lost, err)
		}
	}
}

// heartbeatTakeover follows one task through the life the engine gives it:
// claimed, kept alive, taken over after its holder stalled, ended.
func (s *suite) heartbeatTakeover(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	now := base
	const lease = 30 * time.Second
	tk := newTask("alice", base)
	mustCreate(t, st, tk)

	mustClaim(t, st, store.ClaimRequest{Runner: "engine-1", Now: now, Lease: lease}, []*task.Task{tk})
	lost, err := st.Heartbeat(ctx, "engine-1", []task.ID{tk.ID}, now.Add(20*time.Second+lease))
	if err != nil || len(lost) != 0 {
		t.Fatalf("Heartbeat of the holder = %v, %v; want nothing lost", lost, err)
	}
	held := claimedAs(tk, "engine-1", now.Add(20*time.Second+lease))
	checkTask(t, "task after a Heartbeat", mustGet(t, st, tk.ID), held)
	// Before the extended lease ends, no one may take it.
	mustClaim(t, st, store.ClaimRequest{Runner: "engine-2", Now: now.Add(40 * time.Second), Lease: lease}, nil)

	// engine-1 stalls; once its lease has ended engine-2 takes over.
	takeover := now.Add(51 * time.Second)
	mustClaim(t, st, store.ClaimRequest{Runner: "engine-2", Now: takeover, Lease: lease}, []*task.Task{held})
	lost, err = st.Heartbeat(ctx, "engine-1", []task.ID{tk.ID}, takeover.Add(lease))
	if err != nil || !slices.Equal(lost, []task.ID{tk.ID}) {
		t.Fatalf("late Heartbeat of the former holder = %v, %v; want [%s] lost", lost, err, tk.ID)
	}
	checkTask(t, "task after a late Heartbeat of its former holder", mustGet(t, st, tk.ID), claimedAs(held, "engine-2", takeover.Add(lease)))
	if lost, err := st.Heartbeat(ctx, "engine-2", []task.ID{tk.ID}, takeover.Add(2*lease)); err != nil || len(lost) != 0 {
		t.Fatalf("Heartbeat of the new holder = %v, %v; want nothing lost", lost, err)
	}

	// The work ends (task.Transition drops Runner and lease): a
	// Heartbeat now reports the task lost, and Claim never takes it.
	ended, err := st.Update(ctx, tk.ID, func(tk *task.Task) error {
		return tk.Complete(json.RawMessage(`{"content":[]}`), takeover.Add(time.Second))
	})
	if err != nil {
		t.Fatal(err)
	}
	if ended.Runner != "" || !ended.LeaseExpiresAt.IsZero() {
		t.Errorf("ended task: Runner %q, LeaseExpiresAt %v; want none", ended.Runner, ended.LeaseExpiresAt)
	}
	lost, err = st.Heartbeat(ctx, "engine-2", []task.ID{tk.ID}, takeover.Add(3*lease))
	if err != nil || !slices.Equal(lost, []task.ID{tk.ID}) {
		t.Fatalf("Heartbeat of an ended task = %v, %v; want [%s] lost", lost, err, tk.ID)
	}
	mustClaim(t, st, store.ClaimRequest{Runner: "engine-3", Now: takeover.Add(time.Hour), Lease: lease, IgnoreLeases: true}, nil)
	checkTask(t, "ended task", mustGet(t, st, tk.ID), ended)
}
