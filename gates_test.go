package mcptask_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
)

// approvalServer serves the test tools with "work" gated by an approval
// of bob or carol, requesters named by X-User.
func approvalServer(t *testing.T, a *mcptask.Approval, g *gates) *testServer {
	t.Helper()
	s := startServerOpts(t, filepath.Join(t.TempDir(), "tasks.db"), mcptask.Options{Owner: userOwner}, func(ts *mcptask.Server) {
		registerTestTools(ts, g)
		if err := ts.SetToolRollout("work", "", a); err != nil {
			t.Fatal(err)
		}
	})
	return s
}

// TestApprovalGate (issue 31): a call of an approval-gated tool is
// answered at once with a task that stays working, its status message
// and _meta (io.mcptask/approval) naming the approvers and the expiry,
// and its work does not run; the requester may not approve its own call,
// nor may anyone not listed; an approver's approval starts the work,
// which completes; approving again answers with the task as it is.
func TestApprovalGate(t *testing.T) {
	g := &gates{}
	s := approvalServer(t, &mcptask.Approval{Approvers: []string{"bob", "alice"}, Reason: "it deploys", Expires: time.Hour}, g)
	alice := userClient(s, "alice")
	ctx := context.Background()
	r, err := alice.Call(ctx, "tools/call", map[string]any{"name": "work", "arguments": map[string]any{"label": "x"}, "_meta": alice.Meta()}, nil)
	if err != nil || r.Error != nil {
		t.Fatalf("tools/call: %+v %v", r, err)
	}
	var created struct {
		TaskID        string         `json:"taskId"`
		Status        string         `json:"status"`
		StatusMessage string         `json:"statusMessage"`
		Meta          map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(r.Result, &created); err != nil {
		t.Fatal(err)
	}
	ap, _ := created.Meta["io.mcptask/approval"].(map[string]any)
	if created.Status != "working" || !strings.HasPrefix(created.StatusMessage, "waiting for approval by bob or alice (it deploys); expires ") ||
		ap["state"] != "pending" || ap["expiresAt"] == nil || ap["reason"] != "it deploys" {
		t.Fatalf("the created task: %s", r.Result)
	}
	id := task.ID(created.TaskID)
	tk, err := alice.Get(ctx, created.TaskID)
	if err != nil || !strings.Contains(tk.StatusMessage, "waiting for approval") {
		t.Fatalf("tasks/get: %+v %v", tk, err)
	}
	var ge *mcptask.GateError
	if _, err := s.ts.Decide(ctx, id, true, "alice", "mine"); !errors.As(err, &ge) || !strings.Contains(ge.Reason, "may not approve") {
		t.Fatalf("self-approval: %v", err)
	}
	if _, err := s.ts.Decide(ctx, id, true, "mallory", ""); !errors.As(err, &ge) || !strings.Contains(ge.Reason, "not an approver") {
		t.Fatalf("a stranger's approval: %v", err)
	}
	held, err := s.ts.HeldTasks(ctx, "approval")
	if err != nil || len(held) != 1 || held[0].TaskID != created.TaskID || string(held[0].Arguments) != `{"label":"x"}` || held[0].ExpiresAt.IsZero() {
		t.Fatalf("HeldTasks: %+v %v", held, err)
	}
	got, err := s.ts.Decide(ctx, id, true, "bob", "ship it")
	if err != nil || got.StatusMessage != "approved by bob: ship it" {
		t.Fatalf("approval: %+v %v", got, err)
	}
	waitUntil(t, func() bool {
		tk, err := alice.Get(ctx, created.TaskID)
		return err == nil && tk.Status == "completed"
	})
	if again, err := s.ts.Decide(ctx, id, true, "bob", ""); err != nil || again.Status != task.Completed {
		t.Fatalf("approving again: %+v %v", again, err)
	}
	if _, err := s.ts.Decide(ctx, id, false, "bob", ""); !errors.As(err, &ge) {
		t.Fatalf("denying an approved task: %v", err)
	}
	if held, _ := s.ts.HeldTasks(ctx, ""); len(held) != 0 {
		t.Fatalf("still held: %+v", held)
	}
}

// TestApprovalDenyAndExpiry: a denial ends the task failed (-32016,
// data naming who and why) without running its work, and denying again
// is idempotent; an approval past its expiry ends failed "expired".
func TestApprovalDenyAndExpiry(t *testing.T) {
	g := &gates{}
	s := approvalServer(t, &mcptask.Approval{Approvers: []string{"*"}, Expires: time.Millisecond, SelfApproval: true}, g)
	alice := userClient(s, "alice")
	ctx := context.Background()
	first, err := alice.CallTool(ctx, "work", map[string]any{"label": "deny"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ts.Decide(ctx, task.ID(first.TaskID), false, "carol", "not now")
	if err != nil || got.Status != task.Failed || got.Error == nil || got.Error.Code != -32016 ||
		!strings.Contains(string(got.Error.Data), `"by":"carol"`) || !strings.Contains(string(got.Error.Data), `"detail":"not now"`) {
		t.Fatalf("deny: %+v %v", got, err)
	}
	if again, err := s.ts.Decide(ctx, task.ID(first.TaskID), false, "dave", "again"); err != nil || again.StatusMessage != "denied by carol: not now" {
		t.Fatalf("denying again: %+v %v", again, err)
	}
	second, err := alice.CallTool(ctx, "work", map[string]any{"label": "late"})
	if err != nil {
		t.Fatal(err)
	}
	// (Swept as if a second had passed: the store keeps creation times
	// in milliseconds, and the task may be younger than one.)
	mcptask.ExpireApprovals(s.ts, time.Second)
	tk, err := alice.Get(ctx, second.TaskID)
	if err != nil || tk.Status != "failed" || !strings.Contains(tk.StatusMessage, "the approval expired") {
		t.Fatalf("the expired approval: %+v %v", tk, err)
	}
}

// TestApprovalsOverMCP: an approver decides over MCP
// (io.mcptask/approvals/list and /decide): it lists only the approvals
// it may decide; a requester who is no approver is answered as for an
// unknown approval, and an anonymous one is refused; the approver's
// approval starts the work; deciding the other way afterwards is
// CodeDecided. The servers advertise the extension.
func TestApprovalsOverMCP(t *testing.T) {
	g := &gates{}
	s := approvalServer(t, &mcptask.Approval{Approvers: []string{"carol", "scope:release"}}, g)
	ctx := context.Background()
	alice, carol, dave := userClient(s, "alice"), userClient(s, "carol"), userClient(s, "dave")
	tk, err := alice.CallTool(ctx, "work", map[string]any{"label": "over-mcp"})
	if err != nil {
		t.Fatal(err)
	}
	var list wire.ApprovalsListResult
	if err := carol.Result(ctx, wire.MethodApprovalsList, map[string]any{}, &list); err != nil || len(list.Approvals) != 1 ||
		list.Approvals[0].TaskID != tk.TaskID || list.Approvals[0].Requester != "alice" || string(list.Approvals[0].Arguments) != `{"label":"over-mcp"}` {
		t.Fatalf("carol's approvals: %+v %v", list, err)
	}
	if err := dave.Result(ctx, wire.MethodApprovalsList, map[string]any{}, &list); err != nil || len(list.Approvals) != 0 {
		t.Fatalf("dave's approvals: %+v %v; want none", list, err)
	}
	r, err := dave.Call(ctx, wire.MethodApprovalsDecide, map[string]any{"taskId": tk.TaskID, "approve": true}, nil)
	if err != nil || r.Error == nil || r.Error.Code != -32602 {
		t.Fatalf("dave deciding: %+v %v; want -32602", r, err)
	}
	anon := &wiretest.Client{URL: s.url, Tasks: true}
	if r, err := anon.Call(ctx, wire.MethodApprovalsDecide, map[string]any{"taskId": tk.TaskID, "approve": true}, nil); err != nil || r.Error == nil || r.Error.Code != -32012 {
		t.Fatalf("an anonymous decision: %+v %v; want -32012", r, err)
	}
	var res wire.DecideResult
	if err := carol.Result(ctx, wire.MethodApprovalsDecide, map[string]any{"taskId": tk.TaskID, "approve": true, "reason": "lgtm"}, &res); err != nil || res.StatusMessage != "approved by carol: lgtm" {
		t.Fatalf("carol approving: %+v %v", res, err)
	}
	waitUntil(t, func() bool {
		got, err := alice.Get(ctx, tk.TaskID)
		return err == nil && got.Status == "completed"
	})
	if r, err := carol.Call(ctx, wire.MethodApprovalsDecide, map[string]any{"taskId": tk.TaskID, "approve": false}, nil); err != nil || r.Error == nil || r.Error.Code != wire.CodeDecided {
		t.Fatalf("denying an approved task: %+v %v; want CodeDecided", r, err)
	}
	var disc struct {
		Capabilities struct {
			Extensions map[string]any `json:"extensions"`
		} `json:"capabilities"`
	}
	if err := carol.Result(ctx, "server/discover", map[string]any{}, &disc); err != nil || disc.Capabilities.Extensions[wire.ExtensionApprovals] == nil {
		t.Fatalf("server/discover: %+v %v; want the approvals extension", disc, err)
	}
}
