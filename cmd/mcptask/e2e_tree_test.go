package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// treeGates holds the children of the tree server's tools until the test
// releases their label.
type treeGates struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func (g *treeGates) get(label string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]chan struct{}{}
	}
	if g.m[label] == nil {
		g.m[label] = make(chan struct{})
	}
	return g.m[label]
}

func (g *treeGates) release(label string) { close(g.get(label)) }

// startTreeServer serves, with Go tools, a task tree two levels deep:
// "pipeline" runs child-tool as its step build, then "sub" as its step
// test, which runs child-tool as its step lint. Each child-tool holds
// until the test releases its label. Every request acts for one
// requester, so that the tasks of one mcptask run are those of the next.
func startTreeServer(t *testing.T, g *treeGates) *servertest.Server {
	t.Helper()
	spawn := func(ctx context.Context, tool, step string, args any) (*mcp.CallToolResult, error) {
		c, err := mcptask.FromContext(ctx).Spawn(ctx, tool, args, &mcptask.SpawnOptions{Step: step})
		if err != nil {
			return nil, err
		}
		return c.Wait(ctx)
	}
	type labelArgs struct {
		Label string `json:"label"`
	}
	return servertest.Start(t, servertest.Options{
		Tasks: mcptask.Options{Owner: func(context.Context, mcp.Request) task.Owner { return task.TokenOwner("cli-tree") }},
		Register: func(ts *mcptask.Server) (func(), error) {
			mcptask.AddTool(ts, &mcp.Tool{Name: "child-tool", Description: "holds until the test releases its label"},
				func(ctx context.Context, _ *mcp.CallToolRequest, in labelArgs) (*mcp.CallToolResult, any, error) {
					_ = mcptask.FromContext(ctx).SetStatusMessage(ctx, "running "+in.Label)
					select {
					case <-g.get(in.Label):
					case <-ctx.Done():
						return nil, nil, ctx.Err()
					}
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Label + " ok"}}}, nil, nil
				}, mcptask.ToolOptions{Support: mcptask.Optional})
			mcptask.AddTool(ts, &mcp.Tool{Name: "sub", Description: "runs child-tool as its step lint"},
				func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
					res, err := spawn(ctx, "child-tool", "lint", labelArgs{"lint"})
					return res, nil, err
				}, mcptask.ToolOptions{Support: mcptask.Optional})
			mcptask.AddTool(ts, &mcp.Tool{Name: "pipeline", Description: "runs build, then test"},
				func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
					if _, err := spawn(ctx, "child-tool", "build", labelArgs{"build"}); err != nil {
						return nil, nil, err
					}
					if _, err := spawn(ctx, "sub", "test", nil); err != nil {
						return nil, nil, err
					}
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pipeline done"}}}, nil, nil
				}, mcptask.ToolOptions{Support: mcptask.Optional})
			return nil, nil
		},
	})
}

// statusJSON runs 'mcptask status --json [--tree] ID' and decodes it.
func statusJSON(t *testing.T, c *cli, wireArg string, args ...string) jsonStatus {
	t.Helper()
	r := c.run(append([]string{"--wire", wireArg, "status", "--json"}, args...)...)
	if r.Code != exitOK {
		t.Fatalf("%s", r)
	}
	var j jsonStatus
	if err := json.Unmarshal([]byte(r.Stdout), &j); err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	return j
}

// waitChildren polls 'mcptask status --json ID' until ok says yes.
func waitChildren(t *testing.T, c *cli, wireArg, id string, ok func(jsonStatus) bool) jsonStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		j := statusJSON(t, c, wireArg, "--tree", id)
		if ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: the tree never came: %+v", id, j)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTree runs a task tree with Go tools, on both wires: 'status' counts
