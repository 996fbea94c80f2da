package mcptask_test

import (
	"context"
	"testing"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestFastLane2025DuplicateOfFirstCall: the first call of a session after
// its initialize (here a tasks/result waiting for its task, sent before
// notifications/initialized, which the go-sdk allows) is on its way to
// the go-sdk before the lane has a record of the session (the middleware
// records the session during the call). A tasks/get with the same ID is
// refused as a duplicate in-flight ID, as the go-sdk refuses it: calls are
// counted by session ID, recorded or not.
func TestFastLane2025DuplicateOfFirstCall(t *testing.T) {
	g := &gates{}
	p := startLanePairSessions(t, g, mcptask.Options{}, mcp.StreamableHTTPOptions{}, false, laneSessionID)
	ctx := ctxT(t)
	setup := &wiretest.Session{URL: p.setup}
	if _, err := setup.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	taskID := startTask25(t, ctx, setup, "ask", nil)
	waitAnswer25(t, ctx, setup, taskID, `"input_required"`)
	answers := map[string]string{}
	for _, url := range []string{p.fast, p.slow} {
		s := &wiretest.Session{URL: url}
		// initialize alone (ID 1), no notifications/initialized.
		if _, err := s.Call(ctx, "initialize", map[string]any{
			"protocolVersion": "2025-11-25",
			"capabilities":    map[string]any{"elicitation": map[string]any{}},
			"clientInfo":      map[string]any{"name": "wiretest", "version": "1"},
		}); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		msgs, err := s.CallStream(rctx, "tasks/result", map[string]any{"taskId": taskID}) // ID 2
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := <-msgs; !ok || m.Method != "elicitation/create" {
			t.Fatalf("tasks/result: %+v, want the question", m)
		}
		dup := laneRequest{name: "duplicate", session: laneSessionID,
			body: `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"` + taskID + `"}}`}
		answers[url] = dup.send(t, url)
		cancel()
		for range msgs {
		}
	}
	if answers[p.fast] != answers[p.slow] {
		t.Errorf("the fast lane answered\n%s\n\nthe go-sdk answered\n%s", answers[p.fast], answers[p.slow])
	}
}
