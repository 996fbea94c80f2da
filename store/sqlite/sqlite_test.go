package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/storetest"
	"github.com/mcptask/mcptask/task"
)

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func openTest(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path, &Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) store.Store {
			return openTest(t, filepath.Join(t.TempDir(), "tasks.db"))
		},
		OpenShared: func(t *testing.T, st store.Store) store.Store {
			return openTest(t, st.(*Store).Path())
		},
	})
}

// TestStoreViewCache runs the suite with the view cache on: every
// write path must drop what it changes from it.
func TestStoreViewCache(t *testing.T) {
	open := func(t *testing.T, path string) *Store {
		s, err := Open(path, &Options{Logger: testLogger(t), ViewCache: true})
		if err != nil {
			t.Fatalf("Open(%s): %v", path, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) store.Store {
			return open(t, filepath.Join(t.TempDir(), "tasks.db"))
		},
		OpenShared: func(t *testing.T, st store.Store) store.Store {
			return open(t, st.(*Store).Path())
		},
	})
}

var now = time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)

// newTask is the suite's task (see storetest.NewTask).
var newTask = storetest.NewTask

// TestReopen checks restart durability: everything committed before Close
// is there after Open, and cursors issued before stay valid.
func TestReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path, &Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	var all []*task.Task
	for i := range 30 {
		tk := newTask("alice", now.Add(time.Duration(i)*time.Second))
		if err := s.Create(ctx, tk, store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 0:
			tk, err = s.Update(ctx, tk.ID, func(tk *task.Task) error {
				return tk.Complete(json.RawMessage(fmt.Sprintf(`{"content":[{"type":"text","text":"result %d"}]}`, i)), now.Add(time.Hour))
			})
		case 1:
			tk, err = s.Update(ctx, tk.ID, func(tk *task.Task) error {
				_, err := tk.AddInputRequest(json.RawMessage(`{"method":"elicitation/create"}`), now.Add(time.Hour))
				return err
			})
		}
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, tk)
	}
	_, cursor, err := s.List(ctx, "alice", "", 10)
	if err != nil || cursor == "" {
		t.Fatalf("List = %q, %v", cursor, err)
	}
	wantRest, _, err := s.List(ctx, "alice", cursor, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = openTest(t, path)
	for _, tk := range all {
		got, err := s.Get(ctx, tk.ID)
		if err != nil {
			t.Fatalf("after reopening, Get(%s): %v", tk.ID, err)
		}
		if got.Status != tk.Status || string(got.Result) != string(tk.Result) || got.InputSeq != tk.InputSeq ||
			!got.LastUpdatedAt.Equal(tk.LastUpdatedAt) || len(got.InputRequests) != len(tk.InputRequests) {
			t.Errorf("after reopening, task %s = %+v, want %+v", tk.ID, got, tk)
		}
	}
	rest, _, err := s.List(ctx, "alice", cursor, 100)
	if err != nil {
		t.Fatalf("List with a cursor from before the restart: %v", err)
	}
	if len(rest) != len(wantRest) || len(rest) != 20 {
		t.Errorf("List after reopening = %d tasks, want %d", len(rest), len(wantRest))
	}
	active, err := s.ListActive(ctx)
	if err != nil || len(active) != 20 {
		t.Errorf("ListActive after reopening = %d tasks, %v; want 20", len(active), err)
	}
}

