package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// TestChangesBehind: a listener whose fn is stuck while more than
// maxFeedBacklog announcements pile up is dropped (ErrFeedBehind) instead
// of slowing the writers, and the feed may be followed again.
func TestChangesBehind(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "tasks.db"))
	ctx := t.Context()
	tk := newTask("alice", now)
	if err := s.Create(ctx, tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready, stuck, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	first := true
	go func() {
		done <- s.Changes(ctx, func() { close(ready) }, func(task.ID) {
			if first {
				first = false
				close(stuck)
				<-release
			}
		})
	}()
	<-ready
	if _, err := s.Update(ctx, tk.ID, func(t *task.Task) error { return t.SetStatusMessage("one", now) }); err != nil {
		t.Fatal(err)
	}
	<-stuck
	// The writers' side: publishing never waits for the stuck fn.
	s.hub.publish(make([]task.ID, maxFeedBacklog+1))
	close(release)
	select {
	case err := <-done:
		if !errors.Is(err, ErrFeedBehind) {
			t.Fatalf("Changes of a listener that fell behind = %v, want ErrFeedBehind", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Changes of a listener that fell behind did not return")
	}
	// Called again, it follows the writes.
	ready2, seen := make(chan struct{}), make(chan task.ID, 1)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		done <- s.Changes(cctx, func() { close(ready2) }, func(id task.ID) {
			select {
			case seen <- id:
			default:
			}
		})
	}()
	<-ready2
	if _, err := s.Update(ctx, tk.ID, func(t *task.Task) error { return t.SetStatusMessage("two", now) }); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-seen:
		if id != tk.ID {
			t.Errorf("announced %s, want %s", id, tk.ID)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no announcement after following the feed again")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Changes after cancel = %v", err)
	}
}

// TestChangesThroughSymlink: two stores of the process on one file, named
// by two paths (one through a symbolic link), share their announcements.
func TestChangesThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.db")
	a := openTest(t, path)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	b := openTest(t, filepath.Join(link, "tasks.db"))
	if a.Path() == b.Path() {
		t.Fatalf("test bug: the two paths are the same: %s", a.Path())
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready, seen, done := make(chan struct{}), make(chan task.ID, 8), make(chan error, 1)
	go func() {
		done <- a.Changes(ctx, func() { close(ready) }, func(id task.ID) {
			select {
			case seen <- id:
			default:
			}
		})
	}()
	<-ready
	tk := newTask("alice", now)
	if err := b.Create(ctx, tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(ctx, tk.ID, func(t *task.Task) error { return t.SetStatusMessage("x", now) }); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-seen:
		if id != tk.ID {
			t.Errorf("announced %s, want %s", id, tk.ID)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("an Update through the symlinked path was not announced")
	}
	cancel()
	<-done
}
