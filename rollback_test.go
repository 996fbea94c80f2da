package mcptask_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRollback (issue 31): a rollback of a tool switches its new
// task-augmented calls to its declared fallback (sync here) at once; the
// tasks in flight go on; every unsettled operation of theirs is
// reconciled with the tool's Reconcile (the work still runs, so only the
// confirmation is recorded: the others stay in flight, for the work to
// settle), and the report names the tasks left running and the
// operations confirmed and in flight; a second rollback reports the same
// state; the undo serves tasks again.
func TestRollback(t *testing.T) {
	g := &gates{}
	receipts := map[string]task.OpState{"receipt-a": task.OpConfirmed, "receipt-b": task.OpRejected}
	s := startServerOpts(t, filepath.Join(t.TempDir(), "tasks.db"), mcptask.Options{}, func(ts *mcptask.Server) {
		mcptask.AddTool(ts, &mcp.Tool{Name: "deployer", Description: "deploys"},
			func(ctx context.Context, _ *mcp.CallToolRequest, in sleepArgs) (*mcp.CallToolResult, any, error) {
				tk := mcptask.FromContext(ctx)
				if tk == nil {
					return text("deployed " + in.Label + " without a task"), nil, nil
				}
				op, err := tk.RecordOperation(ctx, mcptask.Operation{Object: "service/" + in.Label, Effect: "deploy"})
				if err != nil {
					return nil, nil, err
				}
				if err := op.Submitted(ctx, "receipt-"+in.Label); err != nil {
					return nil, nil, err
				}
				select {
				case <-g.get(in.Label):
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
				return text("deployed " + in.Label), nil, nil
			}, mcptask.ToolOptions{Support: mcptask.Optional, Fallback: mcptask.DrainSync,
				Reconcile: func(_ context.Context, op task.Operation) (task.OpState, string, error) {
					if st, ok := receipts[op.Receipt]; ok {
						return st, "the deploy log says so", nil
					}
					return "", "", errors.New("the deploy log is unreachable")
				}})
	})
	c, _ := clients(s)
	ctx := context.Background()
	ids := map[string]string{}
	for _, label := range []string{"a", "b", "c"} {
		tk, err := c.CallTool(ctx, "deployer", map[string]any{"label": label})
		if err != nil {
			t.Fatal(err)
		}
		ids[label] = tk.TaskID
		waitUntil(t, func() bool {
			op, err := s.eng.LatestOperation(ctx, task.ID(tk.TaskID))
			return err == nil && op != nil && op.State == task.OpSubmitted
		})
	}
	rep, err := s.ts.Rollback(ctx, "deployer", "test", "", "bad release")
	if err != nil {
		t.Fatal(err)
	}
	running := []string{ids["a"], ids["b"], ids["c"]}
	slices.Sort(running)
	if rep.Fallback != mcptask.DrainSync || !slices.Equal(rep.Running, running) || len(rep.Confirmed) != 1 || len(rep.Rejected) != 0 || len(rep.Unknown) != 0 || len(rep.InFlight) != 2 || rep.Reason != "bad release" || rep.By != "test" {
		t.Fatalf("the report: %+v", rep)
	}
	again, err := s.ts.Rollback(ctx, "deployer", "test", "", "bad release")
	if err != nil || !slices.Equal(again.Running, rep.Running) || !slices.Equal(again.Confirmed, rep.Confirmed) ||
		!slices.Equal(again.InFlight, rep.InFlight) || !slices.Equal(again.Unknown, rep.Unknown) {
		t.Fatalf("a second rollback: %+v; want the same state as %+v", again, rep)
	}
	if got := s.ts.Fleet().Rollbacks["deployer"]; !slices.Equal(got.Running, rep.Running) {
		t.Fatalf("the stored report: %+v", got)
	}
	// New calls: the synchronous fallback.
	close(g.get("d"))
	r, err := c.Call(ctx, "tools/call", map[string]any{"name": "deployer", "arguments": map[string]any{"label": "d"}, "_meta": c.Meta()}, nil)
	if err != nil || r.Error != nil || !containsText(r.Result, "deployed d without a task") {
		t.Fatalf("a call after the rollback: %+v %v; want a synchronous result", r, err)
	}
	// The tasks in flight go on and end.
	for _, label := range []string{"a", "b", "c"} {
		if got, err := c.Get(ctx, ids[label]); err != nil || got.Status != "working" {
			t.Fatalf("task %s after the rollback: %+v %v", label, got, err)
		}
		close(g.get(label))
	}
	waitUntil(t, func() bool {
		got, err := c.Get(ctx, ids["a"])
		return err == nil && got.Status == "completed"
	})
	if err := s.ts.UndoRollback(ctx, "deployer", "test", "", "fixed"); err != nil {
		t.Fatal(err)
	}
	close(g.get("e"))
	if tk, err := c.CallTool(ctx, "deployer", map[string]any{"label": "e"}); err != nil || tk.TaskID == "" {
		t.Fatalf("a call after the undo: %+v %v; want a task", tk, err)
	}
}

func containsText(raw []byte, s string) bool { return strings.Contains(string(raw), s) }

// TestRetryUnderSwitches: a retry of a call with its idempotency key
// finds its task although the tool was drained since; the same key with
// another call, or for another tool, is decided by the switches (no way
// around a drain with an old key).
func TestRetryUnderSwitches(t *testing.T) {
	g := &gates{}
	s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), g)
	c, _ := clients(s)
	ctx := context.Background()
	call := func(tool, label, key string) (string, *jsonrpcError) {
		meta := c.Meta()
		meta[wire.MetaIdempotencyKey] = key
		r, err := c.Call(ctx, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{"label": label, "millis": -1}, "_meta": meta}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Error != nil {
			return "", &jsonrpcError{Code: r.Error.Code, Data: string(r.Error.Data)}
		}
		var res struct {
			TaskID string `json:"taskId"`
		}
		_ = json.Unmarshal(r.Result, &res)
		return res.TaskID, nil
	}
	first, jerr := call("work", "a", "key-1")
	if jerr != nil || first == "" {
		t.Fatalf("the first call: %v", jerr)
	}
	if err := s.ts.SetDrain(ctx, mcptask.DrainState{Tools: []string{"work"}}, "test", ""); err != nil {
		t.Fatal(err)
	}
	if again, jerr := call("work", "a", "key-1"); jerr != nil || again != first {
		t.Fatalf("the retry while drained: %q %v; want the task %s", again, jerr, first)
	}
	if _, jerr := call("work", "b", "key-1"); jerr == nil || jerr.Code != -32010 || !strings.Contains(jerr.Data, "draining") {
		t.Fatalf("the key with another call while drained: %+v; want refused by the drain", jerr)
	}
	if _, jerr := call("work", "c", "key-2"); jerr == nil || jerr.Code != -32010 {
		t.Fatalf("a new call while drained: %+v; want refused", jerr)
	}
	close(g.get("a"))
}