func TestPragmasAndSchema(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "tasks.db"))
	for _, c := range []struct {
		db    *sql.DB
		query string
		want  string
	}{
		{s.wdb, "PRAGMA journal_mode", "wal"},
		{s.wdb, "PRAGMA synchronous", "2"}, // FULL
		{s.wdb, "PRAGMA busy_timeout", "5000"},
		{s.wdb, "PRAGMA secure_delete", "1"}, // ON: deleted content is zeroed
		{s.wdb, "PRAGMA user_version", fmt.Sprint(len(migrations))},
		{s.rdb, "PRAGMA query_only", "1"},
		{s.rdb, "PRAGMA busy_timeout", "5000"},
	} {
		var got string
		if err := c.db.QueryRow(c.query).Scan(&got); err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		if got != c.want {
			t.Errorf("%s = %s, want %s", c.query, got, c.want)
		}
	}
	// The read pool cannot write.
	if _, err := s.rdb.Exec(`DELETE FROM tasks`); err == nil {
		t.Error("a read connection could write")
	}
	// The queries use their indexes.
	for _, c := range []struct {
		query string
		args  []any
		index string // the plan must name it, and sort nothing
	}{
		{`SELECT id FROM tasks WHERE owner = 'a' AND (created_at_ms, id) < (1, 'x') ORDER BY created_at_ms DESC, id DESC LIMIT 10`, nil, "tasks_owner_created"},
		{`SELECT ` + taskColumns + ` FROM tasks WHERE status IN ('working', 'input_required') ORDER BY created_at_ms, id`, nil, "tasks_active"},
		{deleteExpiredSQL, []any{int64(5)}, "tasks_expires"},
		// Task trees: a task's children and a tree, on their partial
		// indexes (the filters of rowcodec.BrowseFilter).
		{`SELECT id FROM tasks WHERE parent_id <> '' AND parent_id = ? ORDER BY created_at_ms DESC, id DESC LIMIT 10`, []any{"p"}, "tasks_parent"},
		{`SELECT count(*) FROM tasks WHERE root_id <> '' AND root_id = ? AND parent_id <> ''`, []any{"r"}, "tasks_root"},
		// Claim: a range of the index, not a scan of every active task.
		{claimSQL, []any{int64(5), int64(10)}, "SEARCH tasks USING INDEX tasks_claim (lease_expires_at_ms<?)"},
		{claimAllSQL, []any{"engine-1", int64(-1)}, "tasks_claim"},
		{byKeySQL, []any{"alice", "k"}, "SEARCH tasks USING INDEX tasks_idempotency (key_owner=? AND idempotency_key=?)"},
		// The quota count of Create reads the owner's unfinished tasks only.
		{countActiveSQL, []any{"alice", int64(5)}, "SEARCH tasks USING INDEX tasks_owner_active (owner=?)"},
		{heartbeatSQL, []any{int64(5), "id", "engine-1"}, "(id=?)"},
	} {
		if p := queryPlan(t, s, c.query, c.args...); !strings.Contains(p, c.index) || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("plan of %q = %q, want a use of %s without sorting", c.query, p, c.index)
		}
	}
}

func TestCloseIdempotent(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tk := newTask("alice", now)
	if err := s.Create(t.Context(), tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Errorf("Close again: %v", err)
	}
	ctx := t.Context()
	if err := s.Create(ctx, newTask("alice", now), store.CreateOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Create after Close: %v", err)
	}
	if _, err := s.Get(ctx, tk.ID); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if _, err := s.Update(ctx, tk.ID, func(*task.Task) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Update after Close: %v", err)
	}
	if _, _, err := s.List(ctx, "alice", "", 10); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Close: %v", err)
	}
	if _, err := s.ListActive(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("ListActive after Close: %v", err)
	}
	if _, err := s.DeleteExpired(ctx, now); !errors.Is(err, ErrClosed) {
		t.Errorf("DeleteExpired after Close: %v", err)
	}
	if err := s.Delete(ctx, tk.ID); !errors.Is(err, ErrClosed) {
		t.Errorf("Delete after Close: %v", err)
	}
	if _, err := s.Claim(ctx, store.ClaimRequest{Runner: "e", Now: now, Lease: time.Second}); !errors.Is(err, ErrClosed) {
		t.Errorf("Claim after Close: %v", err)
	}
	for _, ids := range [][]task.ID{{tk.ID}, nil} {
		if _, err := s.Heartbeat(ctx, "e", ids, now); !errors.Is(err, ErrClosed) {
			t.Errorf("Heartbeat(%v) after Close: %v", ids, err)
		}
	}
}

