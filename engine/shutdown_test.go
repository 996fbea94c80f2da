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
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// slowFeedStore is a real SQLite store (with its change feed) whose Get of
// one task, once armed, hangs until its context's deadline, and ignores
// the context's cancellation: a store that turns the deadline of a call
// into a statement timeout and watches nothing else. It records whether
// the store was closed while that Get still ran.
type slowFeedStore struct {
	*sqlite.Store
	target atomic.Pointer[task.ID]
	hung   chan struct{} // receives when the armed Get starts

	closed      chan struct{}
	closeOnce   sync.Once
	closedFirst atomic.Bool // Close came while the armed Get ran
	getDone     chan struct{}
}

// Get hangs as described above for the armed task, once.
func (s *slowFeedStore) Get(ctx context.Context, id task.ID) (*task.Task, error) {
	if p := s.target.Load(); p != nil && *p == id && s.target.CompareAndSwap(p, nil) {
		defer close(s.getDone)
		s.hung <- struct{}{}
		var deadline <-chan time.Time
		if d, ok := ctx.Deadline(); ok {
			deadline = time.After(time.Until(d))
		}
		select {
		case <-deadline:
			return nil, context.DeadlineExceeded
		case <-s.closed:
			s.closedFirst.Store(true)
			return nil, errors.New("slowFeedStore: closed while the Get ran")
		}
	}
	return s.Store.Get(ctx, id)
}

// Close records the closing, then closes the real store.
func (s *slowFeedStore) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return s.Store.Close()
}

// TestShutdownWaitsForFeedChecks: the engine reads a task announced by
// the change feed in a goroutine of its own (to see whether it ended
// elsewhere); Shutdown waits for that read, bounded by its per-call
// timeout, so that the caller's Close comes after it, never during it.
func TestShutdownWaitsForFeedChecks(t *testing.T) {
	lite, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := &slowFeedStore{Store: lite, hung: make(chan struct{}, 1), closed: make(chan struct{}), getDone: make(chan struct{})}
	defer st.Close()
	e, err := engine.New(engine.Options{
		Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SweepInterval: -1,
		Lease: time.Hour, FeedCheckTimeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	work, started, _ := untilCancelled()
	tk, err := e.Start(t.Context(), engine.StartSpec{Tool: "t"}, work)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	id := tk.ID
	st.target.Store(&id)
	// A change made elsewhere (here: straight in the store), announced by
	// the feed: the engine reads the task.
	if _, err := lite.Update(t.Context(), tk.ID, func(t *task.Task) error { return t.SetStatusMessage("elsewhere", time.Now()) }); err != nil {
		t.Fatal(err)
	}
	within(t, st.hung, 20*time.Second, "the engine never read the task announced by the feed")

	now, stop := context.WithCancel(context.Background())
	stop()
	if err := e.Shutdown(now); err != nil {
		t.Fatal(err)
	}
	select {
	case <-st.getDone:
	default:
		t.Error("Shutdown returned while a store call of the engine was still running")
	}
	// As a server does: close the store once the engine is shut down.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	within(t, st.getDone, 20*time.Second, "the hung Get never returned")
	if st.closedFirst.Load() {
		t.Error("the store was closed while the engine's Get of an announced task still ran")
	}
}
