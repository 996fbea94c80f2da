package gateway_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServerEverything: a real upstream no one here wrote,
// @modelcontextprotocol/server-everything (scripts/interop.sh installs the
// pinned version and sets MCPTASK_TEST_SERVER_EVERYTHING to its entry
// point, MCPTASK_TEST_NODE to Node), behind the gateway, driven by the Go
// client on the 2026-07-28 wire: its long-running operation as a task with
// its progress as the status message, and its elicitation answered through
// the task.
func TestServerEverything(t *testing.T) {
	entry, node := os.Getenv("MCPTASK_TEST_SERVER_EVERYTHING"), os.Getenv("MCPTASK_TEST_NODE")
	if entry == "" || node == "" {
		t.Skip("SKIPPED: needs @modelcontextprotocol/server-everything: set MCPTASK_TEST_SERVER_EVERYTHING (its dist/index.js) and MCPTASK_TEST_NODE (node); scripts/interop.sh does")
	}
	url := gatewayServer(t, gateway.Upstream{Name: "everything", Command: node, Args: []string{entry, "stdio"},
		Default: gateway.ToolPolicy{Support: mcptask.Optional}})
	ctx := t.Context()
	var asked []string
	var mu sync.Mutex
	c, err := client.Dial(ctx, url, &client.Options{ProtocolVersion: client.Wire20260728,
		Elicit: func(_ context.Context, _ string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, p.Message)
			mu.Unlock()
			return &mcp.ElicitResult{Action: "decline"}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	call, err := c.CallTool(ctx, "trigger-long-running-operation", map[string]any{"duration": 2, "steps": 4})
	if err != nil || call.Task == nil {
		t.Fatalf("trigger-long-running-operation: %+v, %v; want a task", call, err)
	}
	var messages []string
	res, err := c.Wait(ctx, call.Task.ID, &client.WaitOptions{OnStatus: func(st *client.TaskStatus) {
		mu.Lock()
		messages = append(messages, st.StatusMessage)
		mu.Unlock()
	}})
	if err != nil || !strings.Contains(text(res), "Long running operation completed") {
		t.Fatalf("the long-running operation: %q, %v", text(res), err)
	}
	mu.Lock()
	seen := strings.Join(messages, " | ")
	mu.Unlock()
	if !strings.Contains(seen, "of 4") {
		t.Errorf("the upstream's progress is not among the status messages: %s", seen)
	}

	call, err = c.CallTool(ctx, "trigger-elicitation-request", map[string]any{})
	if err != nil || call.Task == nil {
		t.Fatalf("trigger-elicitation-request: %+v, %v; want a task", call, err)
	}
	res, err = c.Wait(ctx, call.Task.ID, nil)
	if err != nil || !strings.Contains(strings.ToLower(text(res)), "decline") {
		t.Fatalf("the elicitation: %q, %v", text(res), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 {
		t.Errorf("the client was asked %d times, want once", len(asked))
	}
}
