package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// fullDisk is a store whose writes fail, while full, as SQLite's do on a
// full disk.
type fullDisk struct {
	store.Store
	full   atomic.Bool
	failed atomic.Int64
}

var errDiskFull = errors.New("database or disk is full (SQLITE_FULL)")

func (s *fullDisk) Update(ctx context.Context, id task.ID, fn func(*task.Task) error) (*task.Task, error) {
	if s.full.Load() {
		s.failed.Add(1)
		return nil, errDiskFull
	}
	return s.Store.Update(ctx, id, fn)
}

// TestOutcomeWriteRetried: the write of a finished task's outcome fails
// (a full disk); the engine keeps the outcome, reports itself unhealthy,
// and writes it once the store takes writes again: the task completes with
// its result instead of staying working for ever.
func TestOutcomeWriteRetried(t *testing.T) {
	lite, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	st := &fullDisk{Store: lite}
	e, err := engine.New(engine.Options{Store: st, Logger: slog.New(slog.DiscardHandler), SweepInterval: -1, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	release := make(chan struct{})
	tk, err := e.Start(context.Background(), engine.StartSpec{Tool: "report"}, func(context.Context) (json.RawMessage, error) {
		<-release
		return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st.full.Store(true)
	close(release)
	waitFor(t, "the engine to report the failing write", func() bool { return e.Health() != nil && st.failed.Load() >= 2 })
	if err := e.Health(); !strings.Contains(err.Error(), "disk is full") {
		t.Errorf("Health = %v, want the store's error", err)
	}
	if got, _ := lite.Get(context.Background(), tk.ID); got.Status != task.Working {
		t.Fatalf("status while the write fails: %s", got.Status)
	}
	st.full.Store(false) // space is back
	got := waitTerminal(t, e, tk.ID)
	if got.Status != task.Completed || !strings.Contains(string(got.Result), "done") {
		t.Fatalf("after the disk had room again: %s %s, want completed with the result", got.Status, got.Result)
	}
	waitFor(t, "the engine to be healthy again", func() bool { return e.Health() == nil })
}