// TestCloseWhileWriting closes the store under a stream of writes: every
// write either succeeds (and is then on disk) or fails with ErrClosed.
func TestCloseWhileWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created []task.ID
	)
	for range 50 {
		wg.Go(func() {
			for {
				tk := newTask("alice", now)
				err := s.Create(context.Background(), tk, store.CreateOptions{})
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Create: %v", err)
					return
				}
				mu.Lock()
				created = append(created, tk.ID)
				n := len(created)
				mu.Unlock()
				if n == 200 {
					go s.Close()
				}
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, path)
	for _, id := range created {
		if _, err := s.Get(t.Context(), id); err != nil {
			t.Fatalf("task %s acknowledged before Close is missing: %v", id, err)
		}
	}
}

// TestConcurrentCreate1000 is the start-up storm: 1,000 tasks created at
// once, all durable and all readable.
func TestConcurrentCreate1000(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "tasks.db"))
	const n = 1000
	tasks := make([]*task.Task, n)
	for i := range tasks {
		tasks[i] = newTask(task.Owner(fmt.Sprintf("owner-%d", i%10)), now.Add(time.Duration(i)*time.Millisecond))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, tk := range tasks {
		wg.Go(func() {
			if err := s.Create(t.Context(), tk, store.CreateOptions{}); err != nil {
				t.Errorf("Create: %v", err)
			}
			if _, err := s.Get(t.Context(), tk.ID); err != nil {
				t.Errorf("Get right after Create: %v", err)
			}
		})
	}
	wg.Wait()
	t.Logf("%d concurrent creates in %v", n, time.Since(start))
	total := 0
	for i := range 10 {
		cursor := ""
		for {
			page, next, err := s.List(t.Context(), task.Owner(fmt.Sprintf("owner-%d", i)), cursor, 33)
			if err != nil {
				t.Fatal(err)
			}
			total += len(page)
			if next == "" {
				break
			}
			cursor = next
		}
	}
	if total != n {
		t.Errorf("List found %d tasks, want %d", total, n)
	}
}

