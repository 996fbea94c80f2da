package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/source/workflow"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// steps are the step tools of the tests, and what they saw.
type steps struct {
	mu      sync.Mutex
	calls   map[string][]map[string]any // tool → the arguments of each call
	arrived chan string                 // the barrier tool's arrivals
	release chan struct{}               // closed to let the barrier tool's calls end
	flaky   atomic.Int32                // flaky's failures so far
}

// register adds the step tools: echo (its arguments back as structured
// content), barrier (blocks until released, telling who arrived), flaky
// (a tool error its first two calls), broken (always a tool error), and
// slow (runs until cancelled).
func (s *steps) register(ts *mcptask.Server) {
	s.calls = map[string][]map[string]any{}
	s.arrived = make(chan string, 16)
	s.release = make(chan struct{})
	record := func(tool string, args map[string]any) {
		s.mu.Lock()
		s.calls[tool] = append(s.calls[tool], args)
		s.mu.Unlock()
	}
	opts := mcptask.ToolOptions{Support: mcptask.Optional, Rerunnable: true}
	mcptask.AddTool(ts, &mcp.Tool{Name: "echo"}, func(ctx context.Context, _ *mcp.CallToolRequest, args map[string]any) (*mcp.CallToolResult, any, error) {
		record("echo", args)
		return nil, args, nil
	}, opts)
	mcptask.AddTool(ts, &mcp.Tool{Name: "barrier"}, func(ctx context.Context, _ *mcp.CallToolRequest, args map[string]any) (*mcp.CallToolResult, any, error) {
		record("barrier", args)
		s.arrived <- fmt.Sprint(args["name"])
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return nil, map[string]any{"name": args["name"]}, nil
	}, opts)
	mcptask.AddTool(ts, &mcp.Tool{Name: "flaky"}, func(ctx context.Context, _ *mcp.CallToolRequest, args map[string]any) (*mcp.CallToolResult, any, error) {
		record("flaky", args)
		if s.flaky.Add(1) <= 2 {
			res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "flaked"}}}
			return res, nil, nil
		}
		return nil, map[string]any{"ok": true}, nil
	}, opts)
	mcptask.AddTool(ts, &mcp.Tool{Name: "broken"}, func(ctx context.Context, _ *mcp.CallToolRequest, args map[string]any) (*mcp.CallToolResult, any, error) {
		record("broken", args)
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "3 tests failed"}}}, nil, nil
	}, opts)
	mcptask.AddTool(ts, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, args map[string]any) (*mcp.CallToolResult, any, error) {
		record("slow", args)
		<-ctx.Done()
		return nil, nil, ctx.Err()
	}, opts)
}

func (s *steps) count(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls[tool])
}

// start runs a server with the step tools and the workflows.
func start(t *testing.T, s *steps, wfs ...workflow.Workflow) (*servertest.Server, *wiretest.Client) {
	t.Helper()
	srv := servertest.Start(t, servertest.Options{Register: func(ts *mcptask.Server) (func(), error) {
		s.register(ts)
		return nil, workflow.New(wfs, nil, nil).Register(context.Background(), ts)
	}})
	return srv, &wiretest.Client{URL: srv.URL, Tasks: true}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// outcome decodes a finished workflow's structured result.
type outcome struct {
	Outcome    string `json:"outcome"`
	FailedStep string `json:"failedStep"`
	Steps      map[string]struct {
		Outcome  string `json:"outcome"`
		TaskID   string `json:"taskId"`
		Attempts int    `json:"attempts"`
		Result   any    `json:"result"`
		Message  string `json:"message"`
	} `json:"steps"`
}

func finish(t *testing.T, c *wiretest.Client, id string) (*wiretest.Task, outcome) {
	t.Helper()
	tk, err := c.WaitFor(ctxT(t), id, wiretest.Terminal)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		StructuredContent outcome `json:"structuredContent"`
	}
	if err := json.Unmarshal(tk.Result, &res); err != nil {
		t.Fatalf("result %s: %v", tk.Result, err)
	}
	return tk, res.StructuredContent
}

