package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// openCached opens the file at path with the view cache on.
func openCached(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path, &Options{Logger: testLogger(t), ViewCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// finished creates a completed task with an operation and a log line.
func finished(t *testing.T, s *Store) *task.Task {
	t.Helper()
	ctx := t.Context()
	tk := newTask("alice", time.Now().Add(-time.Minute))
	if err := s.Create(ctx, tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordOperation(ctx, &task.Operation{Key: "op-" + string(tk.ID), TaskID: tk.ID, Tool: tk.Tool, Owner: tk.Owner, Effect: "e"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLog(ctx, tk.ID, store.LogBatch{Lines: []store.LogLine{{Text: "one"}}}); err != nil {
		t.Fatal(err)
	}
	tk, err := s.Update(ctx, tk.ID, func(tk *task.Task) error {
		return tk.Complete(json.RawMessage(`{"content":[]}`), time.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

var allPayloads = store.ViewOptions{Request: true, Result: true, Error: true, InputRequests: true, InputResponses: true}

// cachedViews is how many Views the cache of s holds.
func cachedViews(s *Store) int {
	s.views.mu.Lock()
	defer s.views.mu.Unlock()
	return s.views.n
}

// TestViewCacheHolds: a task's View is kept (a copy, which its reader
// may change), whatever its status, and its next write drops it.
func TestViewCacheHolds(t *testing.T) {
	ctx := t.Context()
	s := openCached(t, filepath.Join(t.TempDir(), "tasks.db"))
	running := newTask("alice", time.Now())
	running.Runner, running.LeaseExpiresAt = "r1", time.Now().Add(time.Minute)
	if err := s.Create(ctx, running, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.View(ctx, running.ID, allPayloads); err != nil {
		t.Fatal(err)
	}
	if n := cachedViews(s); n != 1 {
		t.Fatalf("a running task's View: %d kept, want 1", n)
	}
	if _, err := s.Update(ctx, running.ID, func(tk *task.Task) error { return tk.SetStatusMessage("step 2", time.Now()) }); err != nil {
		t.Fatal(err)
	}
	if n := cachedViews(s); n != 0 {
		t.Fatalf("after its Update: %d kept, want 0", n)
	}
	if v, err := s.View(ctx, running.ID, allPayloads); err != nil || v.Task.StatusMessage != "step 2" {
		t.Fatalf("after its Update: %+v, %v", v, err)
	}
	if _, err := s.Heartbeat(ctx, running.Runner, []task.ID{running.ID}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := cachedViews(s); n != 0 {
		t.Fatalf("after its heartbeat: %d kept, want 0", n)
	}
	done := finished(t, s)
	first, err := s.View(ctx, done.ID, allPayloads)
	if err != nil {
		t.Fatal(err)
	}
	if n := cachedViews(s); n != 1 {
		t.Fatalf("%d Views kept, want 1", n)
	}
	first.Task.PollInterval = 123 * time.Hour
	first.Task.StatusMessage = "changed by a reader"
	first.Operation.State = task.OpConfirmed
	first.Log.Last = 99
	again, err := s.View(ctx, done.ID, allPayloads)
	if err != nil {
		t.Fatal(err)
	}
	if again.Task.PollInterval == 123*time.Hour || again.Task.StatusMessage == "changed by a reader" ||
		again.Operation.State == task.OpConfirmed || again.Log.Last == 99 {
		t.Errorf("a reader's change reached the cache: %+v %+v %+v", again.Task, again.Operation, again.Log)
	}
	// Other payloads are another entry.
	if _, err := s.View(ctx, done.ID, store.ViewOptions{Error: true}); err != nil {
		t.Fatal(err)
	}
	if n := cachedViews(s); n != 2 {
		t.Fatalf("%d Views kept, want 2", n)
	}
}

// TestViewCacheWrites: after each kind of write to a finished task,
// through this Store or another of the process on the file, View shows
// the write.
func TestViewCacheWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	a := openCached(t, path)
	b := openTest(t, path) // no cache of its own: its writes still drop a's
	for name, w := range map[string]*Store{"same store": a, "another store": b} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			tk := finished(t, a)
			view := func() *store.View {
				t.Helper()
				v, err := a.View(ctx, tk.ID, allPayloads)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			view()
			if _, err := w.Update(ctx, tk.ID, func(tk *task.Task) error { tk.ExternalRef = "late"; return nil }); err != nil {
				t.Fatal(err)
			}
			if v := view(); v.Task.ExternalRef != "late" {
				t.Errorf("after Update: external ref %q", v.Task.ExternalRef)
			}
			if _, err := w.UpdateOperation(ctx, "op-"+string(tk.ID), func(o *task.Operation) error {
				o.State, o.Receipt = task.OpConfirmed, "r1"
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if v := view(); v.Operation == nil || v.Operation.Receipt != "r1" {
				t.Errorf("after UpdateOperation: %+v", v.Operation)
			}
			if _, err := w.RecordOperation(ctx, &task.Operation{Key: "op2-" + string(tk.ID), TaskID: tk.ID, Tool: tk.Tool,
				Owner: tk.Owner, Effect: "e2", CreatedAt: time.Now().Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if v := view(); v.Operation == nil || v.Operation.Key != "op2-"+string(tk.ID) {
				t.Errorf("after RecordOperation: %+v", v.Operation)
			}
			if err := w.AppendLog(ctx, tk.ID, store.LogBatch{Lines: []store.LogLine{{Text: "two"}}}); err != nil {
				t.Fatal(err)
			}
			if v := view(); v.Log == nil || v.Log.Last != 2 {
				t.Errorf("after AppendLog: %+v", v.Log)
			}
			if _, err := w.DeleteOperations(ctx, time.Now().Add(2*time.Hour)); err != nil {
				t.Fatal(err)
			}
			if v := view(); v.Operation != nil {
				t.Errorf("after DeleteOperations: %+v", v.Operation)
			}
			if err := w.Delete(ctx, tk.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := a.View(ctx, tk.ID, allPayloads); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("after Delete: %v", err)
			}
			other := finished(t, a)
			view2 := func() error { _, err := a.View(ctx, other.ID, allPayloads); return err }
			if err := view2(); err != nil {
				t.Fatal(err)
			}
			if _, err := w.DeleteExpired(ctx, time.Now().Add(30*24*time.Hour)); err != nil {
				t.Fatal(err)
			}
			if err := view2(); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("after DeleteExpired: %v", err)
			}
		})
	}
}

// TestViewCacheRacingWrites: readers never see a task older than a write
// that returned before they read it, while writes and reads race (run
// with -race), for a finished task and a running one.
func TestViewCacheRacingWrites(t *testing.T) {
	for _, kind := range []string{"finished", "running"} {
		t.Run(kind, func(t *testing.T) { testRacingWrites(t, kind == "finished") })
	}
}

func testRacingWrites(t *testing.T, done bool) {
	ctx := t.Context()
	s := openCached(t, filepath.Join(t.TempDir(), "tasks.db"))
	var tk *task.Task
	if done {
		tk = finished(t, s)
	} else {
		tk = newTask("alice", time.Now())
		if err := s.Create(ctx, tk, store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu        sync.Mutex
		committed int // the newest version whose Update returned
	)
	const writes = 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				floor := committed
				mu.Unlock()
				v, err := s.View(ctx, tk.ID, allPayloads)
				if err != nil {
					t.Error(err)
					return
				}
				var got int
				if v.Task.ExternalRef != "" {
					fmt.Sscanf(v.Task.ExternalRef, "v%d", &got)
				}
				if got < floor {
					t.Errorf("read version %d after version %d was committed", got, floor)
					return
				}
			}
		}()
	}
	for i := 1; i <= writes; i++ {
		if _, err := s.Update(context.Background(), tk.ID, func(tk *task.Task) error {
			tk.ExternalRef = fmt.Sprintf("v%d", i)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		committed = i
		mu.Unlock()
	}
	close(stop)
	wg.Wait()
}
