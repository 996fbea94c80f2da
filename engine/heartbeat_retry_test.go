package engine_test

import (
	"context"
	"encoding/json"
	"errors"
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

// flakyHeartbeats is a store whose first Heartbeats fail, as they do while
// PostgreSQL restarts.
type flakyHeartbeats struct {
	store.Store
	failing atomic.Int64 // failures still to give
	calls   atomic.Int64

	mu     sync.Mutex
	rounds map[time.Time]int // calls by the deadline of their context: one per round
}

func (s *flakyHeartbeats) Heartbeat(ctx context.Context, runner string, ids []task.ID, until time.Time) ([]task.ID, error) {
	s.calls.Add(1)
	d, _ := ctx.Deadline()
	s.mu.Lock()
	s.rounds[d]++
	s.mu.Unlock()
	if s.failing.Add(-1) >= 0 {
		return nil, errors.New("connection refused (the database is restarting)")
	}
	return s.Store.Heartbeat(ctx, runner, ids, until)
}

// TestHeartbeatRetriedAtOnce: a lease renewal that fails (a short store
// outage) is tried again at once, backing off, not a whole heartbeat
// interval later, when the lease may have lapsed and another engine taken
// the running work over.
func TestHeartbeatRetriedAtOnce(t *testing.T) {
	lite, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	st := &flakyHeartbeats{Store: lite, rounds: map[time.Time]int{}}
	st.failing.Store(3)
	e, err := engine.New(engine.Options{Store: st, Logger: slog.New(slog.DiscardHandler), SweepInterval: -1,
		Lease: 3 * time.Second, HeartbeatInterval: time.Second, HeartbeatTimeout: 900 * time.Millisecond, ClaimInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	release := make(chan struct{})
	defer close(release)
	tk, err := e.Start(context.Background(), engine.StartSpec{Tool: "long"}, func(ctx context.Context) (json.RawMessage, error) {
		<-release
		return json.RawMessage(`{}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := lite.Get(context.Background(), tk.ID)
	waitFor(t, "the lease renewed despite three failed renewals", func() bool {
		cur, err := lite.Get(context.Background(), tk.ID)
		return err == nil && st.calls.Load() >= 4 && cur.LeaseExpiresAt.After(before.LeaseExpiresAt)
	})
	// The failed renewals were tried again within their round (the same
	// context), not left to the next rounds.
	st.mu.Lock()
	defer st.mu.Unlock()
	most := 0
	for _, n := range st.rounds {
		most = max(most, n)
	}
	if most < 4 {
		t.Errorf("calls per round: %v; want the three failures and the success in one round", st.rounds)
	}
}
