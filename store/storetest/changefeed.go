package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// feedWait bounds how long the suite waits for an announcement before it
// fails: announcements arrive in milliseconds; this only ends a test that
// would otherwise hang.
const feedWait = 20 * time.Second

// runChangeFeed checks [store.ChangeFeed], on a store that implements it:
// once ready is called, the Updates and Claims committed through the store
// and through another store on the same tasks are announced, and only
// those; Changes returns when its context ends or its store is closed,
// and may be called again. The suite's fn is quick: it never blocks.
func (s *suite) runChangeFeed(t *testing.T) {
	run(t, []testCase{
		{"UpdatesAndClaims", s.feedUpdatesAndClaims},
		{"Burst", s.feedBurst},
		{"ContextEnds", s.feedContextEnds},
		{"Close", s.feedClose},
		{"Delete", s.feedDelete},
	})
}

// feedOf returns st as a change feed, or skips the test if st is none.
func feedOf(t *testing.T, st store.Store) store.ChangeFeed {
	t.Helper()
	f, ok := st.(store.ChangeFeed)
	if !ok {
		t.Skipf("storetest: %T is no store.ChangeFeed", st)
	}
	return f
}

// listening is a running Changes call.
type listening struct {
	ids  chan task.ID // what fn was called with
	done chan error   // Changes's result
	stop context.CancelFunc

	mu       sync.Mutex
	overflow bool // fn found ids full: it would have blocked
	seen     map[task.ID]bool
}

// listen calls feed.Changes in a goroutine of its own, and returns once
// ready was called. The Changes call ends when the test does, or at stop.
func listen(t *testing.T, feed store.ChangeFeed) *listening {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	l := &listening{
		ids:  make(chan task.ID, 4096),
		done: make(chan error, 1),
		stop: stop,
		seen: map[task.ID]bool{},
	}
	ready := make(chan struct{})
	var once sync.Once
	go func() {
		l.done <- feed.Changes(ctx, func() { once.Do(func() { close(ready) }) }, func(id task.ID) {
			// Quick: never block the feed.
			select {
			case l.ids <- id:
			default:
				l.mu.Lock()
				l.overflow = true
				l.mu.Unlock()
			}
		})
	}()
	t.Cleanup(func() {
		stop()
		<-l.done
	})
	select {
	case <-ready:
	case err := <-l.done:
		l.done <- err // for the cleanup
		t.Fatalf("Changes returned %v before calling ready", err)
	case <-time.After(feedWait):
		t.Fatalf("Changes did not call ready within %v", feedWait)
	}
	return l
}

