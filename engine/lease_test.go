package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/pgtest"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/postgres"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// backend opens stores that share one task space: the same SQLite file, or
// the same PostgreSQL schema.
type backend struct {
	name string
	open func(t *testing.T) store.Store
}

// backends returns SQLite, and PostgreSQL when MCPTASK_TEST_POSTGRES_DSN
// names a server (a schema of its own, dropped at the end).
func backends(t *testing.T) []backend {
	path := filepath.Join(t.TempDir(), "shared.db")
	bs := []backend{{"sqlite", func(t *testing.T) store.Store {
		st, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}}}
	dsn := os.Getenv("MCPTASK_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Log("PostgreSQL variant skipped: set MCPTASK_TEST_POSTGRES_DSN (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run it")
		return bs
	}
	schema := pgtest.Schema(t, dsn, "engine_test_")
	return append(bs, backend{"postgres", func(t *testing.T) store.Store {
		st, err := postgres.Open(context.Background(), dsn, &postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}})
}

// sharedEngine starts a non-exclusive engine on its own store of b, as one
// of several engines sharing a task space.
func sharedEngine(t *testing.T, b backend, lease time.Duration, recover func(context.Context, *task.Task) engine.Work) (*engine.Engine, store.Store) {
	t.Helper()
	st := b.open(t)
	e, err := hooked(engine.Options{
		Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SweepInterval: -1, Lease: lease,
	}, engine.Hooks{Recover: recover})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Stop what still runs at once: a test that failed may leave work
		// waiting for a cancellation that never came.
		now, stop := context.WithCancel(context.Background())
		stop()
		_ = e.Shutdown(now)
		_ = st.Close()
	})
	return e, st
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestTakeoverAfterLeaseExpiry: a task held by an engine that died is left
// alone while its lease lives, then taken over and resolved by policy.
func TestTakeoverAfterLeaseExpiry(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) { testTakeover(t, b) })
	}
}

func testTakeover(t *testing.T, be backend) {
	ctx := context.Background()
	st := be.open(t)
	now := time.Now()
	dead := func(tool string) task.ID {
		tk := task.New(task.Policy{}, "", tool, nil, now)
		tk.Runner = "engine-that-died"
		tk.LeaseExpiresAt = now.Add(400 * time.Millisecond)
		tk.Attempts = 1
		if err := st.Create(ctx, tk, store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return tk.ID
	}
	unsafe, safe := dead("unsafe"), dead("safe")
	st.Close()

	var reruns atomic.Int32
	e, st2 := sharedEngine(t, be, 150*time.Millisecond, func(_ context.Context, tk *task.Task) engine.Work {
		if tk.Tool != "safe" {
			return nil
		}
		return func(context.Context) (json.RawMessage, error) {
			reruns.Add(1)
			return json.RawMessage(`{"content":[]}`), nil
		}
	})
	_ = e
	// The lease is alive: nothing happens to the tasks yet.
	if got, _ := st2.Get(ctx, unsafe); got.Status != task.Working || got.Runner != "engine-that-died" {
		t.Fatalf("task taken over before its lease expired: %+v", got)
	}
	waitFor(t, "takeover of both tasks", func() bool {
		a, _ := st2.Get(ctx, unsafe)
		b, _ := st2.Get(ctx, safe)
		return a.Status.Terminal() && b.Status.Terminal()
	})
	a, _ := st2.Get(ctx, unsafe)
	b, _ := st2.Get(ctx, safe)
	if a.Status != task.Failed || a.Error == nil || a.Error.Code != engine.CodeOutcomeUnknown {
		t.Errorf("non-re-runnable task after takeover = %+v", a)
	}
	if b.Status != task.Completed || b.Attempts != 2 || reruns.Load() != 1 {
		t.Errorf("re-runnable task after takeover = %+v (re-runs %d)", b, reruns.Load())
	}
}

// untilCancelled returns work that runs until its context ends, a channel
// closed once it runs, and one that receives its context's error when it
// stops.
func untilCancelled() (work engine.Work, started <-chan struct{}, stopped <-chan error) {
	st, sp := make(chan struct{}), make(chan error, 1)
	return func(ctx context.Context) (json.RawMessage, error) {
		close(st)
		<-ctx.Done()
		sp <- ctx.Err()
		return nil, ctx.Err()
	}, st, sp
}

// cancelAndAwait cancels the task id through engine b and waits up to
// timeout for its work (running on another engine) to stop with
// context.Canceled; failing that, it fails the test with msg.
func cancelAndAwait(t *testing.T, b *engine.Engine, id task.ID, stopped <-chan error, timeout time.Duration, msg string) {
	t.Helper()
	if got, err := b.Cancel(t.Context(), "", id); err != nil || got.Status != task.Cancelled {
		t.Fatalf("Cancel through B = %+v, %v", got, err)
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("work stopped with %v", err)
		}
	case <-time.After(timeout):
		t.Fatal(msg)
	}
}

