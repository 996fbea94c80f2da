package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mcptask/mcptask/internal/testkit/faultproxy"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/storetest"
	"github.com/mcptask/mcptask/task"
)

// dsnEnv names the environment variable that enables these tests.
const dsnEnv = "MCPTASK_TEST_POSTGRES_DSN"

// testDSN returns the test database's DSN, or skips the test.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(dsnEnv)
	if dsn == "" {
		t.Skipf("PostgreSQL tests are off: set %s to a database where the tests may create and drop schemas, e.g. %s=postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
			dsnEnv, dsnEnv)
	}
	return dsn
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// newSchema returns the name of a schema of the test's own, which does not
// exist yet and is dropped (CASCADE) when the test ends.
func newSchema(t testing.TB) string {
	t.Helper()
	dsn := testDSN(t)
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	schema := "mcptask_test_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// openTest opens a store on schema, closed when the test ends.
func openTest(t testing.TB, schema string) *Store {
	t.Helper()
	s, err := Open(context.Background(), testDSN(t), &Options{Logger: testLogger(t), Schema: schema})
	if err != nil {
		t.Fatalf("Open(schema %s): %v", schema, err)
	}
	// Registered after newSchema's cleanup, so it runs before the drop.
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	testDSN(t)
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) store.Store {
			return openTest(t, newSchema(t))
		},
		OpenShared: func(t *testing.T, st store.Store) store.Store {
			return openTest(t, st.(*Store).Schema())
		},
	})
}

var now = time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)

// newTask is the suite's task (see storetest.NewTask).
var newTask = storetest.NewTask

func ids(tasks []*task.Task) []task.ID {
	out := make([]task.ID, len(tasks))
	for i, tk := range tasks {
		out[i] = tk.ID
	}
	return out
}

// TestSkipMessage checks that without the environment variable the tests
// skip with a message that says how to run them.
func TestSkipMessage(t *testing.T) {
	if os.Getenv(dsnEnv) != "" {
		t.Skip("the PostgreSQL tests are on")
	}
	var msg string
	ft := &skipRecorder{TB: t, msg: &msg}
	func() {
		defer func() { _ = recover() }()
		testDSN(ft)
	}()
	if !strings.Contains(msg, dsnEnv+"=postgres://") {
		t.Errorf("skip message %q does not say how to enable the tests", msg)
	}
	t.Skip(msg)
}

// skipRecorder records the message of Skipf instead of skipping.
type skipRecorder struct {
	testing.TB
	msg *string
}

func (r *skipRecorder) Skipf(format string, args ...any) {
	*r.msg = fmt.Sprintf(format, args...)
	panic("skipped")
}

func (r *skipRecorder) Helper() {}

