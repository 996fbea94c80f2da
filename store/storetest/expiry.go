package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runExpiry checks DeleteExpired: terminal tasks past their retention go,
// every other task stays.
func (s *suite) runExpiry(t *testing.T) {
	run(t, []testCase{
		{"DeleteExpired", s.deleteExpired},
		{"FollowsUpdates", s.deleteExpiredFollowsUpdates},
	})
}

func (s *suite) deleteExpired(t *testing.T) {
	st := s.store(t)
	now := base.Add(10 * time.Hour).Truncate(time.Millisecond)

	terminal := func(status task.Status, lastUpdated time.Time, ttl time.Duration) *task.Task {
		tk := newTask("alice", base)
		tk.Status = status
		tk.LastUpdatedAt = lastUpdated
		tk.TTL = ttl
		return tk
	}
	var expired, kept []*task.Task
	// Terminal and past retention: deleted, whatever the terminal status.
	expired = append(expired,
		terminal(task.Completed, now.Add(-2*time.Hour), time.Hour),
		terminal(task.Failed, now.Add(-time.Hour-time.Millisecond), time.Hour),
		terminal(task.Cancelled, now.Add(-time.Second), 999*time.Millisecond),
		terminal(task.Completed, now.Add(-time.Millisecond), 0),
	)
	// Terminal and within retention, or exactly at its end: kept.
	kept = append(kept,
		terminal(task.Completed, now.Add(-time.Hour), time.Hour),
		terminal(task.Failed, now.Add(-30*time.Minute), time.Hour),
		terminal(task.Cancelled, now, 0),
		terminal(task.Completed, now.Add(time.Hour), time.Hour),
		terminal(task.Completed, now.Add(-time.Hour), 24*365*time.Hour),
	)
	// Non-terminal tasks are never deleted, however old.
	kept = append(kept,
		terminal(task.Working, now.Add(-1000*time.Hour), time.Millisecond),
		terminal(task.InputRequired, now.Add(-1000*time.Hour), 0),
	)
	for _, tk := range kept[len(kept)-2:] {
		if tk.Expired(now) {
			t.Fatalf("test bug: a %s task counts as expired", tk.Status)
		}
	}
	for _, tk := range expired {
		if !tk.Expired(now) {
			t.Fatalf("test bug: %s task expiring at %v is not expired at %v", tk.Status, tk.ExpiresAt(), now)
		}
	}
	mustCreate(t, st, expired...)
	mustCreate(t, st, kept...)

	n, err := st.DeleteExpired(t.Context(), now)
	if err != nil {
		t.Fatalf("DeleteExpired: %v", err)
	}
	if n != len(expired) {
		t.Errorf("DeleteExpired = %d, want %d", n, len(expired))
	}
	for _, tk := range expired {
		if _, err := st.Get(t.Context(), tk.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("expired %s task (expired at %v): Get err = %v, want ErrNotFound", tk.Status, tk.ExpiresAt(), err)
		}
	}
	for _, tk := range kept {
		if _, err := st.Get(t.Context(), tk.ID); err != nil {
			t.Errorf("kept %s task (expires at %v) is gone: %v", tk.Status, tk.ExpiresAt(), err)
		}
	}
	if n, err := st.DeleteExpired(t.Context(), now); err != nil || n != 0 {
		t.Errorf("second DeleteExpired = %d, %v; want 0", n, err)
	}
	// Time moves on: the first kept task now expires too.
	if n, err := st.DeleteExpired(t.Context(), now.Add(time.Millisecond)); err != nil || n != 2 {
		t.Errorf("DeleteExpired a millisecond later = %d, %v; want 2", n, err)
	}
}

func (s *suite) deleteExpiredFollowsUpdates(t *testing.T) {
	st := s.store(t)
	long := base.Add(-48 * time.Hour)
	now := base

	// A working task, created long ago, ends long ago through Update.
	ended := newTask("alice", long)
	ended.TTL = time.Hour
	// A task that ended long ago is touched again recently.
	touched := newTask("alice", long)
	touched.TTL = time.Hour
	if err := touched.Complete(json.RawMessage(`{}`), long); err != nil {
		t.Fatal(err)
	}
	// A long-running task that is still working.
	running := newTask("alice", long)
	running.TTL = time.Hour
	mustCreate(t, st, ended, touched, running)

	if _, err := st.Update(t.Context(), ended.ID, func(tk *task.Task) error {
		return tk.Complete(json.RawMessage(`{}`), long.Add(time.Minute))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(t.Context(), touched.ID, func(tk *task.Task) error {
		tk.LastUpdatedAt = now
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(t.Context(), running.ID, func(tk *task.Task) error {
		return tk.SetStatusMessage("still going", long.Add(time.Minute))
	}); err != nil {
		t.Fatal(err)
	}
	n, err := st.DeleteExpired(t.Context(), now)
	if err != nil || n != 1 {
		t.Fatalf("DeleteExpired = %d, %v; want 1", n, err)
	}
	if _, err := st.Get(t.Context(), ended.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the task ended by Update was not deleted: %v", err)
	}
	mustGet(t, st, touched.ID)
	mustGet(t, st, running.ID)
}
