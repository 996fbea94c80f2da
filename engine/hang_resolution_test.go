package engine_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// updateHangs is a store whose Update, once armed, blocks until its
// context ends (it honours ctx, as a PostgreSQL row lock wait would).
type updateHangs struct {
	store.Store
	armed atomic.Bool
	hung  chan struct{}
}

func (s *updateHangs) Update(ctx context.Context, id task.ID, fn func(*task.Task) error) (*task.Task, error) {
	if s.armed.Load() {
		s.hung <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Store.Update(ctx, id, fn)
}

// TestClaimTimeoutBoundsResolution: failing a claimed task whose outcome
// is unknown is bounded by ClaimTimeout, so a store Update that waits on
// its context (as a PostgreSQL row lock does) cannot hold the takeover
// service, and Shutdown with it, for ever. (It could: the write dropped
// the claim round's deadline.)
func TestClaimTimeoutBoundsResolution(t *testing.T) {
	lite, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := &updateHangs{Store: lite, hung: make(chan struct{}, 10)}
	e, err := engine.New(engine.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SweepInterval: -1, Lease: 300 * time.Millisecond, ClaimTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	dead := task.New(task.Policy{}, "", "unsafe", nil, time.Now())
	dead.Runner = "engine-that-died"
	dead.LeaseExpiresAt = time.Now().Add(-time.Minute)
	dead.Attempts = 1
	st.armed.Store(true)
	if err := lite.Create(t.Context(), dead, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-st.hung:
	case <-time.After(10 * time.Second):
		t.Fatal("never tried to fail the claimed task")
	}
	done := make(chan struct{})
	go func() {
		now, stop := context.WithCancel(context.Background())
		stop()
		e.Shutdown(now)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown still blocked 5s after a cancelled ctx: the claim round's Update outlived ClaimTimeout (200ms)")
	}
}