// TestCancelReachesAnotherEngine: a task cancelled through engine B stops
// the work running on engine A: by the change feed (both backends have
// one; SQLite's within the process), and by the heartbeat's polling when
// the store has no feed.
func TestCancelReachesAnotherEngine(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) { testCancelAcross(t, be, true) })
		if be.name == "sqlite" {
			polling := backend{be.name + "-without-feed", func(t *testing.T) store.Store { return feedless{be.open(t)} }}
			t.Run(polling.name, func(t *testing.T) { testCancelAcross(t, polling, false) })
		}
	}
}

// feedless hides the change feed of its store: engines on it learn of
// changes made elsewhere by polling only.
type feedless struct{ store.Store }

func testCancelAcross(t *testing.T, be backend, feed bool) {
	// With a feed, a long lease: the change feed must deliver the cancel
	// well before the first heartbeat (lease/3) could.
	lease := 150 * time.Millisecond
	if feed {
		lease = time.Hour
	}
	a, _ := sharedEngine(t, be, lease, nil)
	b, _ := sharedEngine(t, be, lease, nil)
	ctx := context.Background()
	work, started, stopped := untilCancelled()
	tk, err := a.Start(ctx, engine.StartSpec{Tool: "t"}, work)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	cancelAndAwait(t, b, tk.ID, stopped, 20*time.Second, "the work on engine A never saw the cancellation")
	if got, _ := a.Get(ctx, "", tk.ID); got.Status != task.Cancelled {
		t.Errorf("status = %s", got.Status)
	}
}

// TestHandBackOnShutdown: re-runnable work of an engine that shuts down is
// taken over by another engine at once, not after a lease.
func TestHandBackOnShutdown(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) { testHandBack(t, b) })
	}
}

func testHandBack(t *testing.T, b backend) {
	ran := make(chan string, 4)
	recover := func(_ context.Context, tk *task.Task) engine.Work {
		return func(ctx context.Context) (json.RawMessage, error) {
			ran <- "rerun"
			return json.RawMessage(`{"content":[]}`), nil
		}
	}
	st := b.open(t)
	a, err := hooked(engine.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SweepInterval: -1, Lease: time.Hour}, engine.Hooks{Recover: recover})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	started := make(chan struct{})
	tk, err := a.Start(ctx, engine.StartSpec{Tool: "safe"}, func(ctx context.Context) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	sctx, cancel := context.WithCancel(ctx)
	cancel()
	_ = a.Shutdown(sctx) // no grace: hand the work back
	st.Close()
	// A lease of an hour: only a hand-back lets B take the task at once.
	_, st2 := sharedEngine(t, b, time.Hour, recover)
	waitFor(t, "re-run on the other engine", func() bool {
		got, _ := st2.Get(ctx, tk.ID)
		return got.Status == task.Completed
	})
	if got := <-ran; got != "rerun" {
		t.Fatal(got)
	}
}

