package mcptask_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
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

// TestRefuseUnknownEffects: a tools/call asking for it
// (io.mcptask/refuseUnknownEffects) is refused with -32018, listing the
// requester's operation of the tool left unknown, and runs nothing; the
// retry of the call that created the task (its idempotency key) still
// finds its task; a call without the flag is not checked.
func TestRefuseUnknownEffects(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), &gates{})
	c, _ := clients(s)
	ctx := ctxT(t)
	call := func(key string, refuse bool) (*wiretest.Response, error) {
		meta := c.Meta()
		if key != "" {
			meta["io.mcptask/idempotency-key"] = key
		}
		if refuse {
			meta["io.mcptask/refuseUnknownEffects"] = true
		}
		return c.Call(ctx, "tools/call", map[string]any{"name": "records_op", "arguments": map[string]any{"label": "v1"}, "_meta": meta}, nil)
	}
	r, err := call("first", true)
	if err != nil || r.Error != nil {
		t.Fatalf("the first call: %+v, %v", r, err)
	}
	var h wiretest.Task
	if err := json.Unmarshal(r.Result, &h); err != nil || h.TaskID == "" {
		t.Fatalf("the first call's answer %s: %v", r.Result, err)
	}
	if _, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal); err != nil {
		t.Fatal(err)
	}
	ops, _, err := s.eng.Store().Operations(ctx, store.OperationQuery{TaskID: task.ID(h.TaskID)})
	if err != nil || len(ops) != 1 {
		t.Fatalf("operations %v, %v", ops, err)
	}
	// As if the work had died between its submission and the answer, and
	// reconciliation could not tell (confirmed is final: set directly).
	if _, err := s.eng.Store().UpdateOperation(ctx, ops[0].Key, func(o *task.Operation) error {
		o.State, o.Detail, o.UpdatedAt = task.OpUnknown, "no answer", time.Now()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r, err = call("second", true)
	if err != nil || r.Error == nil || r.Error.Code != -32018 || !strings.Contains(string(r.Error.Data), ops[0].Key) || !strings.Contains(string(r.Error.Data), `"tool":"records_op"`) {
		t.Fatalf("a call while the effect is unknown: %+v, %v; want -32018 listing the operation", r, err)
	}
	if r, err = call("first", true); err != nil || r.Error != nil || !strings.Contains(string(r.Result), h.TaskID) {
		t.Fatalf("the retry of the first call: %+v, %v; want its task", r, err)
	}
	if r, err = call("third", false); err != nil || r.Error != nil {
		t.Fatalf("a call that does not ask: %+v, %v", r, err)
	}
	tasks, _, err := s.eng.Store().Browse(ctx, store.BrowseQuery{Tool: "records_op"})
	if err != nil || len(tasks) != 2 {
		t.Fatalf("records_op's tasks: %d, %v; want the first and the unchecked third", len(tasks), err)
	}
}
