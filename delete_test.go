package mcptask_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/wire"
)

// TestDelete2026 speaks tasks/delete on the 2026-07-28 wire as raw
// JSON-RPC: server/discover lists the extension, a running task is
// refused with CodeTaskNotTerminal (data.reason task_not_terminal), a
// finished task is acknowledged with exactly {"resultType":"complete"} and
// is unknown after (-32602, as tasks/get answers), and a request without
// the tasks extension is refused as other tasks/* methods are.
func TestDelete2026(t *testing.T) {
	g := &gates{}
	s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), g)
	c, without := clients(s)
	ctx := ctxT(t)

	checkDiscovered(t, ctx, c, wire.ExtensionTasksDelete)

	h, err := c.CallTool(ctx, "work", map[string]any{"millis": -1, "label": "forever"})
	if err != nil {
		t.Fatal(err)
	}
	var ack map[string]any
	err = c.Result(ctx, wire.MethodTasksDelete, map[string]any{"taskId": h.TaskID}, &ack)
	var we *wiretest.Error
	if !errors.As(err, &we) || we.Code != wire.CodeTaskNotTerminal {
		t.Fatalf("delete of a running task: %v, want code %d", err, wire.CodeTaskNotTerminal)
	}
	var data map[string]any
	if json.Unmarshal(we.Data, &data) != nil || data["reason"] != wire.ReasonNotTerminal || data["status"] != "working" {
		t.Errorf("refusal data = %s", we.Data)
	}
	if err := without.Result(ctx, wire.MethodTasksDelete, map[string]any{"taskId": h.TaskID}, &ack); err == nil {
		t.Error("delete without the tasks extension was served")
	}
	if err := c.Result(ctx, wire.MethodTasksCancel, map[string]any{"taskId": h.TaskID}, &ack); err != nil {
		t.Fatal(err)
	}
	ack = nil
	if err := c.Result(ctx, wire.MethodTasksDelete, map[string]any{"taskId": h.TaskID}, &ack); err != nil {
		t.Fatalf("delete of a cancelled task: %v", err)
	}
	for k := range ack {
		if k != "resultType" && k != "_meta" {
			t.Errorf("delete ack has %q: %v", k, ack)
		}
	}
	if ack["resultType"] != "complete" {
		t.Errorf("delete ack = %v", ack)
	}
	for _, m := range []string{wire.MethodTasksGet, wire.MethodTasksDelete} {
		if err := c.Result(ctx, m, map[string]any{"taskId": h.TaskID}, &ack); !errors.As(err, &we) || we.Code != -32602 {
			t.Errorf("%s of the deleted task: %v, want -32602", m, err)
		}
	}
}

// checkDiscovered checks that server/discover lists the extension ext.
func checkDiscovered(t *testing.T, ctx context.Context, c *wiretest.Client, ext string) {
	t.Helper()
	var disc struct {
		Capabilities struct {
			Extensions map[string]any `json:"extensions"`
		} `json:"capabilities"`
	}
	if err := c.Result(ctx, "server/discover", map[string]any{}, &disc); err != nil {
		t.Fatal(err)
	}
	if _, ok := disc.Capabilities.Extensions[ext]; !ok {
		t.Errorf("server/discover lacks %s: %v", ext, disc.Capabilities.Extensions)
	}
}