// TestTwoStoresOneFile stands for two processes sharing the database:
// writes of each are visible to the other, and their Updates of the same
// task serialise.
func TestTwoStoresOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	a, b := openTest(t, path), openTest(t, path)
	ctx := t.Context()
	tk := newTask("alice", now)
	if err := a.Create(ctx, tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, tk.ID); err != nil {
		t.Fatalf("the other store does not see the task: %v", err)
	}
	const n = task.MaxPendingInputRequests // the most one task holds
	var wg sync.WaitGroup
	for i := range n {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			if _, err := s.Update(ctx, tk.ID, func(t *task.Task) error {
				_, err := t.AddInputRequest(json.RawMessage(`{}`), now)
				return err
			}); err != nil {
				t.Errorf("Update: %v", err)
			}
			if err := s.Create(ctx, newTask("bob", now), store.CreateOptions{}); err != nil {
				t.Errorf("Create: %v", err)
			}
		})
	}
	wg.Wait()
	got, err := b.Get(ctx, tk.ID)
	if err != nil || got.InputSeq != n {
		t.Fatalf("after %d Updates from two stores: seq %d, %v", n, got.InputSeq, err)
	}
	bobs, _, err := a.List(ctx, "bob", "", 1000)
	if err != nil || len(bobs) != n {
		t.Errorf("List = %d tasks, %v; want %d", len(bobs), err, n)
	}
	// Both stores share the cursor key.
	_, cursor, err := a.List(ctx, "bob", "", 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.List(ctx, "bob", cursor, 5); err != nil {
		t.Errorf("a cursor of one store is refused by the other: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing", "tasks.db"), nil); err == nil {
		t.Error("Open in a missing directory succeeded")
	}
	if _, err := Open("", nil); err == nil {
		t.Error(`Open("") succeeded`)
	}
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte(strings.Repeat("this is not a database\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(junk, nil); err == nil {
		t.Error("Open of a file that is not a database succeeded")
	}

	// A database from a newer program is refused, not clobbered.
	newer := filepath.Join(dir, "newer.db")
	s, err := Open(newer, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.wdb.Exec(fmt.Sprintf("PRAGMA user_version = %d", len(migrations)+1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(newer, nil); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open of a newer schema: %v", err)
	}

	// So is a database of some other application.
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE users (id INTEGER)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(other, nil); err == nil {
		t.Error("Open of another application's database succeeded")
	}
}

func TestOddPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a dir?with#odd%chars&x=1")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tasks.db")
	s := openTest(t, path)
	if err := s.Create(t.Context(), newTask("alice", now), store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the database is not where it was asked to be: %v", err)
	}
}

func TestListLimits(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "tasks.db"))
	for i := range DefaultListLimit + 1 {
		if err := s.Create(t.Context(), newTask("alice", now.Add(time.Duration(i)*time.Millisecond)), store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{0, -1} {
		page, next, err := s.List(t.Context(), "alice", "", limit)
		if err != nil || len(page) != DefaultListLimit || next == "" {
			t.Errorf("List with limit %d = %d tasks, next %q, %v", limit, len(page), next, err)
		}
	}
	page, next, err := s.List(t.Context(), "alice", "", MaxListLimit*10)
	if err != nil || len(page) != DefaultListLimit+1 || next != "" {
		t.Errorf("List with a huge limit = %d tasks, next %q, %v", len(page), next, err)
	}
	if !slices.IsSortedFunc(page, func(a, b *task.Task) int { return b.CreatedAt.Compare(a.CreatedAt) }) {
		t.Error("List is not newest first")
	}
}

func benchStore(b *testing.B) *Store {
	b.Helper()
	return openTest(b, filepath.Join(b.TempDir(), "tasks.db"))
}

func BenchmarkCreate(b *testing.B)         { storetest.BenchCreate(b, benchStore(b)) }
func BenchmarkCreateParallel(b *testing.B) { storetest.BenchCreateParallel(b, benchStore(b)) }
func BenchmarkGet(b *testing.B)            { storetest.BenchGet(b, benchStore(b)) }
func BenchmarkView(b *testing.B)           { storetest.BenchView(b, benchStore(b)) }
func BenchmarkUpdate(b *testing.B)         { storetest.BenchUpdate(b, benchStore(b)) }
func BenchmarkStartQueued(b *testing.B)    { storetest.BenchStartQueued(b, benchStore(b)) }

func TestSynchronousOption(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		in   Sync
		want int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{{"", 2}, {SyncFull, 2}, {"normal", 1}} {
		s, err := Open(filepath.Join(dir, "sync-"+string(tc.in)+".db"), &Options{Synchronous: tc.in})
		if err != nil {
			t.Fatal(err)
		}
		var got int
		if err := s.wdb.QueryRow("PRAGMA synchronous").Scan(&got); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if got != tc.want {
			t.Errorf("Synchronous %q: PRAGMA synchronous = %d, want %d", tc.in, got, tc.want)
		}
	}
	if _, err := Open(filepath.Join(dir, "bad.db"), &Options{Synchronous: "OFF"}); err == nil {
		t.Error("Synchronous OFF accepted")
	}
}

// TestQuotaTwoStores stands for two processes sharing the file: their
// Creates with a quota for one owner, racing, never overshoot the
// quota, since each counts and inserts under the database's write lock.
func TestQuotaTwoStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	storetest.QuotaShared(t, openTest(t, path), openTest(t, path))
}

// TestMigrateFromV9 opens a file of schema version 9 (before the
// tool-error and start columns): Open adds them, finds the tool errors
// among the results and the starts in the histories.
func TestMigrateFromV9(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s := openTest(t, path)
	ids := storetest.OutcomeBeforeMigration(t, s)
	if _, err := s.wdb.Exec(`DROP TRIGGER task_events_publish; DROP TRIGGER events_fan_out; DROP TRIGGER event_subscriptions_delete; DROP TRIGGER tasks_delete_published;
		DROP INDEX tasks_parent; DROP INDEX tasks_root; ALTER TABLE tasks DROP COLUMN parent_id; ALTER TABLE tasks DROP COLUMN root_id;
		DROP TABLE controls; DROP TABLE event_deliveries; DROP TABLE event_subscriptions; DROP TABLE events; DELETE FROM meta WHERE key = 'events_floor';
		DROP INDEX tasks_tool_errors; ALTER TABLE tasks DROP COLUMN tool_error;
		ALTER TABLE tasks DROP COLUMN started_at_ms; PRAGMA user_version = 9`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, path)
	storetest.OutcomeMigrated(t, s, ids)
}

// TestMigrateFromV8 opens a file of schema version 8 (before the
// correlation columns): Open adds them, the task and the operation of the
// file are kept with no correlation, and new ones keep theirs.
func TestMigrateFromV8(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s := openTest(t, path)
	tk := newTask("alice", now)
	if err := s.Create(t.Context(), tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordOperation(t.Context(), &task.Operation{Key: "k8", TaskID: tk.ID, Owner: "alice", Effect: "e"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.wdb.Exec(`DROP TRIGGER task_events_publish; DROP TRIGGER events_fan_out; DROP TRIGGER event_subscriptions_delete; DROP TRIGGER tasks_delete_published;
		DROP INDEX tasks_parent; DROP INDEX tasks_root; ALTER TABLE tasks DROP COLUMN parent_id; ALTER TABLE tasks DROP COLUMN root_id;
		DROP TABLE controls; DROP TABLE event_deliveries; DROP TABLE event_subscriptions; DROP TABLE events; DELETE FROM meta WHERE key = 'events_floor';
		DROP INDEX tasks_tool_errors; ALTER TABLE tasks DROP COLUMN tool_error;
		ALTER TABLE tasks DROP COLUMN started_at_ms;
		ALTER TABLE tasks DROP COLUMN correlation; ALTER TABLE operations DROP COLUMN correlation;
		PRAGMA user_version = 8`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, path)
	var v int
	if err := s.wdb.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != len(migrations) {
		t.Fatalf("version after migrating a version 8 file: %d, %v; want %d", v, err, len(migrations))
	}
	storetest.CorrelationMigrated(t, s, tk.ID, "k8")
}

// TestMigrateFromV1 opens a file of schema version 1 (before
// tasks_owner_active): Open adds the index and keeps the tasks.
func TestMigrateFromV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s := openTest(t, path)
	tk := newTask("alice", now)
	if err := s.Create(t.Context(), tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Back to version 1: migration 10 added the tool-error and start
	// columns, migration 9 added the correlation columns,
	// migration 8 replaced the queue index by one by
	// owner and added the queue turns, migration 7 added the histories and the indexes
	// of browsing, migration 6 the task logs, migration 5
	// the ledger, migration 4 the queue columns, migration 3 scoped keys
	// by key owner, migration 2 only added an index.
	if _, err := s.wdb.Exec(`DROP TRIGGER task_events_publish; DROP TRIGGER events_fan_out; DROP TRIGGER event_subscriptions_delete; DROP TRIGGER tasks_delete_published;
		DROP INDEX tasks_parent; DROP INDEX tasks_root; ALTER TABLE tasks DROP COLUMN parent_id; ALTER TABLE tasks DROP COLUMN root_id;
		DROP TABLE controls; DROP TABLE event_deliveries; DROP TABLE event_subscriptions; DROP TABLE events; DELETE FROM meta WHERE key = 'events_floor';
		DROP INDEX tasks_tool_errors; ALTER TABLE tasks DROP COLUMN tool_error;
		ALTER TABLE tasks DROP COLUMN started_at_ms; ALTER TABLE tasks DROP COLUMN correlation; DROP INDEX tasks_queue_owner; DROP TABLE queue_turns; DROP TRIGGER tasks_delete_events; DROP TABLE task_events; DROP INDEX tasks_created;
		DROP INDEX tasks_tool_created; DROP INDEX tasks_finished; DROP INDEX tasks_status_created;
		DROP TRIGGER tasks_delete_log; DROP TABLE task_log_lines; DROP TABLE task_log_heads;
		DROP TABLE operations; DROP INDEX tasks_claim;
		CREATE INDEX tasks_claim ON tasks (lease_expires_at_ms, created_at_ms, id) WHERE status IN ('working', 'input_required');
		ALTER TABLE tasks DROP COLUMN queue;
		ALTER TABLE tasks DROP COLUMN queued; ALTER TABLE tasks DROP COLUMN external_ref;
		DROP INDEX tasks_idempotency; ALTER TABLE tasks DROP COLUMN key_owner;
		CREATE UNIQUE INDEX tasks_idempotency ON tasks (owner, idempotency_key) WHERE idempotency_key <> '';
		DROP INDEX tasks_owner_active; PRAGMA user_version = 1`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, path)
	var v, indexes int
	if err := s.wdb.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if err := s.wdb.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'tasks_owner_active'`).Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	if v != len(migrations) || indexes != 1 {
		t.Errorf("after migrating a version 1 file: version %d, %d tasks_owner_active indexes; want %d and 1", v, indexes, len(migrations))
	}
	if _, err := s.Get(t.Context(), tk.ID); err != nil {
		t.Errorf("the task of the version 1 file: %v", err)
	}
	if err := s.Create(t.Context(), newTask("alice", now), store.CreateOptions{MaxActive: 1}); !errors.Is(err, store.ErrTooManyActive) {
		t.Errorf("Create over the quota after migrating: %v, want store.ErrTooManyActive", err)
	}
}

// TestFileGone: a database file deleted (or replaced) while the store has
// it open is noticed: Ping and every write fail with ErrFileGone, instead
// of acknowledging tasks that vanish at the next start.
func TestFileGone(t *testing.T) {
	for _, how := range []string{"deleted", "replaced"} {
		dir := t.TempDir()
		path := filepath.Join(dir, "tasks.db")
		s := openTest(t, path)
		ctx := t.Context()
		if err := s.Create(ctx, newTask("alice", now), store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("Ping before: %v", err)
		}
		switch how {
		case "deleted":
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		case "replaced":
			other := filepath.Join(dir, "other.db")
			o := openTest(t, other)
			o.Close()
			if err := os.Rename(other, path); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Ping(ctx); !errors.Is(err, ErrFileGone) {
			t.Errorf("%s: Ping = %v, want ErrFileGone", how, err)
		}
		if err := s.Create(ctx, newTask("alice", now), store.CreateOptions{}); !errors.Is(err, ErrFileGone) {
			t.Errorf("%s: Create = %v, want ErrFileGone", how, err)
		}
	}
}

// TestCorruptFile: a database file damaged on disk is noticed, and the
// store refuses to write to it (it acknowledged creates and Ping said ok):
// Open refuses a damaged file; a running store whose file is overwritten
// in place (the same file, so ErrFileGone does not apply), or whose pages
// SQLite finds malformed, fails Ping and every write with ErrCorrupt.
func TestCorruptFile(t *testing.T) {
	ctx := t.Context()
	filled := func(t *testing.T) (path string, size int64) {
		t.Helper()
		path = filepath.Join(t.TempDir(), "tasks.db")
		s := openTest(t, path)
		for range 200 {
			tk := newTask("alice", now)
			tk.Request = json.RawMessage(`{"name":"x","arguments":{"pad":"` + strings.Repeat("p", 2000) + `"}}`)
			if err := s.Create(ctx, tk, store.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil { // checkpoints the WAL into the file
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Size() < 64<<10 {
			t.Fatalf("the filled database has %v bytes (%v)", fi.Size(), err)
		}
		return path, fi.Size()
	}
	// damage overwrites the pages after the first (the schema's) in place.
	damage := func(t *testing.T, path string, size int64) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		junk := bytes.Repeat([]byte{0xA5}, int(size-4096))
		if _, err := f.WriteAt(junk, 4096); err != nil {
			t.Fatal(err)
		}
	}
	refuses := func(t *testing.T, s *Store, how string) {
		t.Helper()
		if err := s.Ping(ctx); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Ping = %v, want ErrCorrupt", how, err)
		}
		if err := s.Create(ctx, newTask("alice", now), store.CreateOptions{}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Create = %v, want ErrCorrupt", how, err)
		}
		if _, err := s.Update(ctx, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", func(*task.Task) error { return nil }); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Update = %v, want ErrCorrupt", how, err)
		}
	}

	t.Run("open refuses a damaged file", func(t *testing.T) {
		path, size := filled(t)
		damage(t, path, size)
		s, err := Open(path, &Options{Logger: testLogger(t)})
		if err == nil {
			s.Close()
			t.Fatal("Open of a damaged file succeeded")
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open = %v, want ErrCorrupt", err)
		}
	})
	t.Run("overwritten in place while open", func(t *testing.T) {
		path, _ := filled(t)
		s := openTest(t, path)
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("Ping before: %v", err)
		}
		if err := os.WriteFile(path, []byte("not a database any more\n"), 0o600); err != nil { // same inode
			t.Fatal(err)
		}
		refuses(t, s, "overwritten")
	})
	t.Run("malformed pages found while open", func(t *testing.T) {
		path, size := filled(t)
		s := openTest(t, path)
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("Ping before: %v", err)
		}
		damage(t, path, size)
		if _, _, err := s.List(ctx, task.UserOwner("alice", ""), "", 1000); err == nil {
			t.Fatal("List over malformed pages succeeded")
		}
		refuses(t, s, "malformed pages")
	})
}

// TestTransient: a write refused because another connection holds the
// file's write lock past the busy timeout is transient (worth trying
// again); a missing task, a closed store and a corrupt file are not.
func TestTransient(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path, &Options{Logger: testLogger(t), BusyTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	other, err := sql.Open("sqlite", dsn(s.Path(), url.Values{"_txlock": {"immediate"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.BeginTx(ctx, nil) // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	busy := s.Create(ctx, newTask("alice", now), store.CreateOptions{})
	_ = tx.Rollback()
	if busy == nil || !s.Transient(busy) {
		t.Errorf("Create while another connection holds the write lock: %v, transient %v; want a transient error", busy, s.Transient(busy))
	}
	if err := s.Create(ctx, newTask("alice", now), store.CreateOptions{}); err != nil {
		t.Fatalf("Create once the lock is released: %v", err)
	}
	_, notFound := s.Get(ctx, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	for _, err := range []error{nil, notFound, ErrClosed, ErrCorrupt, ErrFileGone, context.Canceled} {
		if s.Transient(err) {
			t.Errorf("Transient(%v) = true", err)
		}
	}
}

// TestLocksKeptWhileOpen: the store's checks of the file (Ping, and
// before each write batch) keep SQLite's locks on it. Closing a
// descriptor of the file dropped them all (POSIX), so the sqlite3 shell
// making a backup, as docs/operations.md says to, took itself for the
// last user, checkpointed and deleted the WAL, and the store's next
// acknowledged writes were lost.
func TestLocksKeptWhileOpen(t *testing.T) {
	sqlite3, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Skip("SKIPPED: needs the sqlite3 shell (Debian package sqlite3; .ci/run installs it)")
	}
	path := filepath.Join(t.TempDir(), "tasks.db")
	s := openTest(t, path)
	ctx := t.Context()
	for range 3 {
		if err := s.Create(ctx, newTask("alice", now), store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(sqlite3, path, ".backup "+path+".copy").CombinedOutput(); err != nil {
		t.Fatalf("sqlite3 .backup: %v\n%s", err, out)
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Fatalf("the WAL of the open store is gone after another process closed the database: %v", err)
	}
	for range 3 {
		if err := s.Create(ctx, newTask("alice", now), store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	other, err := sql.Open("sqlite", dsn(path, url.Values{"_pragma": {"query_only(1)"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var n int
	if err := other.QueryRow(`SELECT count(*) FROM tasks`).Scan(&n); err != nil || n != 6 {
		t.Fatalf("another connection sees %d tasks (%v), want the 6 created", n, err)
	}
}
