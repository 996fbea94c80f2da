package gateway_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/source/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServerEverything: a real upstream no one here wrote,
// @modelcontextprotocol/server-everything (scripts/interop.sh installs the
// pinned version and sets MCPTASK_TEST_SERVER_EVERYTHING to its entry
// point, MCPTASK_TEST_NODE to Node), behind the gateway, driven by the Go
// client on the 2026-07-28 wire (and on 2025-11-25): its long-running
// operation as a task with its progress as the status message, its
// elicitation and its sampling request answered through the task.
func TestServerEverything(t *testing.T) {
	entry, node := os.Getenv("MCPTASK_TEST_SERVER_EVERYTHING"), os.Getenv("MCPTASK_TEST_NODE")
	if entry == "" || node == "" {
		t.Skip("SKIPPED: needs @modelcontextprotocol/server-everything: set MCPTASK_TEST_SERVER_EVERYTHING (its dist/index.js) and MCPTASK_TEST_NODE (node); scripts/interop.sh does")
	}
	url := gatewayServer(t, gateway.Upstream{Name: "everything", Command: node, Args: []string{entry, "stdio"},
		Default: gateway.ToolPolicy{Support: mcptask.Optional}})
	for _, wire := range []string{client.Wire20260728, client.Wire20251125} {
		t.Run(wire, func(t *testing.T) { everythingFlows(t, url, wire) })
	}
}

func everythingFlows(t *testing.T, url, wire string) {
	ctx := t.Context()
	var asked []string
	var mu sync.Mutex
	var sampled []*mcp.CreateMessageParams
	var sampledTask []string
	c, err := client.Dial(ctx, url, &client.Options{ProtocolVersion: wire,
		Elicit: func(_ context.Context, _ string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, p.Message)
			mu.Unlock()
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
		// A host with a model: it answers the upstream's sampling request,
		// which reaches it as the task's input request.
		Sample: func(_ context.Context, taskID string, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			mu.Lock()
			sampled = append(sampled, p)
			sampledTask = append(sampledTask, taskID)
			mu.Unlock()
			return &mcp.CreateMessageResult{Model: "test-model-7", Role: "assistant", StopReason: "endTurn",
				Content: &mcp.TextContent{Text: "the sampled answer: 42"}}, nil
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
	if len(asked) != 1 {
		t.Errorf("the client was asked %d times, want once", len(asked))
	}
	mu.Unlock()

	// The upstream's sampling request: the task waits for input, the
	// client's Sample handler answers it, and the upstream's result shows
	// the answer came back to it.
	call, err = c.CallTool(ctx, "trigger-sampling-request", map[string]any{"prompt": "what is six times seven?", "maxTokens": 20})
	if err != nil || call.Task == nil {
		t.Fatalf("trigger-sampling-request: %+v, %v; want a task", call, err)
	}
	var statuses []string
	res, err = c.Wait(ctx, call.Task.ID, &client.WaitOptions{OnStatus: func(st *client.TaskStatus) {
		mu.Lock()
		statuses = append(statuses, st.Status)
		mu.Unlock()
	}})
	if err != nil || res.IsError {
		t.Fatalf("the sampling: %q, %v", text(res), err)
	}
	for _, want := range []string{"LLM sampling result", "the sampled answer: 42", "test-model-7"} {
		if !strings.Contains(text(res), want) {
			t.Errorf("the upstream's result lacks %q: the answer did not reach it\n%s", want, text(res))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sampled) != 1 || sampledTask[0] != call.Task.ID {
		t.Fatalf("the client was asked to sample %d times (tasks %v), want once for task %s", len(sampled), sampledTask, call.Task.ID)
	}
	p := sampled[0]
	if len(p.Messages) != 1 || p.MaxTokens != 20 || p.SystemPrompt != "You are a helpful test server." {
		t.Errorf("the sampling request reached the client altered: %+v", p)
	} else if tc, ok := p.Messages[0].Content.(*mcp.TextContent); !ok || !strings.Contains(tc.Text, "what is six times seven?") {
		t.Errorf("the sampling request's message: %#v", p.Messages[0].Content)
	}
	if !slices.Contains(statuses, "input_required") {
		t.Errorf("the task never showed input_required while the upstream sampled: %v", statuses)
	}
}
