package client_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// treeServer serves "parent", whose work spawns "child-tool" as its step
// "build" and waits for it; the child holds until release is closed.
func treeServer(t *testing.T, release <-chan struct{}) *servertest.Server {
	t.Helper()
	return servertest.Start(t, servertest.Options{Register: func(ts *mcptask.Server) (func(), error) {
		mcptask.AddTool(ts, &mcp.Tool{Name: "child-tool", Description: "holds until the test releases it"},
			func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				_ = mcptask.FromContext(ctx).SetStatusMessage(ctx, "building")
				select {
				case <-release:
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "built"}}}, nil, nil
			}, mcptask.ToolOptions{Support: mcptask.Optional})
		mcptask.AddTool(ts, &mcp.Tool{Name: "parent", Description: "runs child-tool as its step build"},
			func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				child, err := mcptask.FromContext(ctx).Spawn(ctx, "child-tool", map[string]any{}, &mcptask.SpawnOptions{Step: "build"})
				if err != nil {
					return nil, nil, err
				}
				res, err := child.Wait(ctx)
				if err != nil {
					return nil, nil, err
				}
				return res, nil, nil
			}, mcptask.ToolOptions{Support: mcptask.Optional})
		return nil, nil
	}})
}

// TestParentAndChildren reads a nested task on both wires: the parent's
// Children list its child (step, tool, status, message), the child's
// Parent names the parent, and Wait reports the child's progress.
func TestParentAndChildren(t *testing.T) {
	for _, w := range wires {
		t.Run(w, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			s := treeServer(t, release)
			// Polled: the tree is on tasks/get (2026-07-28's task
			// notifications do not carry it).
			c := dial(t, s.URL, &client.Options{ProtocolVersion: w, DisablePush: true})
			ctx := testCtx(t)
			p := startTask(t, c, "parent", nil)
			if p.Parent != "" || p.Children != nil {
				t.Errorf("the new parent: Parent %q, Children %+v", p.Parent, p.Children)
			}

			// The child shows up under its parent, working on its step.
			var kids []wire.Child
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				st, err := c.Get(ctx, p.ID)
				if err != nil {
					t.Fatal(err)
				}
				if st.Parent != "" {
					t.Errorf("the parent has a parent: %q", st.Parent)
				}
				if len(st.Children) == 1 && st.Children[0].StatusMessage == "building" {
					kids = st.Children
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no working child under the parent: %+v", st.Children)
				}
			}
			k := kids[0]
			if k.TaskID == "" || k.TaskID == p.ID || k.Step != "build" || k.Tool != "child-tool" || k.Status != "working" {
				t.Fatalf("child: %+v", k)
			}
			cs, err := c.Get(ctx, k.TaskID)
			if err != nil {
				t.Fatalf("Get of the child: %v", err)
			}
			if cs.Parent != p.ID || cs.Children != nil || cs.Status != "working" || cs.StatusMessage != "building" {
				t.Fatalf("the child: Parent %q (want %q), Children %+v, %s %q", cs.Parent, p.ID, cs.Children, cs.Status, cs.StatusMessage)
			}

			// Wait reports the children as they change, and the parent
			// ends with its child's result.
			var (
				seen [][]wire.Child
				once bool
			)
			res, err := c.Wait(ctx, p.ID, &client.WaitOptions{OnStatus: func(st *client.TaskStatus) {
				seen = append(seen, st.Children)
				if !once {
					once = true
					close(release)
				}
			}})
			if err != nil || text(res) != "built" {
				t.Fatalf("Wait: %q %v", text(res), err)
			}
			if len(seen) == 0 || !slices.Equal(seen[0], kids) {
				t.Errorf("Wait's first status: children %+v, want %+v", seen, kids)
			}
			end, err := c.Get(ctx, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := wire.Child{TaskID: k.TaskID, Step: "build", Tool: "child-tool", Status: "completed"}
			if len(end.Children) != 1 || end.Children[0].TaskID != want.TaskID || end.Children[0].Step != want.Step ||
				end.Children[0].Tool != want.Tool || end.Children[0].Status != want.Status {
				t.Errorf("the ended parent's children: %+v, want %+v", end.Children, want)
			}
			if cs, err := c.Get(ctx, k.TaskID); err != nil || cs.Parent != p.ID || cs.Status != "completed" {
				t.Errorf("the ended child: %+v %v", cs, err)
			}
		})
	}
}
