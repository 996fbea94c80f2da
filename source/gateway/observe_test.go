package gateway_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/upstreamtest"
	"github.com/mcptask/mcptask/source/gateway"
)

// TestObserveUpstreamTask (issue 31, shadow mode): a tool exported with
// Observe watches a task the upstream already runs, by its taskId, and
// projects it (status message, outcome, result) without ever calling the
// upstream tool: the upstream sees no tools/call of ours and no second
// run; a cancel of ours stops the watch and sends no tasks/cancel
// upstream; a call without taskId is refused and sends nothing.
func TestObserveUpstreamTask(t *testing.T) {
	up := upstreamtest.New(t)
	ctx := t.Context()
	// The existing system starts its work itself.
	direct, err := client.Dial(ctx, up.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	work, err := direct.CallTool(ctx, "work", map[string]any{"label": "nightly"})
	if err != nil || work.Task == nil {
		t.Fatalf("the upstream's own task: %+v %v", work, err)
	}
	block, err := direct.CallTool(ctx, "block", map[string]any{})
	if err != nil || block.Task == nil {
		t.Fatalf("the upstream's own block task: %+v %v", block, err)
	}
	calls := len(up.Traceparents("tools/call"))

	db := filepath.Join(t.TempDir(), "gw.db")
	url, _ := gatewayOn(t, db, gateway.Upstream{Name: "up", URL: up.URL, Policies: map[string]gateway.ToolPolicy{
		"work":  {Observe: true},
		"block": {Observe: true},
	}})
	c, err := client.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		schema, _ := json.Marshal(tl.InputSchema)
		if tl.Name == "work" && (!strings.Contains(string(schema), `"required":["taskId"]`) || tl.TaskSupport != "required") {
			t.Errorf("the shadow tool: %s, task support %q; want taskId required, tasks only", tl.InputSchema, tl.TaskSupport)
		}
	}
	if bad, err := c.CallTool(ctx, "work", map[string]any{"label": "x"}); err == nil && (bad.Task != nil || bad.Result == nil || !bad.Result.IsError) {
		t.Errorf("a shadow call without taskId: %+v; want refused", bad)
	}

	shadow, err := c.CallTool(ctx, "work", map[string]any{"taskId": work.Task.ID})
	if err != nil || shadow.Task == nil {
		t.Fatalf("the shadow call: %+v %v", shadow, err)
	}
	waitStatus(t, c, shadow.Task.ID, "watching", func(st *client.TaskStatus) bool {
		return strings.Contains(st.StatusMessage, "watching the task "+work.Task.ID)
	})
	up.Release()
	res, err := c.Wait(ctx, shadow.Task.ID, nil)
	if err != nil || text(res) != "nightly done, run 1" {
		t.Fatalf("the shadow's outcome: %q %v", text(res), err)
	}
	if theirs, err := direct.Wait(ctx, work.Task.ID, nil); err != nil || text(theirs) != text(res) {
		t.Fatalf("the upstream's own outcome: %q %v; want the projection's", text(theirs), err)
	}

	watch, err := c.CallTool(ctx, "block", map[string]any{"taskId": block.Task.ID})
	if err != nil || watch.Task == nil {
		t.Fatalf("the shadow of block: %+v %v", watch, err)
	}
	waitStatus(t, c, watch.Task.ID, "watching", func(st *client.TaskStatus) bool { return strings.Contains(st.StatusMessage, "watching") })
	if _, err := c.Cancel(ctx, watch.Task.ID); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, watch.Task.ID, "cancelled", func(st *client.TaskStatus) bool { return st.Status == "cancelled" })
	if st, err := direct.Get(ctx, block.Task.ID); err != nil || st.Status != "working" {
		t.Fatalf("the upstream's block task after our cancel: %+v %v; want it still working", st, err)
	}
	if n := len(up.Traceparents("tools/call")); n != calls {
		t.Fatalf("the upstream got %d tools/call from the gateway; want none", n-calls)
	}
	if n := len(up.Traceparents("tasks/cancel")); n != 0 {
		t.Fatalf("the upstream got %d tasks/cancel; want none", n)
	}
	if n := up.Runs.Load(); n != 1 {
		t.Fatalf("the upstream's work ran %d times; want 1 (its own)", n)
	}
}