// TestConcurrentOpen starts several instances at once on a schema that
// does not exist: all come up, the schema is migrated once, and they share
// their tasks and cursors.
func TestConcurrentOpen(t *testing.T) {
	schema := newSchema(t)
	const n = 8
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(t.Context(), testDSN(t), &Options{Logger: testLogger(t), Schema: schema, MaxConns: 2})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
			continue
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	if t.Failed() {
		t.FailNow()
	}

	var versions, migrated int
	if err := stores[0].pool.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*), coalesce(max(version), 0) FROM %s.schema_migrations`,
		pgx.Identifier{schema}.Sanitize())).Scan(&migrated, &versions); err != nil {
		t.Fatal(err)
	}
	if migrated != len(migrations) || versions != len(migrations) {
		t.Errorf("schema_migrations has %d rows up to version %d, want %d", migrated, versions, len(migrations))
	}

	// Every instance sees what the others write, with one cursor key.
	for i, s := range stores {
		if err := s.Create(t.Context(), newTask("alice", now.Add(time.Duration(i)*time.Second)), store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range stores {
		if !slices.Equal(s.cursorKey, stores[0].cursorKey) || s.Channel() != stores[0].Channel() {
			t.Errorf("instance %d has another cursor key or channel", i)
		}
		page, next, err := s.List(t.Context(), "alice", "", 3)
		if err != nil || len(page) != 3 {
			t.Fatalf("List on instance %d = %d tasks, %v", i, len(page), err)
		}
		rest, _, err := stores[(i+1)%n].List(t.Context(), "alice", next, 100)
		if err != nil || len(rest) != n-3 {
			t.Errorf("another instance continuing instance %d's cursor: %d tasks, %v", i, len(rest), err)
		}
	}

	// A later Open finds the schema current.
	again := openTest(t, schema)
	tasks, err := again.ListActive(t.Context())
	if err != nil || len(tasks) != n {
		t.Errorf("ListActive after reopening = %d tasks, %v; want %d", len(tasks), err, n)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name, dsn string
		opts      *Options
	}{
		{"bad DSN", "postgres://[::1", nil},
		{"long schema", "postgres://x@127.0.0.1/db", &Options{Schema: strings.Repeat("s", 64)}},
		{"reserved schema", "postgres://x@127.0.0.1/db", &Options{Schema: "pg_mine"}},
		{"NUL in schema", "postgres://x@127.0.0.1/db", &Options{Schema: "a\x00b"}},
		{"negative MaxConns", "postgres://x@127.0.0.1/db", &Options{MaxConns: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := Open(ctx, tc.dsn, tc.opts); err == nil {
				s.Close()
				t.Errorf("Open succeeded")
			}
		})
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	schema := newSchema(t)
	s := openTest(t, schema)
	if _, err := s.pool.Exec(t.Context(), fmt.Sprintf(`INSERT INTO %s.schema_migrations (version, name) VALUES (99, 'from the future')`,
		pgx.Identifier{schema}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(t.Context(), testDSN(t), &Options{Schema: schema})
	if err == nil {
		s2.Close()
		t.Fatal("Open of a schema of version 99 succeeded")
	}
	if !strings.Contains(err.Error(), "newer") {
		t.Errorf("error %q does not say the schema is newer", err)
	}
}

// TestOddSchemaName uses a schema name that needs quoting, and a long one
// whose channel name is a hash.
func TestOddSchemaName(t *testing.T) {
	suffix := newSchema(t)[len("mcptask_test_"):] // 16 random hex digits
	for _, name := range []string{
		`Odd "Name"; DROP TABLE x -- ` + suffix,
		strings.Repeat("l", 40) + suffix, // 56 bytes: too long to follow "mcptask_" in a channel name
	} {
		// newSchema only drops the name it returns: drop this one too.
		schema := name
		t.Cleanup(func() {
			conn, err := pgx.Connect(context.Background(), testDSN(t))
			if err == nil {
				conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
				conn.Close(context.Background())
			}
		})
		s := openTest(t, schema)
		tk := newTask("alice", now)
		if err := s.Create(t.Context(), tk, store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(t.Context(), tk.ID); err != nil {
			t.Fatal(err)
		}
		if len(s.Channel()) > maxIdentifierLen || !strings.HasPrefix(s.Channel(), "mcptask_") {
			t.Errorf("channel %q", s.Channel())
		}
		_, _, stop, _ := startFeed(t, s, s)
		stop()
	}
}

func TestCloseIdempotent(t *testing.T) {
	s := openTest(t, newSchema(t))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	wg.Wait()
	ctx := t.Context()
	if err := s.Create(ctx, newTask("a", now), store.CreateOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Create after Close: %v", err)
	}
	if _, err := s.Get(ctx, "x"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if _, err := s.Update(ctx, "x", func(*task.Task) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Update after Close: %v", err)
	}
	if _, _, err := s.List(ctx, "a", "", 1); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Close: %v", err)
	}
	if err := s.Changes(ctx, nil, func(task.ID) {}); !errors.Is(err, ErrClosed) {
		t.Errorf("Changes after Close: %v", err)
	}
}

// TestCanceledContext checks that an Update whose context ends while fn
// runs writes nothing and leaves neither the row locked nor the
// connection in a transaction (the suite's Integrity area checks a Create
// with an ended context on every backend).
func TestCanceledContext(t *testing.T) {
	s := openTest(t, newSchema(t))
	tk := newTask("alice", now)
	if err := s.Create(t.Context(), tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	_, err := s.Update(ctx, tk.ID, func(t *task.Task) error {
		cancel()
		return t.SetStatusMessage("not written", now)
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Update whose context ended: err = %v, want context.Canceled", err)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	got, err := s.Update(wctx, tk.ID, func(t *task.Task) error { return nil })
	if err != nil {
		t.Fatalf("Update after a canceled one: %v", err)
	}
	if got.StatusMessage != "" {
		t.Errorf("the canceled Update wrote %q", got.StatusMessage)
	}
	if st := s.pool.Stat(); st.AcquiredConns() != 0 {
		t.Errorf("%d connections still acquired", st.AcquiredConns())
	}
}

// TestInvalidTextRefused checks that text PostgreSQL cannot store (a NUL,
// invalid UTF-8) is refused, not mangled (the suite's Integrity area
// checks the invalid tasks every backend refuses).
func TestInvalidTextRefused(t *testing.T) {
	s := openTest(t, newSchema(t))
	for name, mod := range map[string]func(*task.Task){
		"NUL in message":     func(tk *task.Task) { tk.StatusMessage = "a\x00b" },
		"bad UTF-8 in owner": func(tk *task.Task) { tk.Owner = "\xff" },
	} {
		tk := newTask("alice", now)
		mod(tk)
		if err := s.Create(t.Context(), tk, store.CreateOptions{}); err == nil {
			t.Errorf("%s: Create succeeded", name)
		}
	}
}

func TestIdempotencyKey(t *testing.T) {
	s := openTest(t, newSchema(t))
	ctx := t.Context()
	first := newTask("alice", now)
	first.IdempotencyKey = "k1"
	if err := s.Create(ctx, first, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	retry := newTask("alice", now.Add(time.Second))
	retry.IdempotencyKey = "k1"
	err := s.Create(ctx, retry, store.CreateOptions{})
	var dup *store.DuplicateError
	if !errors.As(err, &dup) {
		t.Fatalf("Create with a used key: err = %v, want *store.DuplicateError", err)
	}
	if dup.Task.ID != first.ID || dup.Task.IdempotencyKey != "k1" {
		t.Errorf("DuplicateError.Task = %+v, want %s", dup.Task, first.ID)
	}
	if _, err := s.Get(ctx, retry.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the duplicate was stored: %v", err)
	}
	// The key is per owner; tasks without a key never conflict.
	other := newTask("bob", now)
	other.IdempotencyKey = "k1"
	for _, tk := range []*task.Task{other, newTask("alice", now), newTask("alice", now)} {
		if err := s.Create(ctx, tk, store.CreateOptions{}); err != nil {
			t.Errorf("Create(%s, key %q): %v", tk.Owner, tk.IdempotencyKey, err)
		}
	}
	// An ID conflict is ErrExists, even with a used key.
	sameID := newTask("alice", now)
	sameID.ID = first.ID
	sameID.IdempotencyKey = "k1"
	if err := s.Create(ctx, sameID, store.CreateOptions{}); !errors.Is(err, store.ErrExists) {
		t.Errorf("Create with a used ID and key: err = %v, want ErrExists", err)
	}
	// Once the task is deleted the key is free again.
	if err := s.Delete(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, retry, store.CreateOptions{}); err != nil {
		t.Errorf("Create with the key of a deleted task: %v", err)
	}

	// Concurrent creations with one key, from two instances: one wins,
	// every other gets the winner.
	s2 := openTest(t, s.Schema())
	const n = 20
	results := make([]error, n)
	tasks := make([]*task.Task, n)
	var wg sync.WaitGroup
	for i := range n {
		tasks[i] = newTask("carol", now)
		tasks[i].IdempotencyKey = "race"
		st := s
		if i%2 == 1 {
			st = s2
		}
		wg.Go(func() { results[i] = st.Create(ctx, tasks[i], store.CreateOptions{}) })
	}
	wg.Wait()
	var winner task.ID
	for i, err := range results {
		if err == nil {
			if winner != "" {
				t.Errorf("two creations with one key succeeded: %s and %s", winner, tasks[i].ID)
			}
			winner = tasks[i].ID
		}
	}
	if winner == "" {
		t.Fatal("no creation succeeded")
	}
	for _, err := range results {
		if err != nil && (!errors.As(err, &dup) || dup.Task.ID != winner) {
			t.Errorf("a losing creation: err = %v, want a DuplicateError for %s", err, winner)
		}
	}
}

func TestClaimAndHeartbeat(t *testing.T) {
	s := openTest(t, newSchema(t))
	ctx := t.Context()
	var tasks []*task.Task
	for i := range 5 {
		tk := newTask("alice", now.Add(time.Duration(i)*time.Second))
		tasks = append(tasks, tk)
	}
	done := newTask("alice", now)
	if err := done.Complete(nil, now); err != nil {
		t.Fatal(err)
	}
	held := tasks[4]
	held.Runner = "engine-b"
	held.LeaseExpiresAt = now.Add(time.Minute)
	for _, tk := range append(slices.Clone(tasks), done) {
		if err := s.Create(ctx, tk, store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	req := store.ClaimRequest{Runner: "engine-a", Now: now.Add(500 * time.Microsecond), Lease: 30 * time.Second, Limit: 3}
	got, err := s.Claim(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), ids(tasks[:3])) {
		t.Fatalf("Claim = %v, want the 3 oldest unheld %v", ids(got), ids(tasks[:3]))
	}
	wantLease := now.Add(30 * time.Second)
	for _, tk := range got {
		if tk.Runner != "engine-a" || !tk.LeaseExpiresAt.Equal(wantLease) || tk.LeaseExpiresAt.Location() != time.UTC {
			t.Errorf("claimed task: runner %q, lease %v", tk.Runner, tk.LeaseExpiresAt)
		}
		stored, err := s.Get(ctx, tk.ID)
		if err != nil || stored.Runner != "engine-a" || !stored.LeaseExpiresAt.Equal(wantLease) {
			t.Errorf("stored claimed task: %+v, %v", stored, err)
		}
	}
	// The rest: only the unheld one; the held lease has not ended.
	req.Limit = 0
	got, err = s.Claim(ctx, req)
	if err != nil || !slices.Equal(ids(got), ids(tasks[3:4])) {
		t.Fatalf("second Claim = %v, %v; want %v", ids(got), err, ids(tasks[3:4]))
	}
	// Once the leases end, expired ones come back in order of lease end:
	// engine-a's (at +30s), then engine-b's (at +60s).
	later := store.ClaimRequest{Runner: "engine-c", Now: now.Add(time.Hour), Lease: time.Minute}
	got, err = s.Claim(ctx, later)
	if err != nil || !slices.Equal(ids(got), ids(tasks)) {
		t.Fatalf("Claim after the leases ended = %v, %v; want %v", ids(got), err, ids(tasks))
	}
	// A lease ends at a millisecond: claimable strictly after it.
	edge := store.ClaimRequest{Runner: "engine-d", Now: now.Add(time.Hour + time.Minute), Lease: time.Minute}
	if got, err := s.Claim(ctx, edge); err != nil || len(got) != 0 {
		t.Errorf("Claim at the lease's end = %v, %v; want none", ids(got), err)
	}
	edge.Now = edge.Now.Add(time.Nanosecond)
	if got, err := s.Claim(ctx, edge); err != nil || len(got) != 5 {
		t.Errorf("Claim just after the lease's end = %v, %v; want all 5", ids(got), err)
	}
	// IgnoreLeases takes every task not held by the claimer.
	if got, err := s.Claim(ctx, store.ClaimRequest{Runner: "engine-d", Now: now, Lease: time.Minute, IgnoreLeases: true}); err != nil || len(got) != 0 {
		t.Errorf("IgnoreLeases by the holder = %v, %v; want none", ids(got), err)
	}
	got, err = s.Claim(ctx, store.ClaimRequest{Runner: "engine-e", Now: now, Lease: time.Minute, IgnoreLeases: true, Limit: 2})
	if err != nil || len(got) != 2 {
		t.Errorf("IgnoreLeases by another = %v, %v; want 2", ids(got), err)
	}

	// Heartbeat: engine-d holds tasks 2..4; 0 and 1 went to engine-e; one
	// is cancelled, one unknown.
	if _, err := s.Update(ctx, tasks[2].ID, func(tk *task.Task) error { return tk.Cancel("", now) }); err != nil {
		t.Fatal(err)
	}
	until := now.Add(2 * time.Hour)
	hb := []task.ID{tasks[0].ID, tasks[1].ID, tasks[2].ID, tasks[3].ID, "unknown", tasks[4].ID}
	lost, err := s.Heartbeat(ctx, "engine-d", hb, until)
	if err != nil {
		t.Fatal(err)
	}
	if want := []task.ID{tasks[0].ID, tasks[1].ID, tasks[2].ID, "unknown"}; !slices.Equal(lost, want) {
		t.Errorf("Heartbeat lost = %v, want %v", lost, want)
	}
	for _, tk := range tasks[3:] {
		if got, _ := s.Get(ctx, tk.ID); !got.LeaseExpiresAt.Equal(until) {
			t.Errorf("lease after Heartbeat = %v, want %v", got.LeaseExpiresAt, until)
		}
	}
	if lost, err := s.Heartbeat(ctx, "engine-d", nil, until); err != nil || len(lost) != 0 {
		t.Errorf("Heartbeat of nothing = %v, %v", lost, err)
	}
	for _, bad := range []store.ClaimRequest{
		{Now: now, Lease: time.Minute},
		{Runner: "x", Now: now},
		{Runner: "x", Lease: time.Minute},
	} {
		if _, err := s.Claim(ctx, bad); err == nil {
			t.Errorf("Claim(%+v) succeeded", bad)
		}
	}
	if _, err := s.Heartbeat(ctx, "", hb, until); err == nil {
		t.Error("Heartbeat without a runner succeeded")
	}
}

// TestClaimSkipLocked has two instances claim from one schema at once:
// every task is claimed exactly once. A task locked by an Update is
// skipped, without waiting.
func TestClaimSkipLocked(t *testing.T) {
	schema := newSchema(t)
	a, b := openTest(t, schema), openTest(t, schema)
	ctx := t.Context()
	const n = 300
	for i := range n {
		if err := a.Create(ctx, newTask("alice", now.Add(time.Duration(i)*time.Millisecond)), store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	claimedBy := map[task.ID]string{}
	var wg sync.WaitGroup
	for w := range 6 {
		st, runner := a, fmt.Sprintf("runner-%d", w)
		if w%2 == 1 {
			st = b
		}
		wg.Go(func() {
			for {
				got, err := st.Claim(ctx, store.ClaimRequest{Runner: runner, Now: now, Lease: time.Hour, Limit: 7})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range got {
					if prev, ok := claimedBy[tk.ID]; ok {
						t.Errorf("task %s claimed by %s and %s", tk.ID, prev, runner)
					}
					claimedBy[tk.ID] = runner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claimedBy) != n {
		t.Errorf("%d tasks claimed, want %d", len(claimedBy), n)
	}
	all, err := a.ListActive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range all {
		if tk.Runner != claimedBy[tk.ID] {
			t.Errorf("task %s: stored runner %q, claimed by %q", tk.ID, tk.Runner, claimedBy[tk.ID])
		}
	}

	// An Update in progress on one instance holds its row: a Claim on the
	// other skips that task instead of waiting.
	locked, free := newTask("bob", now.Add(-time.Hour)), newTask("bob", now)
	for _, tk := range []*task.Task{locked, free} {
		if err := a.Create(ctx, tk, store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	inFn, release := make(chan struct{}), make(chan struct{})
	updated := make(chan error, 1)
	go func() {
		_, err := a.Update(ctx, locked.ID, func(tk *task.Task) error {
			close(inFn)
			<-release
			return tk.SetStatusMessage("updated", now)
		})
		updated <- err
	}()
	<-inFn
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	got, err := b.Claim(cctx, store.ClaimRequest{Runner: "late", Now: now, Lease: time.Hour})
	cancel()
	if err != nil || !slices.Equal(ids(got), []task.ID{free.ID}) {
		t.Errorf("Claim while another instance updates a task = %v, %v; want only %s", ids(got), err, free.ID)
	}
	close(release)
	if err := <-updated; err != nil {
		t.Fatal(err)
	}
	got, err = b.Claim(ctx, store.ClaimRequest{Runner: "late", Now: now, Lease: time.Hour})
	if err != nil || !slices.Equal(ids(got), []task.ID{locked.ID}) {
		t.Errorf("Claim after the Update = %v, %v; want %s", ids(got), err, locked.ID)
	}
}

// TestUpdateSerialisedAcrossInstances increments a counter from two
// instances at once: no update is lost.
func TestUpdateSerialisedAcrossInstances(t *testing.T) {
	schema := newSchema(t)
	a, b := openTest(t, schema), openTest(t, schema)
	tk := newTask("alice", now)
	if err := a.Create(t.Context(), tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() {
			if _, err := st.Update(t.Context(), tk.ID, func(t *task.Task) error { t.InputSeq++; return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := b.Get(t.Context(), tk.ID)
	if err != nil || got.InputSeq != n {
		t.Errorf("InputSeq = %d, %v; want %d", got.InputSeq, err, n)
	}
}

// TestDeleteExpiredConcurrent has two instances sweep at once: every
// expired task is deleted and counted once.
func TestDeleteExpiredConcurrent(t *testing.T) {
	schema := newSchema(t)
	a, b := openTest(t, schema), openTest(t, schema)
	ctx := t.Context()
	const expired = 3*deleteExpiredBatch + 17
	for i := range expired + 10 {
		tk := newTask("alice", now)
		tk.TTL = time.Minute
		if i < expired {
			if err := tk.Complete(nil, now); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Create(ctx, tk, store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var total atomic.Int64
	var wg sync.WaitGroup
	for i := range 4 {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() {
			n, err := st.DeleteExpired(ctx, now.Add(time.Hour))
			if err != nil {
				t.Error(err)
			}
			total.Add(int64(n))
		})
	}
	wg.Wait()
	if n, err := a.DeleteExpired(ctx, now.Add(time.Hour)); err != nil || n != 0 {
		t.Errorf("DeleteExpired after the sweeps = %d, %v", n, err)
	}
	if total.Load() != expired {
		t.Errorf("the sweeps deleted %d tasks in all, want %d", total.Load(), expired)
	}
	active, err := b.ListActive(ctx)
	if err != nil || len(active) != 10 {
		t.Errorf("ListActive = %d, %v; want the 10 working tasks", len(active), err)
	}
}

// startFeed runs listener.Changes until stop is called, sending what it
// announces to seen, and returns once the feed is listening: writer
// updates a probe task until its announcement arrives (LISTEN takes
// effect at some point after the call).
func startFeed(t *testing.T, listener, writer *Store) (seen chan task.ID, feedDone chan error, stop func(), probe task.ID) {
	t.Helper()
	ctx := t.Context()
	seen = make(chan task.ID, 100)
	feedDone = make(chan error, 1)
	fctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go func() { feedDone <- listener.Changes(fctx, nil, func(id task.ID) { seen <- id }) }()
	pt := newTask("probe", now)
	if err := writer.Create(ctx, pt, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case id := <-seen:
			if id == pt.ID {
				return seen, feedDone, stop, pt.ID
			}
		case <-tick.C:
			if _, err := writer.Update(ctx, pt.ID, func(*task.Task) error { return nil }); err != nil {
				t.Fatal(err)
			}
		case err := <-feedDone:
			t.Fatalf("Changes returned %v", err)
		case <-deadline:
			t.Fatal("no announcement of the probe task within 10s")
		}
	}
}

// TestChangeFeed checks that Create, Update and Claim made through
// another instance reach Changes, that another schema's changes do not,
// and that Changes ends with its context and with Close.
func TestChangeFeed(t *testing.T) {
	schema := newSchema(t)
	listener, writer := openTest(t, schema), openTest(t, schema)
	elsewhere := openTest(t, newSchema(t))
	ctx := t.Context()

	seen, feedDone, stop, probe := startFeed(t, listener, writer)
	drain := func() {
		for {
			select {
			case <-seen:
			case <-time.After(200 * time.Millisecond):
				return
			}
		}
	}
	drain()

	expect := func(what string, id task.ID) {
		t.Helper()
		select {
		case got := <-seen:
			if got != id {
				t.Errorf("%s: announced %s, want %s", what, got, id)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no announcement within 10s", what)
		}
	}
	// Creation is not announced (nobody can watch a task before it
	// exists); another schema's change is not announced here; this one is.
	other := newTask("alice", now)
	if err := elsewhere.Create(ctx, other, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := elsewhere.Update(ctx, other.ID, func(tk *task.Task) error { return tk.SetStatusMessage("x", now) }); err != nil {
		t.Fatal(err)
	}
	tk := newTask("alice", now)
	if err := writer.Create(ctx, tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Update(ctx, tk.ID, func(tk *task.Task) error { return tk.Cancel("stop", now) }); err != nil {
		t.Fatal(err)
	}
	expect("Update", tk.ID)
	// A failed Update and a rolled-back one announce nothing.
	if _, err := writer.Update(ctx, tk.ID, func(*task.Task) error { return errors.New("no") }); err == nil {
		t.Fatal("failing Update succeeded")
	}
	drain() // the Claim below must be the next announcement
	claimable := newTask("alice", now)
	if err := writer.Create(ctx, claimable, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Claim(ctx, store.ClaimRequest{Runner: "r", Now: now, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// The probe and claimable are both claimed.
	got := map[task.ID]bool{}
	for range 2 {
		select {
		case id := <-seen:
			got[id] = true
		case <-time.After(10 * time.Second):
			t.Fatal("Claim: no announcement within 10s")
		}
	}
	if !got[probe] || !got[claimable.ID] {
		t.Errorf("Claim announced %v, want %s and %s", got, probe, claimable.ID)
	}
	// Heartbeats are not announced.
	if _, err := writer.Heartbeat(ctx, "r", []task.ID{probe}, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-seen:
		t.Errorf("unexpected announcement of %s", id)
	case <-time.After(300 * time.Millisecond):
	}

	stop()
	select {
	case err := <-feedDone:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Changes after its context ended = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Changes did not return after its context ended")
	}

	// Close ends a running Changes.
	go func() { feedDone <- listener.Changes(ctx, nil, func(task.ID) {}) }()
	time.Sleep(100 * time.Millisecond)
	listener.Close()
	select {
	case err := <-feedDone:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Changes after Close = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Changes did not return after Close")
	}
}

// TestChangeFeedConnectionLost checks that Changes returns an error when
// the server ends its connection, and can be called again.
func TestChangeFeedConnectionLost(t *testing.T) {
	s := openTest(t, newSchema(t))
	ctx := t.Context()
	feedDone := make(chan error, 1)
	go func() { feedDone <- s.Changes(ctx, nil, func(task.ID) {}) }()
	// Find the listener's backend and terminate it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		tag, err := s.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid() AND datname = current_database()
			AND query LIKE '%' || $1 || '%'`, s.Channel())
		if err != nil {
			t.Fatal(err)
		}
		if tag.RowsAffected() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the listening connection did not show up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case err := <-feedDone:
		if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, ErrClosed) {
			t.Errorf("Changes after its connection ended = %v, want the connection's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Changes did not return after its connection ended")
	}
}

