package mcptask_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/wire"
)

// TestOperationOnTasksGet: tasks/get carries the task's latest domain
// operation under io.mcptask/operation, apart from its status, on both
// wires; a task that recorded none carries no such entry.
func TestOperationOnTasksGet(t *testing.T) {
	checkOp := func(t *testing.T, meta map[string]json.RawMessage, label string) {
		t.Helper()
		var op wire.Operation
		if err := json.Unmarshal(meta[wire.MetaOperation], &op); err != nil {
			t.Fatalf("_meta %v: %v", meta, err)
		}
		if op.State != "confirmed" || op.Receipt != "receipt-"+label || op.Effect != "deploy "+label || op.Key == "" || op.ReconciledAt != "" {
			t.Errorf("operation on tasks/get = %+v", op)
		}
	}
	t.Run("2026", func(t *testing.T) {
		s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), &gates{})
		c, _ := clients(s)
		ctx := ctxT(t)
		for _, tool := range []string{"records_op", "work"} {
			h, err := c.CallTool(ctx, tool, map[string]any{"label": "a"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal); err != nil {
				t.Fatal(err)
			}
			var res struct {
				Status string                     `json:"status"`
				Meta   map[string]json.RawMessage `json:"_meta"`
			}
			if err := c.Result(ctx, "tasks/get", map[string]any{"taskId": h.TaskID}, &res); err != nil {
				t.Fatal(err)
			}
			if res.Status != "completed" {
				t.Fatalf("%s: status %s", tool, res.Status)
			}
			if tool == "work" {
				if _, ok := res.Meta[wire.MetaOperation]; ok {
					t.Errorf("a task without operation carries %s", wire.MetaOperation)
				}
				continue
			}
			checkOp(t, res.Meta, "a")
		}
	})
	t.Run("2025", func(t *testing.T) {
		s := startRaw2025(t, noRequests)
		tk := s.callTask(t, "records_op", map[string]any{"label": "b"}, 60000)
		s.waitStatus(t, tk.TaskID, "completed")
		var res struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if err := s.call("tasks/get", map[string]any{"taskId": tk.TaskID}, &res); err != nil {
			t.Fatal(err)
		}
		checkOp(t, res.Meta, "b")
	})
}