// expect waits until every ID of want is announced. Any other ID
// announced meanwhile fails the test, unless it was announced before (a
// feed may announce an ID more than once).
func (l *listening) expect(t *testing.T, what string, want ...task.ID) {
	t.Helper()
	missing := map[task.ID]bool{}
	for _, id := range want {
		missing[id] = true
	}
	deadline := time.After(feedWait)
	for len(missing) > 0 {
		select {
		case id := <-l.ids:
			l.mu.Lock()
			old := l.seen[id]
			l.seen[id] = true
			l.mu.Unlock()
			switch {
			case missing[id]:
				delete(missing, id)
			case !old && !slices.Contains(want, id):
				t.Errorf("%s: unexpected announcement of %s", what, id)
			}
		case err := <-l.done:
			l.done <- err
			t.Fatalf("%s: Changes returned %v", what, err)
		case <-deadline:
			t.Fatalf("%s: %d of %d announcements missing after %v", what, len(missing), len(want), feedWait)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.overflow {
		t.Fatalf("%s: the test's fn would have blocked (over %d announcements waiting)", what, cap(l.ids))
	}
}

// ended waits for the Changes call to return, and returns its result.
func (l *listening) ended(t *testing.T, what string) error {
	t.Helper()
	select {
	case err := <-l.done:
		l.done <- err // for the cleanup
		return err
	case <-time.After(feedWait):
		t.Fatalf("%s: Changes did not return within %v", what, feedWait)
		return nil
	}
}

// setMessage updates the status message of the task id through st.
func setMessage(t *testing.T, st store.Store, id task.ID, msg string) {
	t.Helper()
	if _, err := st.Update(t.Context(), id, func(tk *task.Task) error { return tk.SetStatusMessage(msg, base) }); err != nil {
		t.Fatalf("Update(%s): %v", id, err)
	}
}

// feedUpdatesAndClaims follows the announcements of one listener while
// the store it listens on and another store on the same tasks change
// them. Each negative check (what is not announced) is followed by a
// change of another task through the same store, whose announcement comes
// after any that the first change would have made.
func (s *suite) feedUpdatesAndClaims(t *testing.T) {
	a := s.store(t)
	feed := feedOf(t, a)
	b := s.shared(t, a)
	l := listen(t, feed)

	// Creations are not announced; Updates are, through either store, and
	// only once committed: the change is visible when its ID arrives.
	x, y := newTask("alice", base), newTask("alice", base)
	mustCreate(t, a, x)
	mustCreate(t, b, y)
	setMessage(t, b, y.ID, "through the other store")
	l.expect(t, "Update through another store", y.ID)
	if got := mustGet(t, a, y.ID); got.StatusMessage != "through the other store" {
		t.Errorf("announced before it was visible: status message %q", got.StatusMessage)
	}
	setMessage(t, a, x.ID, "through the listening store")
	l.expect(t, "Update through the listening store", x.ID)

	// An Update whose fn fails, or of an unknown task, announces nothing.
	z := newTask("alice", base)
	mustCreate(t, b, z)
	if _, err := b.Update(t.Context(), z.ID, func(*task.Task) error { return errFn }); !errors.Is(err, errFn) {
		t.Fatalf("Update with a failing fn: %v", err)
	}
	if _, err := b.Update(t.Context(), task.NewID(), func(*task.Task) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Update of an unknown task: %v", err)
	}
	setMessage(t, b, y.ID, "again")
	l.expect(t, "Update after a failed one", y.ID)

	// Ending a task is an Update like any other.
	if _, err := b.Update(t.Context(), x.ID, func(tk *task.Task) error { return tk.Cancel("stop", base) }); err != nil {
		t.Fatal(err)
	}
	l.expect(t, "cancelling Update", x.ID)

	// Each task a Claim takes is announced, so that its previous runner
	// learns that it lost it; a Claim that takes nothing announces nothing.
	claimable := []*task.Task{leaseTask(task.Working, "engine-dead", base.Add(-time.Hour)), leaseTask(task.InputRequired, "", time.Time{})}
	mustCreate(t, b, claimable...)
	claimed, err := b.Claim(t.Context(), store.ClaimRequest{Runner: "engine-b", Now: base, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range claimable {
		if !slices.Contains(ids(claimed), tk.ID) {
			t.Fatalf("Claim did not take %s (it took %v)", tk.ID, ids(claimed))
		}
	}
	l.expect(t, "Claim through another store", ids(claimed)...)
	if got, err := b.Claim(t.Context(), store.ClaimRequest{Runner: "engine-c", Now: base, Lease: time.Minute}); err != nil || len(got) != 0 {
		t.Fatalf("second Claim = %v, %v; want nothing", ids(got), err)
	}
	setMessage(t, b, z.ID, "after an empty claim")
	l.expect(t, "Update after an empty Claim", z.ID)

	w := newTask("alice", base)
	mustCreate(t, a, w)
	claimed, err = a.Claim(t.Context(), store.ClaimRequest{Runner: "engine-a", Now: base, Lease: time.Minute, IgnoreLeases: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ids(claimed), w.ID) {
		t.Fatalf("Claim with IgnoreLeases did not take %s (it took %v)", w.ID, ids(claimed))
	}
	l.expect(t, "Claim through the listening store", ids(claimed)...)
}

// feedBurst makes many concurrent Updates of many tasks through two
// stores: each task is announced.
func (s *suite) feedBurst(t *testing.T) {
	a := s.store(t)
	feed := feedOf(t, a)
	b := s.shared(t, a)
	const n, rounds = 40, 5
	tasks := make([]*task.Task, n)
	for i := range tasks {
		tasks[i] = newTask("alice", base)
	}
	mustCreate(t, a, tasks...)
	l := listen(t, feed)
	var wg sync.WaitGroup
	for i, tk := range tasks {
		st := []store.Store{a, b}[i%2]
		wg.Go(func() {
			for r := range rounds {
				if _, err := st.Update(t.Context(), tk.ID, func(tk *task.Task) error {
					return tk.SetStatusMessage(fmt.Sprintf("round %d", r), base)
				}); err != nil {
					t.Errorf("Update(%s): %v", tk.ID, err)
				}
			}
		})
	}
	wg.Wait()
	l.expect(t, fmt.Sprintf("%d concurrent Updates of %d tasks", n*rounds, n), ids(tasks)...)
}

// feedContextEnds checks that Changes returns its context's error when
// the context ends, and that it may be called again: the new call
// announces what is committed after its ready.
func (s *suite) feedContextEnds(t *testing.T) {
	a := s.store(t)
	feed := feedOf(t, a)
	tk := newTask("alice", base)
	mustCreate(t, a, tk)
	for i := range 3 {
		l := listen(t, feed)
		setMessage(t, a, tk.ID, fmt.Sprintf("call %d", i))
		l.expect(t, fmt.Sprintf("Update during call %d", i), tk.ID)
		l.stop()
		if err := l.ended(t, "after its context ended"); !errors.Is(err, context.Canceled) {
			t.Errorf("Changes after its context ended = %v, want context.Canceled", err)
		}
	}
	// A context that has ended already: Changes returns at once, never
	// ready.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	if err := feed.Changes(ctx, func() { called = true }, func(task.ID) {}); !errors.Is(err, context.Canceled) {
		t.Errorf("Changes with an ended context = %v, want context.Canceled", err)
	}
	if called {
		t.Error("Changes with an ended context called ready")
	}
}

// feedClose checks that closing a store ends its running Changes with an
// error, that Changes on a closed store returns one at once, and that the
// feeds of the other stores on the same tasks go on.
func (s *suite) feedClose(t *testing.T) {
	a := s.store(t)
	feedOf(t, a)
	c := s.shared(t, a)
	lc := listen(t, feedOf(t, c))
	la := listen(t, feedOf(t, a))
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := lc.ended(t, "after Close"); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("Changes after its store was closed = %v, want the store's error", err)
	}
	called := false
	if err := feedOf(t, c).Changes(t.Context(), func() { called = true }, func(task.ID) {}); err == nil {
		t.Error("Changes on a closed store returned nil")
	}
	if called {
		t.Error("Changes on a closed store called ready")
	}
	tk := newTask("alice", base)
	mustCreate(t, a, tk)
	setMessage(t, a, tk.ID, "after another store closed")
	la.expect(t, "Update after another store on the same tasks was closed", tk.ID)
}

// feedDelete checks that a [store.Deleter]'s Delete is announced, through
// the listening store and another one, once the task reads as unknown;
// deleting an unknown task announces nothing.
func (s *suite) feedDelete(t *testing.T) {
	a := s.store(t)
	feed := feedOf(t, a)
	b := s.shared(t, a)
	l := listen(t, feed)
	x, y, z := newTask("alice", base), newTask("alice", base), newTask("alice", base)
	mustCreate(t, a, x, y, z)
	if err := deleterOf(t, b).Delete(t.Context(), task.NewID()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Delete of an unknown task: %v", err)
	}
	if err := deleterOf(t, b).Delete(t.Context(), x.ID); err != nil {
		t.Fatal(err)
	}
	l.expect(t, "Delete through another store", x.ID)
	if _, err := a.Get(t.Context(), x.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("announced before it was gone: Get = %v", err)
	}
	if err := deleterOf(t, a).Delete(t.Context(), y.ID); err != nil {
		t.Fatal(err)
	}
	l.expect(t, "Delete through the listening store", y.ID)
	setMessage(t, a, z.ID, "after")
	l.expect(t, "Update after the deletions", z.ID)
}
