package mcptask_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestOperationsList: io.mcptask/operations/list answers the requester's
// operations, recorded by a tool's work, newest first, in the wire's
// Operation shape with their task and tool, filtered by state and task, on
// both wires; it is advertised; an invalid state is -32602.
func TestOperationsList(t *testing.T) {
	check := func(t *testing.T, list func(params map[string]any) (wire.ListOperationsResult, error), ids []string) {
		t.Helper()
		res, err := list(map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Operations) != len(ids) || res.NextCursor != "" {
			t.Fatalf("operations = %+v, want %d", res, len(ids))
		}
		for i, op := range res.Operations {
			want := ids[len(ids)-1-i] // newest first
			if op.TaskID != want || op.Tool != "records_op" || op.State != "confirmed" || op.Key == "" ||
				op.Object != "service/api" || op.Detail != "applied" || op.CreatedAt == "" || op.UpdatedAt == "" || op.Receipt == "" {
				t.Errorf("operation %d = %+v, want task %s", i, op, want)
			}
		}
		if res, err := list(map[string]any{"state": "confirmed", "taskId": ids[0]}); err != nil || len(res.Operations) != 1 || res.Operations[0].TaskID != ids[0] {
			t.Errorf("confirmed of %s: %+v, %v", ids[0], res, err)
		}
		if res, err := list(map[string]any{"state": "unknown"}); err != nil || len(res.Operations) != 0 {
			t.Errorf("unknown: %+v, %v", res, err)
		}
		_, err = list(map[string]any{"state": "lost"})
		var we *wiretest.Error
		var je *jsonrpc.Error
		switch {
		case err == nil:
			t.Fatal("an invalid state was served")
		case errors.As(err, &we) && we.Code != -32602, errors.As(err, &je) && je.Code != -32602:
			t.Errorf("invalid state: %v, want -32602", err)
		}
	}
	t.Run("2026", func(t *testing.T) {
		s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), &gates{})
		c, without := clients(s)
		ctx := ctxT(t)
		checkDiscovered(t, ctx, c, wire.ExtensionOperations)
		var ids []string
		for _, label := range []string{"a", "b"} {
			h, err := c.CallTool(ctx, "records_op", map[string]any{"label": label})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, h.TaskID)
		}
		check(t, func(p map[string]any) (wire.ListOperationsResult, error) {
			var res wire.ListOperationsResult
			err := c.Result(ctx, wire.MethodOperationsList, p, &res)
			return res, err
		}, ids)
		var res wire.ListOperationsResult
		if err := without.Result(ctx, wire.MethodOperationsList, map[string]any{}, &res); err == nil {
			t.Error("operations/list without the tasks extension was served")
		}
	})
	t.Run("2025", func(t *testing.T) {
		s := startRaw2025(t, noRequests)
		var ids []string
		for _, label := range []string{"c", "d"} {
			tk := s.callTask(t, "records_op", map[string]any{"label": label}, 60000)
			s.waitStatus(t, tk.TaskID, "completed")
			ids = append(ids, tk.TaskID)
		}
		check(t, func(p map[string]any) (wire.ListOperationsResult, error) {
			var res wire.ListOperationsResult
			err := s.call(wire.MethodOperationsList, p, &res)
			return res, err
		}, ids)
	})
}
