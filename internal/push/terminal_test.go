package push_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/push"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// TestFollowSendsTheEndAtOnce: coalescing holds a change back until
// MinInterval after the last notification, but not the terminal state:
// it is the last, and the client waits for it (a task that ended just
// after a client started following it reached the client 50 ms late;
// through the gateway, that was most of a task's time).
func TestFollowSendsTheEndAtOnce(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Options{Store: st, Logger: slog.New(slog.DiscardHandler), Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := eng.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Shutdown(context.Background())
	release := make(chan struct{})
	tk, err := eng.Start(ctx, engine.StartSpec{Owner: "alice", Tool: "t"}, func(ctx context.Context) (json.RawMessage, error) {
		<-release
		return json.RawMessage(`{"content":[]}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan task.Status, 8)
	go func() {
		_ = push.Follow(ctx, eng, "alice", tk.ID, push.Options{MinInterval: time.Hour}, nil, func(t *task.Task) error {
			seen <- t.Status
			return nil
		})
	}()
	if s := <-seen; s != task.Working {
		t.Fatalf("first notification: %s, want working", s)
	}
	close(release)
	select {
	case s := <-seen:
		if s != task.Completed {
			t.Fatalf("second notification: %s, want completed", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the terminal state was held back by MinInterval")
	}
}
