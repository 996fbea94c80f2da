// Package demo holds the example tools mcptaskd serves. Each one shows a
// different side of MCP Tasks:
//
//   - long_computation: long, cancellable, re-runnable work with progress
//     in the task's status message and each step's count emitted as an
//     intermediate result (MCP Events: long_computation.output);
//   - deploy_with_confirmation: work that stops half-way to ask the user a
//     question (input_required), then continues or aborts;
//   - flaky_migration: work that fails with a JSON-RPC error (task failed);
//   - lint_report: work that completes with a tool error (isError:true);
//   - echo: a plain synchronous tool, for comparison and benchmarks.
package demo

import (
	"context"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Register adds the demo tools to ts's server.
func Register(ts *mcptask.Server) {
	mcptask.AddTool(ts, &mcp.Tool{
		Name:  "long_computation",
		Title: "Long computation (counts primes)",
		Description: "Counts the prime numbers up to n with a segmented sieve, split into `steps` steps " +
			"with a pause of `step_delay_ms` after each, to stand for any long, CPU-bound job. " +
			"Run it as a task (declare the io.modelcontextprotocol/tasks extension) to get a task " +
			"handle at once and poll its progress (\"step k of N\") with tasks/get; cancel it with " +
			"tasks/cancel. It has no side effects, so the server re-runs it from the start if it " +
			"crashes or restarts while the task runs. Without the extension it answers synchronously.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, longComputation, mcptask.ToolOptions{Support: mcptask.Optional, Rerunnable: true, OutputSchema: stepSchema})

	mcptask.AddTool(ts, &mcp.Tool{
		Name:  "deploy_with_confirmation",
		Title: "Deploy with confirmation",
		Description: "Simulates deploying a service: builds it in `build_steps` steps, then pauses and asks " +
			"the user to confirm the rollout (the task shows input_required with an elicitation " +
			"request; answer it with tasks/update), then rolls out or aborts. Deploying has side " +
			"effects, so it is never re-run after a crash: a deployment interrupted by a restart " +
			"fails with an \"outcome unknown\" error. Task-only: the client must declare the tasks extension.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
	}, deployWithConfirmation, mcptask.ToolOptions{Support: mcptask.Required})

	mcptask.AddTool(ts, &mcp.Tool{
		Name:  "flaky_migration",
		Title: "Flaky database migration",
		Description: "Simulates a database migration that applies `steps` steps and always breaks at step " +
			"`fail_at_step` with a lock timeout. The failure is a JSON-RPC error (code -32603), so " +
			"as a task it ends in status failed with that error. Migrations change data, so it is " +
			"not re-run after a crash.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, flakyMigration, mcptask.ToolOptions{Support: mcptask.Optional})

	mcptask.AddTool(ts, &mcp.Tool{
		Name:  "lint_report",
		Title: "Lint report",
		Description: "Lints the given source text line by line (long lines, trailing whitespace, TODO/FIXME " +
			"markers, indentation mixing spaces and tabs) and reports the findings. Finding problems is a tool-level " +
			"error: the result has isError:true, so as a task it ends completed with isError:true; " +
			"clean source gives a normal result. Read-only, re-run after a crash.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, lintReport, mcptask.ToolOptions{Support: mcptask.Optional, Rerunnable: true})

	mcptask.AddTool(ts, &mcp.Tool{
		Name:        "echo",
		Title:       "Echo",
		Description: "Returns its text unchanged, synchronously. A plain tool without task support, for comparisons and benchmarks.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, echo, mcptask.ToolOptions{Support: mcptask.Forbidden})
}

func ptr[T any](v T) *T { return &v }

// text returns a tool result with one text content.
func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// progress sets the task's status message when the call runs as a task,
// and logs it in the task's log.
func progress(ctx context.Context, msg string) {
	if t := mcptask.FromContext(ctx); t != nil {
		t.Log(msg)
		_ = t.SetStatusMessage(ctx, msg) // progress is best effort
	}
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// orDefault returns v, or def if v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

type echoArgs struct {
	Text string `json:"text" jsonschema:"the text to return"`
}

func echo(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
	return text(in.Text), nil, nil
}