// TestFanOutFanIn runs build → (unit ∥ e2e) → report: the two middle
// steps run at once (each waits for the other to arrive), read build's
// result, and report reads both; the workflow's status message names
// the steps that run, its result collects every step's.
func TestFanOutFanIn(t *testing.T) {
	s := &steps{}
	wf := workflow.Workflow{Name: "ci", Steps: []workflow.Step{
		{Name: "build", Tool: "echo", Arguments: map[string]any{"artifact": "app-${args/ref}.tar", "n": "${args/n}"}},
		{Name: "unit", Tool: "barrier", Needs: []string{"build"}, Arguments: map[string]any{"name": "unit", "artifact": "${steps.build/artifact}"}},
		{Name: "e2e", Tool: "barrier", Needs: []string{"build"}, Arguments: map[string]any{"name": "e2e", "n": "${steps.build/n}"}},
		{Name: "report", Tool: "echo", Needs: []string{"unit", "e2e"}, Arguments: map[string]any{"suites": "${steps.unit/name},${steps.e2e/name}", "all": "${steps.build}"}},
	}}
	_, c := start(t, s, wf)
	ctx := ctxT(t)
	h, err := c.CallTool(ctx, "ci", map[string]any{"ref": "v1", "n": 3})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for range 2 {
		select {
		case name := <-s.arrived:
			got[name] = true
		case <-ctx.Done():
			t.Fatalf("the fan-out steps did not both start: %v", got)
		}
	}
	tk, err := c.WaitFor(ctx, h.TaskID, func(tk *wiretest.Task) bool { return strings.Contains(tk.StatusMessage, "running unit, e2e") })
	if err != nil {
		t.Fatal(err)
	}
	close(s.release)
	tk, out := finish(t, c, h.TaskID)
	if tk.Status != "completed" || out.Outcome != "ok" {
		t.Fatalf("workflow %s %s", tk.Status, tk.Result)
	}
	for name, st := range out.Steps {
		if st.Outcome != "ok" || st.TaskID == "" || st.Attempts != 1 {
			t.Errorf("step %s: %+v", name, st)
		}
	}
	if a := s.calls["barrier"]; a[0]["artifact"] != "app-v1.tar" && a[1]["artifact"] != "app-v1.tar" {
		t.Errorf("unit's arguments %v", a)
	}
	if r, _ := out.Steps["e2e"].Result.(map[string]any); r["name"] != "e2e" {
		t.Errorf("e2e's result %v", out.Steps["e2e"].Result)
	}
	rep := s.calls["echo"][1]
	if rep["suites"] != "unit,e2e" && rep["suites"] != "e2e,unit" {
		t.Errorf("report's arguments %v", rep)
	}
	if all, _ := rep["all"].(map[string]any); all["n"] != float64(3) {
		t.Errorf("a whole reference keeps its type: %v", rep["all"])
	}
	var children []wire.Child
	if err := json.Unmarshal(tk.Meta[wire.MetaChildren], &children); err != nil || len(children) != 4 {
		t.Fatalf("children %s: %v", tk.Meta[wire.MetaChildren], err)
	}
}

// TestWhenRetriesAndFailure: a step whose condition does not hold is
// skipped (its dependents still run), a flaky step is retried until it
// passes, a failing step with continueOnError lets the workflow go on,
// and a failing step without it fails the workflow (a tool error naming
// it), cancelling the step that runs.
func TestWhenRetriesAndFailure(t *testing.T) {
	s := &steps{}
	wf := workflow.Workflow{Name: "wf", Steps: []workflow.Step{
		{Name: "prod-only", Tool: "echo", When: "${args/env} == prod"},
		{Name: "flaky", Tool: "flaky", Retries: 2, Needs: []string{"prod-only"}},
		{Name: "lint", Tool: "broken", ContinueOnError: true, Needs: []string{"flaky"}},
		{Name: "after-lint", Tool: "echo", Needs: []string{"lint"}, When: "${steps.lint.outcome} == tool_error", Arguments: map[string]any{"lint": "${steps.lint.outcome}"}},
		{Name: "hang", Tool: "slow", Needs: []string{"after-lint"}},
		{Name: "tests", Tool: "broken", Needs: []string{"after-lint"}},
		{Name: "deploy", Tool: "echo", Needs: []string{"tests", "hang"}},
	}}
	srv, c := start(t, s, wf)
	ctx := ctxT(t)
	h, err := c.CallTool(ctx, "wf", map[string]any{"env": "staging"})
	if err != nil {
		t.Fatal(err)
	}
	tk, out := finish(t, c, h.TaskID)
	if tk.Status != "completed" || !tk.IsError && !strings.Contains(string(tk.Result), `"isError":true`) {
		t.Fatalf("workflow %s %s; want a tool error", tk.Status, tk.Result)
	}
	want := map[string]string{"prod-only": "skipped", "flaky": "ok", "lint": "tool_error", "after-lint": "ok", "hang": "cancelled", "tests": "tool_error", "deploy": "not_started"}
	for name, w := range want {
		if got := out.Steps[name].Outcome; got != w {
			t.Errorf("step %s: %s; want %s", name, got, w)
		}
	}
	if out.Outcome != "failed" || out.FailedStep != "tests" || out.Steps["flaky"].Attempts != 3 || s.count("flaky") != 3 {
		t.Errorf("outcome %s at %s, flaky %d attempts, %d calls", out.Outcome, out.FailedStep, out.Steps["flaky"].Attempts, s.count("flaky"))
	}
	hang, err := srv.Store.Get(ctx, task.ID(out.Steps["hang"].TaskID))
	if err != nil || hang.Status != task.Cancelled {
		t.Fatalf("the running step after the failure: %+v, %v", hang, err)
	}
}

