package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runClaim checks Claim: which tasks are claimable, the lease boundary,
// Limit, IgnoreLeases, and that concurrent claimers never share a task.
func (s *suite) runClaim(t *testing.T) {
	run(t, []testCase{
		{"Claim", s.claim},
		{"LeaseBoundary", s.claimLeaseBoundary},
		{"Limit", s.claimLimit},
		{"IgnoreLeases", s.claimIgnoreLeases},
		{"Concurrent", s.claimConcurrent},
	})
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