func benchStore(b *testing.B) *Store {
	b.Helper()
	return openTest(b, newSchema(b))
}

func BenchmarkCreate(b *testing.B)         { storetest.BenchCreate(b, benchStore(b)) }
func BenchmarkCreateParallel(b *testing.B) { storetest.BenchCreateParallel(b, benchStore(b)) }
func BenchmarkGet(b *testing.B)            { storetest.BenchGet(b, benchStore(b)) }
func BenchmarkView(b *testing.B)           { storetest.BenchView(b, benchStore(b)) }
func BenchmarkUpdate(b *testing.B)         { storetest.BenchUpdate(b, benchStore(b)) }
func BenchmarkStartQueued(b *testing.B)    { storetest.BenchStartQueued(b, benchStore(b)) }

// TestQuotaAcrossInstances races Creates with a quota of one owner on
// two instances sharing a schema, one of whose sessions default to
// REPEATABLE READ: the owner's advisory lock serialises them, and each
// counts with a snapshot taken after the lock, so the quota holds.
func TestQuotaAcrossInstances(t *testing.T) {
	schema := newSchema(t)
	a := openTest(t, schema)
	b, err := Open(t.Context(), testDSN(t)+dsnSep(testDSN(t))+"default_transaction_isolation=repeatable%20read",
		&Options{Logger: testLogger(t), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	var iso string
	if err := b.pool.QueryRow(t.Context(), `SHOW default_transaction_isolation`).Scan(&iso); err != nil || iso != "repeatable read" {
		t.Fatalf("the second instance's default isolation is %q, %v; the test needs repeatable read", iso, err)
	}
	storetest.QuotaShared(t, a, b)
}

// dsnSep is what joins one more parameter to dsn, a URL: "?" or "&".
func dsnSep(dsn string) string {
	if strings.Contains(dsn, "?") {
		return "&"
	}
	return "?"
}

// TestQuotaWaitsForLock holds an owner's quota lock in a transaction of
// its own, as another instance in the middle of a Create with a quota
// would: a Create with a quota of that owner waits for it, and then
// counts the task that transaction committed. Another owner's does not
// wait.
func TestQuotaWaitsForLock(t *testing.T) {
	schema := newSchema(t)
	s := openTest(t, schema)
	ctx := t.Context()
	holder, err := pgx.Connect(ctx, testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close(context.Background()) })
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, quotaLockSQL, quotaLockSpace, schema, "alice"); err != nil {
		t.Fatal(err)
	}

	// Another owner is not held up (were it, this would never return).
	if err := s.Create(ctx, newTask("bob", now), store.CreateOptions{MaxActive: 1}); err != nil {
		t.Fatalf("Create with a quota of another owner: %v", err)
	}

	done := make(chan error, 1)
	go func() { done <- s.Create(ctx, newTask("alice", now), store.CreateOptions{MaxActive: 1}) }()
	// Wait until the call waits for the lock: pg_locks shows the
	// request, not granted.
	for {
		var waiting bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND objsubid = 2
				AND classid = $1::int4::oid AND objid = hashtext($2::text || ':' || $3::text)::oid)`,
			quotaLockSpace, schema, "alice").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Create with a quota returned (%v) while another transaction held the owner's lock", err)
		default:
		}
	}
	// The holder creates alice's one allowed task and commits: the
	// waiting call must see it.
	first := newTask("alice", now)
	r, err := encodeTask(first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, s.insertSQL, r.InsertArgs()...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, store.ErrTooManyActive) {
		t.Errorf("Create with a quota after the lock holder filled the quota: %v, want store.ErrTooManyActive", err)
	}
}

// TestMigrateFromV9 opens a schema of version 9 (before the tool-error
// and start columns): Open adds them, finds the tool errors among the
// results and the starts in the histories.
func TestMigrateFromV9(t *testing.T) {
	schema := newSchema(t)
	quoted := pgx.Identifier{schema}.Sanitize()
	s := openTest(t, schema)
	ids := storetest.OutcomeBeforeMigration(t, s)
	if _, err := s.pool.Exec(t.Context(), fmt.Sprintf(`ALTER TABLE %[1]s.tasks DROP COLUMN parent_id, DROP COLUMN root_id;
		DROP TABLE %[1]s.controls, %[1]s.event_deliveries, %[1]s.event_subscriptions, %[1]s.events CASCADE;
		DROP FUNCTION %[1]s.task_events_publish() CASCADE; DROP FUNCTION %[1]s.events_fan_out() CASCADE;
		DELETE FROM %[1]s.meta WHERE key = 'events_floor';
		ALTER TABLE %[1]s.tasks DROP COLUMN tool_error, DROP COLUMN started_at_ms;
		DELETE FROM %[1]s.schema_migrations WHERE version >= 10`, quoted)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, schema)
	storetest.OutcomeMigrated(t, s, ids)
}

// TestMigrateFromV8 opens a schema of version 8 (before the correlation
// columns): Open adds them, the task and the operation of the schema are
// kept with no correlation, and new ones keep theirs.
func TestMigrateFromV8(t *testing.T) {
	schema := newSchema(t)
	quoted := pgx.Identifier{schema}.Sanitize()
	s := openTest(t, schema)
	tk := newTask("alice", now)
	if err := s.Create(t.Context(), tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordOperation(t.Context(), &task.Operation{Key: "k8", TaskID: tk.ID, Owner: "alice", Effect: "e"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(t.Context(), fmt.Sprintf(`ALTER TABLE %[1]s.tasks DROP COLUMN parent_id, DROP COLUMN root_id;
		DROP TABLE %[1]s.controls, %[1]s.event_deliveries, %[1]s.event_subscriptions, %[1]s.events CASCADE;
		DROP FUNCTION %[1]s.task_events_publish() CASCADE; DROP FUNCTION %[1]s.events_fan_out() CASCADE;
		DELETE FROM %[1]s.meta WHERE key = 'events_floor';
		ALTER TABLE %[1]s.tasks DROP COLUMN tool_error, DROP COLUMN started_at_ms;
		ALTER TABLE %[1]s.tasks DROP COLUMN correlation;
		ALTER TABLE %[1]s.operations DROP COLUMN correlation;
		DELETE FROM %[1]s.schema_migrations WHERE version >= 9`, quoted)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, schema)
	var v int
	if err := s.pool.QueryRow(t.Context(), fmt.Sprintf(`SELECT max(version) FROM %s.schema_migrations`, quoted)).Scan(&v); err != nil || v != len(migrations) {
		t.Fatalf("version after migrating a version 8 schema: %d, %v; want %d", v, err, len(migrations))
	}
	storetest.CorrelationMigrated(t, s, tk.ID, "k8")
}

// TestMigrateFromV1 opens a schema of version 1 (before
// tasks_owner_active): Open adds the index and keeps the tasks.
func TestMigrateFromV1(t *testing.T) {
	schema := newSchema(t)
	quoted := pgx.Identifier{schema}.Sanitize()
	s := openTest(t, schema)
	tk := newTask("alice", now)
	if err := s.Create(t.Context(), tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Back to version 1: migration 10 added the tool-error and start
	// columns, migration 9 added the correlation columns,
	// migration 8 replaced the queue index by one by
	// owner and added the queue turns, migration 7 added the histories
	// and the indexes of browsing, migration 6 the task logs, migration 5
	// the ledger, migration 4 the queue columns, migration 3 scoped keys
	// by key owner, migration 2 only added an index.
	if _, err := s.pool.Exec(t.Context(), fmt.Sprintf(`ALTER TABLE %[1]s.tasks DROP COLUMN parent_id, DROP COLUMN root_id;
		DROP TABLE %[1]s.controls, %[1]s.event_deliveries, %[1]s.event_subscriptions, %[1]s.events CASCADE;
		DROP FUNCTION %[1]s.task_events_publish() CASCADE; DROP FUNCTION %[1]s.events_fan_out() CASCADE;
		DELETE FROM %[1]s.meta WHERE key = 'events_floor';
		ALTER TABLE %[1]s.tasks DROP COLUMN tool_error, DROP COLUMN started_at_ms;
		ALTER TABLE %[1]s.tasks DROP COLUMN correlation; DROP TABLE %[1]s.queue_turns; DROP INDEX %[1]s.tasks_queue_owner; DROP TABLE %[1]s.task_events; DROP INDEX %[1]s.tasks_created;
		DROP INDEX %[1]s.tasks_status_created; DROP INDEX %[1]s.tasks_tool_created; DROP INDEX %[1]s.tasks_owner_created_status;
		CREATE INDEX tasks_owner_created ON %[1]s.tasks (owner, created_at_ms, id);
		DROP TABLE %[1]s.task_log_lines; DROP TABLE %[1]s.task_log_heads;
		DROP TABLE %[1]s.operations; DROP INDEX %[1]s.tasks_claim;
		CREATE INDEX tasks_claim ON %[1]s.tasks (lease_expires_at_ms NULLS FIRST, created_at_ms, id)
			WHERE status IN ('working', 'input_required');
		ALTER TABLE %[1]s.tasks DROP COLUMN queue, DROP COLUMN queued, DROP COLUMN external_ref;
		DROP INDEX %[1]s.tasks_idempotency;
		ALTER TABLE %[1]s.tasks DROP COLUMN key_owner;
		CREATE UNIQUE INDEX tasks_idempotency ON %[1]s.tasks (owner, idempotency_key) WHERE idempotency_key IS NOT NULL;
		DROP INDEX %[1]s.tasks_owner_active;
		DELETE FROM %[1]s.schema_migrations WHERE version >= 2`, quoted)); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = openTest(t, schema)
	var v int
	var index *string
	if err := s.pool.QueryRow(t.Context(), fmt.Sprintf(`SELECT max(version), to_regclass('%s.tasks_owner_active')::text FROM %s.schema_migrations`,
		strings.ReplaceAll(quoted, "'", "''"), quoted)).Scan(&v, &index); err != nil {
		t.Fatal(err)
	}
	if v != len(migrations) || index == nil {
		t.Errorf("after migrating a version 1 schema: version %d, index %v; want %d and the index", v, index, len(migrations))
	}
	if _, err := s.Get(t.Context(), tk.ID); err != nil {
		t.Errorf("the task of the version 1 schema: %v", err)
	}
	if err := s.Create(t.Context(), newTask("alice", now), store.CreateOptions{MaxActive: 1}); !errors.Is(err, store.ErrTooManyActive) {
		t.Errorf("Create over the quota after migrating: %v, want store.ErrTooManyActive", err)
	}
}

// TestTransient: the errors of a store whose server is out of reach (a
// TCP proxy in front of the real server cuts the connections and refuses
// new ones, as a restart does) are transient, as are the SQLSTATEs of a
// server shutting down and of a serialization failure; a missing task, an
// Update function's error, a closed store and a done context are not.
func TestTransient(t *testing.T) {
	dsn := testDSN(t)
	schema := newSchema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.NewTCP(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	u.Host = proxy.Addr
	ctx := t.Context()
	s, err := Open(ctx, u.String(), &Options{Schema: schema, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tk := newTask("alice", time.Now())
	if err := s.Create(ctx, tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proxy.SetDown(true)
	_, cut := s.Get(ctx, tk.ID)
	_, refused := s.Update(ctx, tk.ID, func(*task.Task) error { return nil })
	proxy.SetDown(false)
	for what, err := range map[string]error{"a cut connection": cut, "a refused connection": refused} {
		if err == nil || !s.Transient(err) {
			t.Errorf("%s: %v, transient %v; want a transient error", what, err, s.Transient(err))
		}
	}
	_, notFound := s.Get(ctx, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	fnErr := errors.New("the Update function's own error")
	_, fnFailed := s.Update(ctx, tk.ID, func(*task.Task) error { return fnErr })
	for _, err := range []error{nil, notFound, fnFailed, ErrClosed, context.Canceled, context.DeadlineExceeded} {
		if s.Transient(err) {
			t.Errorf("Transient(%v) = true", err)
		}
	}
	if !s.Transient(&pgconn.PgError{Code: "57P01"}) || !s.Transient(&pgconn.PgError{Code: "40001"}) || s.Transient(&pgconn.PgError{Code: "23505"}) {
		t.Error("SQLSTATE 57P01 and 40001 are transient, 23505 (unique violation) is not")
	}
}