// TestTimeout: a step past its timeout is cancelled and fails.
func TestTimeout(t *testing.T) {
	s := &steps{}
	_, c := start(t, s, workflow.Workflow{Name: "wf", Steps: []workflow.Step{{Name: "slow", Tool: "slow", Timeout: 100 * time.Millisecond}}})
	h, err := c.CallTool(ctxT(t), "wf", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, out := finish(t, c, h.TaskID)
	if st := out.Steps["slow"]; st.Outcome != "failed" || !strings.Contains(st.Message, "timed out after 100ms") {
		t.Fatalf("step %+v", st)
	}
}

// TestApprovalStep: a step with an approval is held (the workflow says
// so) until an approver approves it, then runs; a denied one fails the
// workflow.
func TestApprovalStep(t *testing.T) {
	s := &steps{}
	wf := workflow.Workflow{Name: "release", Steps: []workflow.Step{
		{Name: "build", Tool: "echo"},
		{Name: "deploy", Tool: "echo", Needs: []string{"build"}, Retries: 1, Approval: &mcptask.Approval{Approvers: []string{"alice"}, Reason: "production"},
			Arguments: map[string]any{"to": "prod"}},
	}}
	srv, c := start(t, s, wf)
	ctx := ctxT(t)
	for _, approve := range []bool{true, false} {
		h, err := c.CallTool(ctx, "release", nil)
		if err != nil {
			t.Fatal(err)
		}
		var held []mcptask.Held
		for len(held) == 0 {
			if held, err = srv.Tasks.HeldTasks(ctx, "approval"); err != nil {
				t.Fatal(err)
			}
			if len(held) == 0 {
				<-srv.Engine.Watch(task.ID(h.TaskID)) // the workflow's message changes as the step is held
			}
		}
		if held[0].Step != "deploy" || held[0].Parent != h.TaskID || len(held[0].Approvers) != 1 {
			t.Fatalf("held %+v", held[0])
		}
		if _, err := srv.Tasks.Decide(ctx, task.ID(held[0].TaskID), approve, "mallory", ""); err == nil {
			t.Fatal("someone who is no approver approved")
		}
		if _, err := srv.Tasks.Decide(ctx, task.ID(held[0].TaskID), approve, "alice", "ok"); err != nil {
			t.Fatal(err)
		}
		_, out := finish(t, c, h.TaskID)
		if approve && (out.Outcome != "ok" || s.count("echo") != 2) {
			t.Fatalf("approved: %+v, %d calls", out, s.count("echo"))
		}
		if !approve && (out.Outcome != "failed" || out.FailedStep != "deploy" || !strings.Contains(out.Steps["deploy"].Message, "denied") || out.Steps["deploy"].Attempts != 1) {
			t.Fatalf("denied (and not asked again): %+v", out)
		}
	}
}

// TestCheck lists what Check refuses.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		steps []workflow.Step
		want  string
	}{
		{nil, "at least one step"},
		{[]workflow.Step{{Name: "a b", Tool: "x"}}, "not a step name"},
		{[]workflow.Step{{Name: "a", Tool: "x"}, {Name: "a", Tool: "x"}}, "two steps are named"},
		{[]workflow.Step{{Name: "a"}}, "name the tool"},
		{[]workflow.Step{{Name: "a", Tool: "x", Needs: []string{"b"}}}, `no step "b"`},
		{[]workflow.Step{{Name: "a", Tool: "x", Needs: []string{"b"}}, {Name: "b", Tool: "x", Needs: []string{"a"}}}, "a cycle: a → b → a"},
		{[]workflow.Step{{Name: "a", Tool: "x"}, {Name: "b", Tool: "x", Arguments: map[string]any{"v": "${steps.a/x}"}}}, "without needing it"},
		{[]workflow.Step{{Name: "a", Tool: "x", Arguments: map[string]any{"v": "${env/HOME}"}}}, "a reference is"},
		{[]workflow.Step{{Name: "a", Tool: "x", When: "${args/x} == "}}, "both sides"},
		{[]workflow.Step{{Name: "a", Tool: "x", Retries: 11}}, "retries"},
		{[]workflow.Step{{Name: "a", Tool: "wf"}}, "does not call itself"},
		{[]workflow.Step{{Name: "a", Tool: "x", Approval: &mcptask.Approval{}}}, "at least one approver"},
	} {
		err := workflow.Check(workflow.Workflow{Name: "wf", Steps: tc.steps})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want %q", tc.steps, err, tc.want)
		}
	}
}

// TestDeclarationOrder: a step declared before the step it needs runs
// once that one ends, skipped or not.
func TestDeclarationOrder(t *testing.T) {
	s := &steps{}
	_, c := start(t, s, workflow.Workflow{Name: "wf", Steps: []workflow.Step{
		{Name: "b", Tool: "echo", Needs: []string{"a"}, Arguments: map[string]any{"a": "${steps.a.outcome}"}},
		{Name: "a", Tool: "echo", When: "false"},
		{Name: "c", Tool: "echo", Needs: []string{"b"}},
	}})
	h, err := c.CallTool(ctxT(t), "wf", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, out := finish(t, c, h.TaskID)
	if out.Outcome != "ok" || out.Steps["a"].Outcome != "skipped" || out.Steps["b"].Outcome != "ok" || out.Steps["c"].Outcome != "ok" || s.count("echo") != 2 {
		t.Fatalf("%+v, %d calls", out, s.count("echo"))
	}
}
