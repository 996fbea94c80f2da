package mcptask_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/task"
)

// TestRunAgain: Server.RunAgain makes a finished task's call again as a
// new task of its owner (same tool and arguments); the same nonce gives
// the same new task; a task whose operation is not settled on the ledger
// (submitted, never confirmed) and a task still running are refused,
// saying why.
func TestRunAgain(t *testing.T) {
	s := startServerWith(t, filepath.Join(t.TempDir(), "tasks.db"), func(ts *mcptask.Server) {
		mcptask.AddTool(ts, &mcp.Tool{Name: "deploy"},
			func(ctx context.Context, _ *mcp.CallToolRequest, in sleepArgs) (*mcp.CallToolResult, any, error) {
				op, err := mcptask.FromContext(ctx).RecordOperation(ctx, mcptask.Operation{Object: "service/api", Effect: "deploy " + in.Label})
				if err != nil {
					return nil, nil, err
				}
				if err := op.Submitted(ctx, "receipt-"+in.Label); err != nil {
					return nil, nil, err
				}
				if in.Label == "confirmed" {
					if err := op.Confirmed(ctx, "applied"); err != nil {
						return nil, nil, err
					}
				}
				return text("deployed " + in.Label), nil, nil
			}, mcptask.ToolOptions{Support: mcptask.Optional})
	})
	c, _ := clients(s)
	ctx := ctxT(t)
	owner := task.AnonymousOwner("")
	run := func(label string) *task.Task {
		t.Helper()
		h, err := c.CallTool(ctx, "deploy", map[string]any{"label": label})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal); err != nil {
			t.Fatal(err)
		}
		tk, err := s.eng.Get(ctx, owner, task.ID(h.TaskID))
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	done := run("confirmed")
	again, err := s.ts.RunAgain(ctx, done, "nonce-1")
	if err != nil || again.ID == done.ID || again.Owner != done.Owner || again.Tool != "deploy" {
		t.Fatalf("RunAgain of a settled task: %+v, %v", again, err)
	}
	res, err := c.WaitFor(ctx, string(again.ID), wiretest.Terminal)
	if err != nil || !strings.Contains(string(res.Result)+string(res.Content), "deployed confirmed") {
		t.Fatalf("the re-run: %+v, %v", res, err)
	}
	if twice, err := s.ts.RunAgain(ctx, done, "nonce-1"); err != nil || twice.ID != again.ID {
		t.Errorf("RunAgain with the same nonce: %+v, %v; want task %s again", twice, err, again.ID)
	}
	var refused *mcptask.RunAgainError
	pending := run("submitted")
	if _, err := s.ts.RunAgain(ctx, pending, ""); !errors.As(err, &refused) || !strings.Contains(refused.Reason, "is submitted") {
		t.Errorf("RunAgain of a task whose operation is only submitted: %v; want a refusal saying so", err)
	}
	running := &task.Task{ID: task.NewID(), Owner: owner, Tool: "deploy", Status: task.Working}
	if _, err := s.ts.RunAgain(ctx, running, ""); !errors.As(err, &refused) || !strings.Contains(refused.Reason, "not ended") {
		t.Errorf("RunAgain of a running task: %v", err)
	}
}
