package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// TestTaskLog: the lines work logs are buffered and written in batches
// (none before the flush interval with a long one), a write wakes the
// task's watchers, all are written before the task's outcome; lines beyond the log's caps while they wait are
// dropped oldest first and counted; ReadLog answers the owner only
// (another owner and an unknown task get a *NotFoundError); deleting the
// task deletes its log.
func TestTaskLog(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := engine.New(engine.Options{Store: st, Logger: slog.New(slog.DiscardHandler), SweepInterval: -1,
		LogLimits: store.LogLimits{MaxLines: 5}, LogFlushInterval: time.Hour, LogFlushLines: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	ctx := context.Background()
	owner := task.Owner("alice")

	logged, flush, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	tk, err := e.Start(ctx, engine.StartSpec{Owner: owner, Tool: "chatty"}, func(ctx context.Context) (json.RawMessage, error) {
		h := engine.FromContext(ctx)
		for i := 1; i <= 8; i++ {
			h.Log("stdout", fmt.Sprintf("line %d", i))
		}
		h.Log("stderr", "two\nlines\r\n")
		close(logged)
		<-flush
		h.FlushLog()
		<-release
		return json.RawMessage(`{"content":[]}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-logged
	// With an hour's flush interval and room for 1000 lines, nothing is
	// written while the work runs.
	if p, _, err := e.ReadLog(ctx, owner, tk.ID, 0, 100); err != nil || p.Last != 0 {
		t.Fatalf("the log before any flush: %+v, %v", p, err)
	}
	// A write of the log wakes the task's watchers (its status did not
	// change).
	watch := e.Watch(tk.ID)
	close(flush)
	<-watch
	if p, got, err := e.ReadLog(ctx, owner, tk.ID, 0, 100); err != nil || p.Last != 10 || got.Status != task.Working {
		t.Fatalf("the log once written, the task running: %+v, %+v, %v", p, got, err)
	}
	close(release)
	waitFor(t, "the task to complete", func() bool {
		got, err := e.Get(ctx, owner, tk.ID)
		return err == nil && got.Status == task.Completed
	})
	// Complete, then: the log was written first. 10 lines, 5 kept.
	p, got, err := e.ReadLog(ctx, owner, tk.ID, 0, 100)
	if err != nil || got.Status != task.Completed {
		t.Fatalf("ReadLog = %+v, %v", got, err)
	}
	var texts []string
	for _, l := range p.Lines {
		texts = append(texts, fmt.Sprintf("%d:%s:%s", l.Seq, l.Stream, l.Text))
	}
	want := "[6:stdout:line 6 7:stdout:line 7 8:stdout:line 8 9:stderr:two 10:stderr:lines]"
	if fmt.Sprint(texts) != want || p.Dropped != 5 || p.Last != 10 || p.More {
		t.Errorf("the log: %v dropped %d last %d more %v; want %s, 5 dropped", texts, p.Dropped, p.Last, p.More, want)
	}

	var nf *engine.NotFoundError
	if _, _, err := e.ReadLog(ctx, "mallory", tk.ID, 0, 100); !errors.As(err, &nf) || nf.Reason != audit.ReasonOtherOwner {
		t.Errorf("ReadLog by another owner: %v", err)
	}
	if _, _, err := e.ReadLog(ctx, owner, task.NewID(), 0, 100); !errors.As(err, &nf) || nf.Reason != audit.ReasonUnknown {
		t.Errorf("ReadLog of an unknown task: %v", err)
	}
	if _, err := e.Delete(ctx, owner, tk.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReadLog(ctx, tk.ID, 0, 100); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the deleted task's log: %v", err)
	}
}