// a parent's children and names a child's parent, 'status --tree' draws
// the tree (--json too), and 'wait' shows the children's progress and
// carries them in its --json outcome.
func TestTree(t *testing.T) {
	for _, w := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(w, func(t *testing.T) {
			t.Parallel()
			g := &treeGates{}
			s := startTreeServer(t, g)
			c := newCLI(t, s.URL)

			r := c.run("--wire", w, "call", "--detach", "pipeline")
			expect(t, r, exitOK, nil, nil)
			id := strings.TrimSpace(r.Stdout)

			// The first child works.
			j := waitChildren(t, c, w, id, func(j jsonStatus) bool {
				return len(j.Children) == 1 && j.Children[0].StatusMessage == "running build"
			})
			build := j.Children[0]
			if build.Step != "build" || build.Tool != "child-tool" || build.Status != "working" || j.ParentTaskID != "" ||
				len(j.Tree) != 1 || j.Tree[0].Child != build || j.TreeCut != "" {
				t.Fatalf("status --json --tree: %+v", j)
			}
			r = c.run("--wire", w, "status", id)
			expect(t, r, exitOK, []string{
				"task " + id + "\n",
				"  children: 1 (1 working); 'mcptask status --tree " + id + "' shows them\n",
			}, nil)
			r = c.run("--wire", w, "status", build.TaskID)
			expect(t, r, exitOK, []string{"  parent:   " + id + " ", "  message:  running build\n"}, nil)
			if strings.Contains(r.Stdout, "children:") {
				t.Errorf("a child without children:\n%s", r)
			}
			if cj := statusJSON(t, c, w, build.TaskID); cj.ParentTaskID != id || cj.Children != nil {
				t.Errorf("status --json of the child: %+v", cj)
			}

			// Then the second, with a child of its own.
			g.release("build")
			j = waitChildren(t, c, w, id, func(j jsonStatus) bool {
				return len(j.Tree) == 2 && len(j.Tree[1].Children) == 1 && j.Tree[1].Children[0].StatusMessage == "running lint"
			})
			test, lint := j.Tree[1].Child, j.Tree[1].Children[0].Child
			if test.Step != "test" || test.Tool != "sub" || lint.Step != "lint" || lint.Tool != "child-tool" || j.Tree[0].Status != "completed" {
				t.Fatalf("status --json --tree: %+v", j)
			}
			r = c.run("--wire", w, "status", "--tree", id)
			expect(t, r, exitOK, []string{"  children: 2 (1 completed, 1 working)\n" +
				"  ├─ build (child-tool) " + build.TaskID + ": completed · running build\n" +
				"  └─ test (sub) " + test.TaskID + ": working\n" +
				"     └─ lint (child-tool) " + lint.TaskID + ": working · running lint\n"}, nil)
			if strings.Contains(r.Stdout, "shows them") || strings.Contains(r.Stdout, "tree cut") {
				t.Errorf("status --tree:\n%s", r)
			}
			t.Logf("status --tree:\n%s", r.Stdout)

			// wait shows the children, each change on a line of its own:
			// read from the tree on 2026-07-28 (whose notifications do not
			// carry it), from the wait's own polls with --no-push.
			waitArgs := []string{"--wire", w, "wait", id}
			if w == "2025-11-25" {
				waitArgs = append(waitArgs, "--no-push")
			}
			p := c.start(waitArgs...)
			p.waitStderr(regexp.MustCompile(`(?m)^mcptask:   └ lint \(child-tool\) `+lint.TaskID+`: working · running lint$`), 30*time.Second)
			g.release("lint")
			r = p.wait(30 * time.Second)
			expect(t, r, exitOK, []string{"pipeline done\n"}, []string{
				"mcptask: └ build (child-tool) " + build.TaskID + ": completed · running build\n",
				"mcptask: └ test (sub) " + test.TaskID + ": working\n",
				"mcptask:   └ lint (child-tool) " + lint.TaskID + ": completed · running lint\n",
				"mcptask: └ test (sub) " + test.TaskID + ": completed\n",
			})
			for _, line := range []string{"└ build (child-tool) " + build.TaskID + ": completed · running build\n", "└ lint (child-tool) " + lint.TaskID + ": completed · running lint\n"} {
				if n := strings.Count(r.Stderr, line); n != 1 {
					t.Errorf("wait printed %q %d times, want once:\n%s", line, n, r)
				}
			}
			t.Logf("wait's stderr:\n%s", r.Stderr)

			// wait --json carries the children; so does status --json.
			r = c.run("--wire", w, "wait", "--json", id)
			expect(t, r, exitOK, nil, nil)
			var o jsonOutcome
			if err := json.Unmarshal([]byte(r.Stdout), &o); err != nil {
				t.Fatalf("%v\n%s", err, r)
			}
			if len(o.Children) != 2 || o.Children[0].Step != "build" || o.Children[1].Step != "test" ||
				o.Children[1].Status != "completed" || o.ParentTaskID != "" {
				t.Errorf("wait --json: %+v", o)
			}
			if strings.Contains(r.Stderr, "└") {
				t.Errorf("wait --json printed the tree on stderr:\n%s", r)
			}
			r = c.run("--wire", w, "wait", "--json", lint.TaskID)
			expect(t, r, exitOK, []string{fmt.Sprintf("%q: %q", "parentTaskId", test.TaskID)}, nil)
			if j := statusJSON(t, c, w, test.TaskID); j.ParentTaskID != id || len(j.Children) != 1 || j.Children[0] != (wire.Child{TaskID: lint.TaskID, Step: "lint", Tool: "child-tool", Status: "completed", StatusMessage: "running lint"}) {
				t.Errorf("status --json of test: %+v", j)
			}
		})
	}
}
