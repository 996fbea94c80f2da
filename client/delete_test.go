package client_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
)

// TestDelete deletes tasks through a real loopback server on both wires:
// a running task is refused (ErrNotTerminal) and stays; once cancelled,
// or once completed, it is deleted, dropped from the journal, and reads as
// unknown after; deleting it again, or an unknown ID, is ErrTaskNotFound.
// tasks/delete carries the task ID in Mcp-Name like every tasks/* request.
func TestDelete(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, serverOpts{})
			c := dial(t, s.URL, &client.Options{ProtocolVersion: wire, Journal: filepath.Join(t.TempDir(), "journal.json")})

			running := startTask(t, c, "counted", nil)
			if err := c.Delete(testCtx(t), running.ID); !errors.Is(err, client.ErrNotTerminal) {
				t.Fatalf("Delete of a running task: %v, want ErrNotTerminal", err)
			}
			if st, err := c.Get(testCtx(t), running.ID); err != nil || st.Status != "working" {
				t.Fatalf("the refused task: %+v, %v", st, err)
			}
			if _, err := c.Cancel(testCtx(t), running.ID); err != nil {
				t.Fatal(err)
			}
			if err := c.Delete(testCtx(t), running.ID); err != nil {
				t.Fatalf("Delete after Cancel: %v", err)
			}

			done := startTask(t, c, "long_computation", map[string]any{"n": 10, "steps": 1, "step_delay_ms": 0})
			waitFor(t, 20*time.Second, "the task to complete", func() bool {
				st, err := c.Get(testCtx(t), done.ID)
				return err == nil && st.Status == "completed"
			})
			if p, err := c.Pending(); err != nil || len(p) != 1 || p[0].TaskID != done.ID {
				t.Fatalf("journal before Delete: %+v, %v", p, err)
			}
			if err := c.Delete(testCtx(t), done.ID); err != nil {
				t.Fatalf("Delete of a completed task: %v", err)
			}
			if p, err := c.Pending(); err != nil || len(p) != 0 {
				t.Errorf("journal after Delete: %+v, %v", p, err)
			}
			for _, id := range []string{done.ID, running.ID} {
				if _, err := c.Get(testCtx(t), id); !errors.Is(err, client.ErrTaskNotFound) {
					t.Errorf("Get of deleted %s: %v", id, err)
				}
				if err := c.Delete(testCtx(t), id); !errors.Is(err, client.ErrTaskNotFound) {
					t.Errorf("second Delete of %s: %v", id, err)
				}
			}
			if err := c.Delete(testCtx(t), "abcdefghijklmnopqrstuvwxyz234567"); !errors.Is(err, client.ErrTaskNotFound) {
				t.Errorf("Delete of an unknown task: %v", err)
			}
			seen := false
			for _, r := range s.tasksRequests() {
				if r.Method == "tasks/delete" {
					seen = true
					if r.McpName != r.TaskID || r.Version != wire {
						t.Errorf("tasks/delete for %s: Mcp-Name %q, version %q", r.TaskID, r.McpName, r.Version)
					}
				}
			}
			if !seen {
				t.Error("the server saw no tasks/delete")
			}
		})
	}
}
