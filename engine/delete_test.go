package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// TestDelete: the owner deletes a finished task, which then reads as
// unknown, and the deletion is audited without the result; a running task
// is refused (cancel first), then deleted once cancelled; a waiter on the
// task is woken; another owner and an unknown ID get a *NotFoundError.
func TestDelete(t *testing.T) {
	var trail syncBuf
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := engine.New(engine.Options{Store: st, Logger: slog.New(slog.DiscardHandler), SweepInterval: -1,
		Audit: audit.New(slog.New(slog.NewJSONHandler(&trail, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	ctx := context.Background()
	owner := task.Owner("alice")

	done, err := e.Start(ctx, engine.StartSpec{Owner: owner, Tool: "report"}, func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[{"type":"text","text":"secret payload"}]}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the task to complete", func() bool {
		got, err := e.Get(ctx, owner, done.ID)
		return err == nil && got.Status == task.Completed
	})
	var nf *engine.NotFoundError
	if _, err := e.Delete(ctx, "mallory", done.ID); !errors.As(err, &nf) || nf.Reason != audit.ReasonOtherOwner {
		t.Fatalf("Delete by another owner: %v", err)
	}
	watch := e.Watch(done.ID)
	got, err := e.Delete(ctx, owner, done.ID)
	if err != nil || got.ID != done.ID || got.Status != task.Completed {
		t.Fatalf("Delete = %+v, %v", got, err)
	}
	select {
	case <-watch:
	case <-time.After(10 * time.Second):
		t.Error("a waiter on the deleted task was not woken")
	}
	if _, err := e.Get(ctx, owner, done.ID); !errors.As(err, &nf) || nf.Reason != audit.ReasonUnknown {
		t.Errorf("Get after Delete: %v, want unknown", err)
	}
	if _, err := e.Delete(ctx, owner, done.ID); !errors.As(err, &nf) || nf.Reason != audit.ReasonUnknown {
		t.Errorf("second Delete: %v, want unknown", err)
	}

	release := make(chan struct{})
	defer close(release)
	running, err := e.Start(ctx, engine.StartSpec{Owner: owner, Tool: "rollout"}, func(ctx context.Context) (json.RawMessage, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return json.RawMessage(`{}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var nt *engine.NotTerminalError
	if _, err := e.Delete(ctx, owner, running.ID); !errors.As(err, &nt) || nt.Status != task.Working || !strings.Contains(err.Error(), "cancel it first") {
		t.Fatalf("Delete of a running task: %v, want a NotTerminalError", err)
	}
	if got, err := e.Get(ctx, owner, running.ID); err != nil || got.Status != task.Working {
		t.Fatalf("the refused task: %+v, %v", got, err)
	}
	if _, err := e.Cancel(ctx, owner, running.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Delete(ctx, owner, running.ID); err != nil {
		t.Fatalf("Delete after Cancel: %v", err)
	}

	var deleted []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(trail.String()), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && r["event"] == audit.EventDeleted {
			deleted = append(deleted, r)
		}
	}
	if len(deleted) != 2 || deleted[0]["task"] != string(done.ID) || deleted[0]["tool"] != "report" ||
		deleted[0]["status"] != "completed" || deleted[0]["principal"] != "alice" || deleted[1]["task"] != string(running.ID) || deleted[1]["status"] != "cancelled" {
		t.Errorf("task.deleted records: %v", deleted)
	}
	if strings.Contains(trail.String(), "secret payload") {
		t.Error("the audit trail holds the result's payload")
	}
}