// TestIdempotentStart: a retried Start with the same key returns the first
// task and does not run the work again.
func TestIdempotentStart(t *testing.T) {
	e, _ := newEngine(t, engine.Options{})
	ctx := context.Background()
	var runs atomic.Int32
	work := func(context.Context) (json.RawMessage, error) {
		runs.Add(1)
		return json.RawMessage(`{"content":[]}`), nil
	}
	first, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "t", IdempotencyKey: "k1"}, work)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "t", IdempotencyKey: "k1"}, work)
	if err != nil || again.ID != first.ID {
		t.Fatalf("retry = %v, %v; want task %s", again, err, first.ID)
	}
	other, err := e.Start(ctx, engine.StartSpec{Owner: "bob", Tool: "t", IdempotencyKey: "k1"}, work)
	if err != nil || other.ID == first.ID {
		t.Fatalf("another owner's key reached alice's task: %v, %v", other, err)
	}
	if _, err := e.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "u", IdempotencyKey: "k1"}, work); !errors.Is(err, engine.ErrIdempotencyConflict) {
		t.Fatalf("key reused for another tool: %v", err)
	}
	for _, w := range []struct {
		owner string
		id    task.ID
	}{{"alice", first.ID}, {"bob", other.ID}} {
		waitFor(t, "the tasks to end", func() bool {
			g, err := e.Get(ctx, task.Owner(w.owner), w.id)
			return err == nil && g.Status.Terminal()
		})
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("work ran %d times, want 2 (alice once, bob once)", n)
	}
}

// feedEngines returns two engines sharing a PostgreSQL schema (leases of
// an hour), and a func that ends both engines' LISTEN connections (their
// change feeds); it skips the test without PostgreSQL.
func feedEngines(t *testing.T) (a, b *engine.Engine, cutFeeds func()) {
	t.Helper()
	var pg *backend
	for _, b := range backends(t) {
		if b.name == "postgres" {
			pg = &b
		}
	}
	if pg == nil {
		t.Skip("PostgreSQL only (set MCPTASK_TEST_POSTGRES_DSN)")
	}
	a, sta := sharedEngine(t, *pg, time.Hour, nil)
	b, _ = sharedEngine(t, *pg, time.Hour, nil)
	return a, b, func() {
		t.Helper()
		ctx := t.Context()
		conn, err := pgx.Connect(ctx, os.Getenv("MCPTASK_TEST_POSTGRES_DSN"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		channel := sta.(*postgres.Store).Channel()
		tag, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE query LIKE 'LISTEN %' AND query LIKE '%' || $1 || '%' AND datname = current_database()`, channel)
		if err != nil || tag.RowsAffected() == 0 {
			t.Fatalf("terminating the feeds' connections: %v (%d)", err, tag.RowsAffected())
		}
	}
}

// TestCancelAfterFeedReconnect: engine A's change feed loses its
// connection; a cancellation made through engine B meanwhile (not
// announced to A) still stops A's work once A's feed is back, long before
// a heartbeat (the lease is an hour).
func TestCancelAfterFeedReconnect(t *testing.T) {
	a, b, cutFeeds := feedEngines(t)
	ctx := t.Context()
	work, started, stopped := untilCancelled()
	tk, err := a.Start(ctx, engine.StartSpec{Tool: "t"}, work)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	// End A's LISTEN connection (A's and B's feeds listen on the same
	// channel; end both: B's feed plays no part here).
	cutFeeds()
	// The feed waits a second before reconnecting: this cancellation is
	// most likely made while A is not listening.
	cancelAndAwait(t, b, tk.ID, stopped, 30*time.Second, "the work on engine A never saw the cancellation made while its feed was down")
}

// TestWatchersWokenAfterFeedReconnect: a change made through engine B
// while engine A's change feed is down is announced to nobody; when A's
// feed is back, every waiter of A's Watch is woken (a follower reads the
// task again then, instead of re-reading it on a timer while the feed
// is in effect), and ChangesAnnounced says when the feed is in effect.
func TestWatchersWokenAfterFeedReconnect(t *testing.T) {
	a, b, cutFeeds := feedEngines(t)
	ctx := t.Context()
	if !a.ChangesAnnounced() {
		t.Fatal("A's feed is not in effect after Run")
	}
	work, started, _ := untilCancelled()
	tk, err := b.Start(ctx, engine.StartSpec{Tool: "t"}, work)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	cutFeeds()
	waitFor(t, "A's feed to be seen down", func() bool { return !a.ChangesAnnounced() })
	woken := a.Watch(tk.ID)
	// A change A's feed cannot announce: it is down.
	if _, err := b.Cancel(ctx, "", tk.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
	case <-time.After(30 * time.Second):
		t.Fatal("A's waiter was not woken after its feed came back")
	}
	waitFor(t, "A's feed to be in effect again", a.ChangesAnnounced)
}