type jsonrpcError struct {
	Code int64
	Data string
}

// TestApprovalFailsClosed: an approval on a tool declared with no task
// support makes it Required: a plain call is refused, a task waits.
func TestApprovalFailsClosed(t *testing.T) {
	s := startServerOpts(t, filepath.Join(t.TempDir(), "tasks.db"), mcptask.Options{}, func(ts *mcptask.Server) {
		mcptask.AddTool(ts, &mcp.Tool{Name: "deploy", Description: "deploys"},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return text("deployed"), nil, nil
			}, mcptask.ToolOptions{Approval: &mcptask.Approval{Approvers: []string{"bob"}}})
	})
	withTasks, without := clients(s)
	ctx := context.Background()
	r, err := without.Call(ctx, "tools/call", map[string]any{"name": "deploy", "arguments": map[string]any{}, "_meta": without.Meta()}, nil)
	if err != nil || r.Error == nil || strings.Contains(string(r.Result), "deployed") {
		t.Fatalf("a plain call of an approval-gated tool: %+v %v; want refused", r, err)
	}
	tk, err := withTasks.CallTool(ctx, "deploy", map[string]any{})
	if err != nil || tk.Status != "working" || !strings.Contains(tk.StatusMessage, "waiting for approval by bob") {
		t.Fatalf("a task call: %+v %v; want it waiting", tk, err)
	}
}
