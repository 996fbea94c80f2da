package mcptask_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// treeTools registers, beside the test tools, parents that spawn
// children: pipeline (its labels as steps of the tool rerunnable, one
// after the other), asker (a child that asks twice), recurse (a child of
// itself, deeper each time), and counts the runs of each label.
func treeTools(g *gates, runs *sync.Map) func(*mcptask.Server) {
	return func(ts *mcptask.Server) {
		registerTestTools(ts, g)
		type pipelineArgs struct {
			Labels []string `json:"labels"`
		}
		mcptask.AddTool(ts, &mcp.Tool{Name: "pipeline", Description: "runs its labels as children"},
			func(ctx context.Context, _ *mcp.CallToolRequest, in pipelineArgs) (*mcp.CallToolResult, any, error) {
				tk := mcptask.FromContext(ctx)
				var out []string
				for _, l := range in.Labels {
					_ = tk.SetStatusMessage(ctx, "step "+l)
					c, err := tk.Spawn(ctx, "counted", map[string]any{"label": l, "millis": -1}, &mcptask.SpawnOptions{Step: l})
					if err != nil {
						return nil, nil, err
					}
					res, err := c.Wait(ctx)
					if err != nil {
						return nil, nil, err
					}
					out = append(out, res.Content[0].(*mcp.TextContent).Text)
				}
				return text(strings.Join(out, ",")), nil, nil
			}, mcptask.ToolOptions{Support: mcptask.Optional, Rerunnable: true})
		mcptask.AddTool(ts, &mcp.Tool{Name: "counted", Description: "counts its runs"},
			func(ctx context.Context, _ *mcp.CallToolRequest, in sleepArgs) (*mcp.CallToolResult, any, error) {
				n, _ := runs.LoadOrStore(in.Label, new(int))
				*(n.(*int))++
				select {
				case <-g.get(in.Label):
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
				return text("done " + in.Label), nil, nil
			}, mcptask.ToolOptions{Support: mcptask.Optional, Rerunnable: true})
		mcptask.AddTool(ts, &mcp.Tool{Name: "asker", Description: "a child asks"},
			func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				c, err := mcptask.FromContext(ctx).Spawn(ctx, "ask", nil, nil)
				if err != nil {
					return nil, nil, err
				}
				res, err := c.Wait(ctx)
				if err != nil {
					return nil, nil, err
				}
				return res, nil, nil
			}, mcptask.ToolOptions{Support: mcptask.Optional})
		mcptask.AddTool(ts, &mcp.Tool{Name: "orphaner", Description: "starts a child and ends at once"},
			func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				if _, err := mcptask.FromContext(ctx).Spawn(ctx, "counted", map[string]any{"label": "orphan", "millis": -1}, nil); err != nil {
					return nil, nil, err
				}
				return nil, nil, errors.New("gave up")
			}, mcptask.ToolOptions{Support: mcptask.Optional})
		type depthArgs struct {
			Depth int `json:"depth"`
		}
		mcptask.AddTool(ts, &mcp.Tool{Name: "recurse", Description: "a child of itself"},
			func(ctx context.Context, _ *mcp.CallToolRequest, in depthArgs) (*mcp.CallToolResult, any, error) {
				c, err := mcptask.FromContext(ctx).Spawn(ctx, "recurse", map[string]any{"depth": in.Depth + 1}, nil)
				if err != nil {
					var se *mcptask.SpawnError
					if errors.As(err, &se) {
						return text(fmt.Sprintf("depth %d: %s: %v", in.Depth, se.Limit, err)), nil, nil
					}
					return nil, nil, err
				}
				res, err := c.Wait(ctx)
				if err != nil {
					return nil, nil, err
				}
				return res, nil, nil
			}, mcptask.ToolOptions{Support: mcptask.Optional})
	}
}

// children reads the children tasks/get lists for id.
func children(t *testing.T, tk *wiretest.Task) []wire.Child {
	t.Helper()
	var out []wire.Child
	if raw := tk.Meta[wire.MetaChildren]; raw != nil {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s: %s: %v", wire.MetaChildren, raw, err)
		}
	}
	return out
}

