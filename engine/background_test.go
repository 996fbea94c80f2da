package engine_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// within waits for ch to yield, failing the test with msg after d.
func within[T any](t *testing.T, ch <-chan T, d time.Duration, msg string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatal(msg)
		var zero T
		return zero
	}
}

// hangingStore is a real store whose Claim, DeleteExpired or Heartbeat
// hang, once armed, until released or until their context ends, as a
// store call stuck on a lock or a dead connection would. It reports the
// calls that reach the real store.
type hangingStore struct {
	store.Store

	hangClaim, hangSweep, hangHeartbeat atomic.Bool
	release                             chan struct{} // closed to end the hung calls

	claimHung, sweepHung, heartbeatHung chan struct{}  // one signal per hung call
	renewed                             chan []task.ID // the ids of each Heartbeat that reached the store
	claimed                             chan []*task.Task
}

func newHangingStore(st store.Store) *hangingStore {
	return &hangingStore{
		Store:         st,
		release:       make(chan struct{}),
		claimHung:     make(chan struct{}, 100),
		sweepHung:     make(chan struct{}, 100),
		heartbeatHung: make(chan struct{}, 100),
		renewed:       make(chan []task.ID, 1000),
		claimed:       make(chan []*task.Task, 1000),
	}
}

// hang blocks until the store is released or ctx ends.
func (s *hangingStore) hang(ctx context.Context, hung chan<- struct{}) error {
	hung <- struct{}{}
	select {
	case <-s.release:
		return errors.New("hangingStore: released")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Claim hangs once armed, else claims through the real store.
func (s *hangingStore) Claim(ctx context.Context, req store.ClaimRequest) ([]*task.Task, error) {
	if s.hangClaim.Load() {
		return nil, s.hang(ctx, s.claimHung)
	}
	got, err := s.Store.Claim(ctx, req)
	if err == nil {
		s.claimed <- got
	}
	return got, err
}

// DeleteExpired hangs once armed, else sweeps the real store.
func (s *hangingStore) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	if s.hangSweep.Load() {
		return 0, s.hang(ctx, s.sweepHung)
	}
	return s.Store.DeleteExpired(ctx, now)
}

// Heartbeat hangs once armed, else renews through the real store and
// reports the ids.
func (s *hangingStore) Heartbeat(ctx context.Context, runner string, ids []task.ID, until time.Time) ([]task.ID, error) {
	if s.hangHeartbeat.Load() {
		return nil, s.hang(ctx, s.heartbeatHung)
	}
	lost, err := s.Store.Heartbeat(ctx, runner, ids, until)
	if err == nil {
		s.renewed <- ids
	}
	return lost, err
}

// hangingEngine runs a non-exclusive engine (it claims expired leases) on
// a hanging store over a real SQLite file, with a short lease and sweep
// interval. Its cleanup releases what hangs, then shuts the engine down.
func hangingEngine(t *testing.T, opts engine.Options) (*engine.Engine, *hangingStore, *sqlite.Store) {
	t.Helper()
	lite, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := newHangingStore(lite)
	opts.Store = hs
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := engine.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() { close(hs.release) })
		now, stop := context.WithCancel(context.Background())
		stop()
		_ = e.Shutdown(now)
		_ = lite.Close()
	})
	return e, hs, lite
}

// drain empties ch.
func drain[T any](ch <-chan T) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// TestHungClaimDoesNotStallHeartbeats: while the engine's Claim (taking
// over expired leases) and DeleteExpired (the sweep) hang in the store,
// the leases of its running work are still renewed: each background
// service has its own goroutine.
func TestHungClaimDoesNotStallHeartbeats(t *testing.T) {
	const lease = 300 * time.Millisecond
	e, hs, lite := hangingEngine(t, engine.Options{Lease: lease, SweepInterval: 20 * time.Millisecond})
	work, started, _ := untilCancelled()
	tk, err := e.Start(t.Context(), engine.StartSpec{Tool: "t"}, work)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	hs.hangClaim.Store(true)
	hs.hangSweep.Store(true)
	within(t, hs.claimHung, 20*time.Second, "the engine never claimed expired leases")
	within(t, hs.sweepHung, 20*time.Second, "the engine never swept")
	// From now on Claim and DeleteExpired hang: what is renewed now is
	// renewed while they do.
	drain(hs.renewed)
	before, err := lite.Get(t.Context(), tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		ids := within(t, hs.renewed, 20*time.Second, "no lease renewed while Claim and DeleteExpired hang")
		if len(ids) != 1 || ids[0] != tk.ID {
			t.Fatalf("heartbeat %d renewed %v, want [%s]", i, ids, tk.ID)
		}
	}
	after, err := lite.Get(t.Context(), tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !after.LeaseExpiresAt.After(before.LeaseExpiresAt) || after.Runner != e.InstanceID() {
		t.Errorf("lease while Claim hangs: %v then %v (runner %q); want extended, held by %s",
			before.LeaseExpiresAt, after.LeaseExpiresAt, after.Runner, e.InstanceID())
	}
}

// TestHungHeartbeatDoesNotStallTakeover: while the engine's Heartbeat
// hangs in the store, it still takes over (and resolves) a task whose
// lease expired.
func TestHungHeartbeatDoesNotStallTakeover(t *testing.T) {
	const lease = 300 * time.Millisecond
	e, hs, lite := hangingEngine(t, engine.Options{Lease: lease, SweepInterval: -1})
	// Running work, so that the heartbeat has leases to renew.
	work, started, _ := untilCancelled()
	if _, err := e.Start(t.Context(), engine.StartSpec{Tool: "t"}, work); err != nil {
		t.Fatal(err)
	}
	<-started
	hs.hangHeartbeat.Store(true)
	within(t, hs.heartbeatHung, 20*time.Second, "the engine never renewed its leases")
	// A task left by an engine that died, its lease long gone.
	dead := task.New(task.Policy{}, "", "unsafe", nil, time.Now())
	dead.Runner = "engine-that-died"
	dead.LeaseExpiresAt = time.Now().Add(-time.Minute)
	dead.Attempts = 1
	if err := lite.Create(t.Context(), dead, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for taken := false; !taken; {
		got := within(t, hs.claimed, 20*time.Second, "no task taken over while Heartbeat hangs")
		for _, tk := range got {
			taken = taken || tk.ID == dead.ID
		}
	}
	waitFor(t, "the taken-over task to be resolved", func() bool {
		got, err := lite.Get(t.Context(), dead.ID)
		return err == nil && got.Status == task.Failed
	})
}
