package engine_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
)

// TestClaimAnnouncementStopsLostWork: when another engine claims a task
// (announced by the change feed), the engine that ran it stops its work at
// once, not at its next heartbeat (it did not: only a terminal task
// stopped work), so the two never run it side by side for long.
func TestClaimAnnouncementStopsLostWork(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	a, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlite.Open(path, nil) // another store of the process on the file
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	e, err := engine.New(engine.Options{Store: a, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SweepInterval: -1, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() { c, stop := context.WithCancel(context.Background()); stop(); _ = e.Shutdown(c) }()
	work, started, stopped := untilCancelled()
	tk, err := e.Start(t.Context(), engine.StartSpec{Tool: "t"}, work)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	// Another engine of the process takes the task over (its lease, as
	// seen from two hours on, has expired).
	got, err := b.Claim(t.Context(), store.ClaimRequest{Runner: "engine-b", Now: time.Now().Add(2 * time.Hour), Lease: time.Hour})
	if err != nil || len(got) != 1 || got[0].ID != tk.ID {
		t.Fatalf("Claim = %v, %v", got, err)
	}
	select {
	case <-stopped:
	case <-time.After(3 * time.Second):
		t.Fatal("3s after another engine of the process claimed the task (announced by the feed), its old work still runs")
	}
}