// TestSpawnTree runs a parent whose work runs two children in turn: the
// parent lists them (step, tool, status) under io.mcptask/children, each
// child names its parent and is read by its ID by the same requester,
// and the parent's result collects theirs.
func TestSpawnTree(t *testing.T) {
	g, runs := &gates{}, &sync.Map{}
	s := startServerOpts(t, filepath.Join(t.TempDir(), "tasks.db"), mcptask.Options{Owner: userOwner}, treeTools(g, runs))
	c, other := userClient(s, "alice"), userClient(s, "mallory")
	ctx := ctxT(t)
	h, err := c.CallTool(ctx, "pipeline", map[string]any{"labels": []string{"build", "test"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.WaitFor(ctx, h.TaskID, func(tk *wiretest.Task) bool { return len(children(t, tk)) == 1 })
	if err != nil {
		t.Fatal(err)
	}
	ch := children(t, p)[0]
	if ch.Step != "build" || ch.Tool != "counted" || ch.Status != "working" || p.StatusMessage != "step build" {
		t.Fatalf("child %+v, parent's message %q", ch, p.StatusMessage)
	}
	child, err := c.Get(ctx, ch.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if string(child.Meta[wire.MetaParent]) != `"`+h.TaskID+`"` {
		t.Fatalf("the child's %s = %s; want %s", wire.MetaParent, child.Meta[wire.MetaParent], h.TaskID)
	}
	if r, err := other.Call(ctx, "tasks/get", map[string]any{"taskId": ch.TaskID}, nil); err != nil || r.Error == nil {
		t.Fatalf("another requester read the child: %+v, %v", r, err)
	}
	close(g.get("build"))
	p, err = c.WaitFor(ctx, h.TaskID, func(tk *wiretest.Task) bool { return len(children(t, tk)) == 2 })
	if err != nil {
		t.Fatal(err)
	}
	if got := children(t, p); got[0].Status != "completed" || got[1].Step != "test" {
		t.Fatalf("children %+v", got)
	}
	// A finished step is kept while its parent runs: a re-run must find it.
	r, err := c.Call(ctx, "tasks/delete", map[string]any{"taskId": ch.TaskID}, nil)
	if err != nil || r.Error == nil || !strings.Contains(r.Error.Message, "is a step of task") {
		t.Fatalf("deleting a finished step of a running parent: %+v, %v", r.Error, err)
	}
	close(g.get("test"))
	p, err = c.WaitFor(ctx, h.TaskID, wiretest.Terminal)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != "completed" || resultText(t, p.Result) != "done build,done test" {
		t.Fatalf("parent %s %q", p.Status, p.Result)
	}
}

// TestSpawnCancelCascades cancels a parent whose child runs: the child
// is cancelled with it, its work stopped.
func TestSpawnCancelCascades(t *testing.T) {
	g, runs := &gates{}, &sync.Map{}
	s := startServerWith(t, filepath.Join(t.TempDir(), "tasks.db"), treeTools(g, runs))
	c, _ := clients(s)
	ctx := ctxT(t)
	h, err := c.CallTool(ctx, "pipeline", map[string]any{"labels": []string{"never"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.WaitFor(ctx, h.TaskID, func(tk *wiretest.Task) bool { return len(children(t, tk)) == 1 })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Result(ctx, "tasks/cancel", map[string]any{"taskId": h.TaskID}, nil); err != nil {
		t.Fatal(err)
	}
	child, err := c.Get(ctx, children(t, p)[0].TaskID)
	if err != nil || child.Status != "cancelled" {
		t.Fatalf("the child after its parent's cancel: %+v, %v", child, err)
	}
}

// TestSpawnInputThroughParent runs a parent whose child asks twice: each
// question shows on the parent (input_required), the answer given to the
// parent reaches the child, and the parent's result is the child's.
func TestSpawnInputThroughParent(t *testing.T) {
	s := startServerWith(t, filepath.Join(t.TempDir(), "tasks.db"), treeTools(&gates{}, &sync.Map{}))
	c, _ := clients(s)
	ctx := ctxT(t)
	h, err := c.CallTool(ctx, "asker", nil)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		p, err := c.WaitFor(ctx, h.TaskID, func(tk *wiretest.Task) bool { return tk.Status == "input_required" && len(tk.InputRequests) == 1 })
		if err != nil {
			t.Fatal(err)
		}
		for key, req := range p.InputRequests {
			if !strings.Contains(string(req), fmt.Sprintf("question %d", round)) {
				t.Fatalf("round %d: the parent asks %s", round, req)
			}
			answer := map[string]any{"action": "accept", "content": map[string]any{"ok": round == 0}}
			if err := c.Result(ctx, "tasks/update", map[string]any{"taskId": h.TaskID, "inputResponses": map[string]any{key: answer}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		// The parent's question is gone before the next one comes.
		if _, err := c.WaitFor(ctx, h.TaskID, func(tk *wiretest.Task) bool { return len(tk.InputRequests) == 0 || tk.Status == "completed" }); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != "completed" || resultText(t, p.Result) != "accept:true,accept:false" {
		t.Fatalf("parent %s %s", p.Status, p.Result)
	}
}

// TestSpawnLimits runs a tool that spawns itself: the tree stops at
// Limits.MaxChildDepth with a SpawnError naming the depth.
func TestSpawnLimits(t *testing.T) {
	s := startServerOpts(t, filepath.Join(t.TempDir(), "tasks.db"), mcptask.Options{Limits: mcptask.Limits{MaxChildDepth: 3}}, treeTools(&gates{}, &sync.Map{}))
	c, _ := clients(s)
	ctx := ctxT(t)
	h, err := c.CallTool(ctx, "recurse", map[string]any{"depth": 0})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, p.Result); !strings.HasPrefix(got, "depth 3: depth: ") || !strings.Contains(got, "at depth 3") {
		t.Fatalf("result %q; want the spawn at depth 3 refused", got)
	}
}

// TestSpawnResumesAfterRestart stops the server while a parent waits on
// its second child: after the restart the parent's work runs again and
// finds its children, so the finished step is not run again and no
// step is started twice.
func TestSpawnResumesAfterRestart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	g, runs := &gates{}, &sync.Map{}
	s := startServerWith(t, db, treeTools(g, runs))
	c, _ := clients(s)
	ctx := ctxT(t)
	close(g.get("one"))
	h, err := c.CallTool(ctx, "pipeline", map[string]any{"labels": []string{"one", "two"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitFor(ctx, h.TaskID, func(tk *wiretest.Task) bool { return len(children(t, tk)) == 2 }); err != nil {
		t.Fatal(err)
	}
	s.close()
	close(g.get("two"))
	s2 := startServerWith(t, db, treeTools(g, runs))
	c2, _ := clients(s2)
	p, err := c2.WaitFor(ctx, h.TaskID, wiretest.Terminal)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != "completed" || resultText(t, p.Result) != "done one,done two" || len(children(t, p)) != 2 {
		t.Fatalf("parent after the restart: %s %s, %d children", p.Status, p.Result, len(children(t, p)))
	}
	one, _ := runs.Load("one")
	if *(one.(*int)) != 1 {
		t.Fatalf("the finished step ran %d times", *(one.(*int)))
	}
}

// TestSpawnTraced: a child's run span is a child of its parent's run
// span, in the parent's trace.
func TestSpawnTraced(t *testing.T) {
	tp, rec := recorded()
	g := &gates{}
	close(g.get("x"))
	s := startServerOpts(t, filepath.Join(t.TempDir(), "tasks.db"), mcptask.Options{TracerProvider: tp}, treeTools(g, &sync.Map{}))
	c, _ := clients(s)
	callTraced(t, c, "pipeline", map[string]any{"labels": []string{"x"}})
	spans := waitSpans(t, rec, "the parent's and the child's runs", func(s []sdktrace.ReadOnlySpan) bool { return len(named(s, "mcptask.run")) == 2 })
	var parent, child sdktrace.ReadOnlySpan
	for _, sp := range named(spans, "mcptask.run") {
		switch attr(sp, "mcptask.tool").AsString() {
		case "pipeline":
			parent = sp
		case "counted":
			child = sp
		}
	}
	if parent == nil || child == nil {
		t.Fatalf("run spans %v", names(spans))
	}
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Fatalf("the child's run span has parent %s in trace %s; want the parent's run %s in %s",
			child.Parent().SpanID(), child.SpanContext().TraceID(), parent.SpanContext().SpanID(), parent.SpanContext().TraceID())
	}
}

// TestSpawnCancelEndedParent: a parent that ended leaving a child
// running (its handler gave up) keeps it running; a cancel of the
// parent, which has ended, still stops the child.
func TestSpawnCancelEndedParent(t *testing.T) {
	s := startServerWith(t, filepath.Join(t.TempDir(), "tasks.db"), treeTools(&gates{}, &sync.Map{}))
	c, _ := clients(s)
	ctx := ctxT(t)
	h, err := c.CallTool(ctx, "orphaner", nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal)
	if err != nil {
		t.Fatal(err)
	}
	kids := children(t, p)
	if len(kids) != 1 || kids[0].Status != "working" {
		t.Fatalf("the ended parent's children: %+v", kids)
	}
	// (The 2026 wire answers the cancel of an ended task as done.)
	if _, err := c.Call(ctx, "tasks/cancel", map[string]any{"taskId": h.TaskID}, nil); err != nil {
		t.Fatal(err)
	}
	child, err := c.Get(ctx, kids[0].TaskID)
	if err != nil || child.Status != "cancelled" {
		t.Fatalf("the child after its ended parent's cancel: %+v, %v", child, err)
	}
}

// TestSpawnCountLimits: past Limits.MaxChildren, or past
// Limits.MaxTreeTasks, Spawn fails naming the limit (a tool error of the
// parent: the go-sdk's typed handlers turn the handler's error into one).
func TestSpawnCountLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits mcptask.Limits
		want   func(parent string) string
	}{
		{"children", mcptask.Limits{MaxChildren: 2}, func(p string) string { return "task " + p + " has started 2 children, at most 2" }},
		{"tree", mcptask.Limits{MaxTreeTasks: 3}, func(p string) string { return "the tree of task " + p + " holds 3 tasks, at most 3" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &gates{}
			for _, l := range []string{"a", "b", "c"} {
				close(g.get(l))
			}
			s := startServerOpts(t, filepath.Join(t.TempDir(), "tasks.db"), mcptask.Options{Limits: tc.limits}, treeTools(g, &sync.Map{}))
			c, _ := clients(s)
			ctx := ctxT(t)
			h, err := c.CallTool(ctx, "pipeline", map[string]any{"labels": []string{"a", "b", "c"}})
			if err != nil {
				t.Fatal(err)
			}
			p, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal)
			if err != nil {
				t.Fatal(err)
			}
			want := `step "c" (tool counted) not started: ` + tc.want(h.TaskID)
			if got := resultText(t, p.Result); !strings.Contains(got, want) {
				t.Fatalf("parent %s %q; want %q", p.Status, got, want)
			}
		})
	}
}
