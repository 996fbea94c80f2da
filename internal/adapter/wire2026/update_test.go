package wire2026_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestUpdateFinishedTask: a tasks/update of a finished task (completed,
// failed, cancelled) is refused with -32602 naming the task's status (its
// answers can no longer reach anything: an acknowledgement would tell the
// client they were taken), and nothing is stored; a tasks/update of a
// waiting task with an unknown key is acknowledged and ignored, as
// SEP-2663 says a server SHOULD (and the official conformance suite
// checks), leaving the task waiting. The same with and without the fast
// lane, over loopback HTTP.
func TestUpdateFinishedTask(t *testing.T) {
	for _, fast := range []bool{false, true} {
		t.Run(fmt.Sprintf("fastLane=%v", fast), func(t *testing.T) {
			t.Parallel()
			s := servertest.Start(t, servertest.Options{
				Tasks: mcptask.Options{FastLane: fast},
				Register: func(ts *mcptask.Server) (func(), error) {
					mcptask.AddTool(ts, &mcp.Tool{Name: "ask"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
						tk := mcptask.FromContext(ctx)
						res, err := tk.Elicit(ctx, &mcp.ElicitParams{Message: "go on?", RequestedSchema: map[string]any{"type": "object"}})
						if err != nil {
							return nil, nil, err
						}
						return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action}}}, nil, nil
					}, mcptask.ToolOptions{Support: mcptask.Required})
					return nil, nil
				},
			})
			c := &wiretest.Client{URL: s.URL + "/mcp", Tasks: true}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			h, err := c.CallTool(ctx, "ask", nil)
			if err != nil {
				t.Fatal(err)
			}
			waiting, err := c.WaitFor(ctx, h.TaskID, func(tk *wiretest.Task) bool { return tk.Status == "input_required" })
			if err != nil {
				t.Fatal(err)
			}
			var key string
			for k := range waiting.InputRequests {
				key = k
			}
			update := func(responses map[string]any) *wiretest.Response {
				t.Helper()
				r, err := c.Call(ctx, "tasks/update", map[string]any{"taskId": h.TaskID, "inputResponses": responses}, nil)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			// An unknown key: acknowledged, ignored, the task still waits.
			if r := update(map[string]any{"no-such-key": map[string]any{"action": "accept"}}); r.Error != nil || string(r.Result) == "" {
				t.Fatalf("an unknown key: %+v %s, want the acknowledgement", r.Error, r.Result)
			}
			if tk, err := c.Get(ctx, h.TaskID); err != nil || tk.Status != "input_required" || tk.InputRequests[key] == nil {
				t.Fatalf("after an unknown key: %+v %v", tk, err)
			}
			// Cancelled while it waits: the answer comes too late.
			if err := c.Result(ctx, "tasks/cancel", map[string]any{"taskId": h.TaskID}, nil); err != nil {
				t.Fatal(err)
			}
			final, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal)
			if err != nil || final.Status != "cancelled" {
				t.Fatalf("after the cancel: %+v %v", final, err)
			}
			for _, responses := range []map[string]any{
				{key: map[string]any{"action": "accept"}},
				{"no-such-key": map[string]any{"action": "accept"}},
				{},
			} {
				r := update(responses)
				if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "cancelled") || !strings.Contains(r.Error.Message, h.TaskID) {
					t.Errorf("tasks/update %v of a cancelled task: %+v %s, want -32602 saying it is cancelled", responses, r.Error, r.Result)
				}
				var data struct {
					Status string `json:"status"`
				}
				if r.Error != nil && (json.Unmarshal(r.Error.Data, &data) != nil || data.Status != "cancelled") {
					t.Errorf("the refusal's data %s, want the status", r.Error.Data)
				}
			}
			after, err := s.Store.Get(ctx, task.ID(h.TaskID))
			if err != nil || len(after.InputResponses) != 0 {
				t.Errorf("the stored task after the refused updates: responses %v, %v", after.InputResponses, err)
			}
		})
	}
}
