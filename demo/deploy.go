package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type deployArgs struct {
	Service     string `json:"service" jsonschema:"the service to deploy"`
	Version     string `json:"version,omitempty" jsonschema:"the version to deploy (default latest)"`
	BuildSteps  int    `json:"build_steps,omitempty" jsonschema:"how many build steps run before the confirmation (1 to 10000; default 3)"`
	StepDelayMs *int   `json:"step_delay_ms,omitempty" jsonschema:"duration of each build and roll-out step in milliseconds (0 to 60000; default 300)"`
}

type deployOut struct {
	Service  string `json:"service"`
	Version  string `json:"version"`
	Deployed bool   `json:"deployed" jsonschema:"whether the new version was rolled out"`
}

func deployWithConfirmation(ctx context.Context, _ *mcp.CallToolRequest, in deployArgs) (*mcp.CallToolResult, deployOut, error) {
	t := mcptask.FromContext(ctx)
	if t == nil {
		return nil, deployOut{}, fmt.Errorf("deploy_with_confirmation runs only as a task: declare the io.modelcontextprotocol/tasks extension")
	}
	if in.Service == "" {
		return nil, deployOut{}, fmt.Errorf("service is required")
	}
	version := orDefault(in.Version, "latest")
	steps := orDefault(in.BuildSteps, 3)
	delay := 300
	if in.StepDelayMs != nil {
		delay = *in.StepDelayMs
	}
	switch {
	case steps < 1 || steps > maxSteps:
		return nil, deployOut{}, fmt.Errorf("build_steps must be between 1 and %d, got %d", maxSteps, steps)
	case delay < 0 || delay > maxStepDelay:
		return nil, deployOut{}, fmt.Errorf("step_delay_ms must be between 0 and %d, got %d", maxStepDelay, delay)
	}
	target := in.Service + "@" + version
	out := deployOut{Service: in.Service, Version: version}

	for k := 1; k <= steps; k++ {
		progress(ctx, fmt.Sprintf("building %s: step %d of %d", target, k, steps))
		if err := sleep(ctx, time.Duration(delay)*time.Millisecond); err != nil {
			return nil, out, err
		}
	}

	progress(ctx, fmt.Sprintf("build of %s finished; waiting for confirmation", target))
	answer, err := t.Elicit(ctx, &mcp.ElicitParams{
		Mode:    "form",
		Message: fmt.Sprintf("The build of %s succeeded. Roll it out to production now?", target),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"confirm": map[string]any{"type": "boolean", "title": "Roll out", "description": "true to roll out, false to abort"},
			},
			"required": []string{"confirm"},
		},
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, out, ctx.Err()
		}
		return nil, out, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "asking for confirmation failed: " + err.Error()}
	}
	if answer.Action != "accept" || answer.Content["confirm"] != true {
		progress(ctx, fmt.Sprintf("aborted: %s was not rolled out", target))
		why := "the user declined"
		if answer.Action == "accept" {
			why = "the user did not confirm"
		} else if answer.Action != "decline" {
			why = fmt.Sprintf("the confirmation was dismissed (action %q)", answer.Action)
		}
		return text(fmt.Sprintf("Deployment of %s aborted: %s. Nothing was rolled out.", target, why)), out, nil
	}

	// The rollout is the side effect: on the ledger before it starts,
	// with its receipt, then confirmed (or, if the server dies meanwhile,
	// left for reconciliation: the task shows the effect unknown).
	op, err := t.RecordOperation(ctx, mcptask.Operation{Object: "service/" + in.Service, ObjectVersion: version,
		Effect: "roll out " + target + " to production"})
	if err != nil {
		return nil, out, err
	}
	progress(ctx, fmt.Sprintf("rolling out %s", target))
	if op != nil {
		if err := op.Submitted(ctx, "rollout-"+t.ID()[:12]); err != nil {
			return nil, out, err
		}
	}
	if err := sleep(ctx, time.Duration(delay)*time.Millisecond); err != nil {
		return nil, out, err
	}
	if op != nil {
		if err := op.Confirmed(ctx, "rolled out"); err != nil {
			return nil, out, err
		}
	}
	out.Deployed = true
	progress(ctx, fmt.Sprintf("done: %s deployed", target))
	return text(fmt.Sprintf("Deployed %s to production.", target)), out, nil
}

type migrationArgs struct {
	Migration   string `json:"migration,omitempty" jsonschema:"the migration's name (default 0042_add_orders_index)"`
	Steps       int    `json:"steps,omitempty" jsonschema:"how many steps the migration has (1 to 10000; default 3)"`
	FailAtStep  int    `json:"fail_at_step,omitempty" jsonschema:"the step that fails (default 2, at most steps)"`
	StepDelayMs *int   `json:"step_delay_ms,omitempty" jsonschema:"duration of each step in milliseconds (0 to 60000; default 300)"`
}

func flakyMigration(ctx context.Context, _ *mcp.CallToolRequest, in migrationArgs) (*mcp.CallToolResult, any, error) {
	name := orDefault(in.Migration, "0042_add_orders_index")
	steps := orDefault(in.Steps, 3)
	failAt := orDefault(in.FailAtStep, 2)
	delay := 300
	if in.StepDelayMs != nil {
		delay = *in.StepDelayMs
	}
	switch {
	case steps < 1 || steps > maxSteps:
		return nil, nil, fmt.Errorf("steps must be between 1 and %d, got %d", maxSteps, steps)
	case delay < 0 || delay > maxStepDelay:
		return nil, nil, fmt.Errorf("step_delay_ms must be between 0 and %d, got %d", maxStepDelay, delay)
	}
	failAt = max(1, min(failAt, steps))
	for k := 1; k <= failAt; k++ {
		progress(ctx, fmt.Sprintf("migration %s: applying step %d of %d", name, k, steps))
		if err := sleep(ctx, time.Duration(delay)*time.Millisecond); err != nil {
			return nil, nil, err
		}
	}
	data, _ := json.Marshal(map[string]any{"migration": name, "failedStep": failAt, "steps": steps, "rolledBack": true})
	return nil, nil, &jsonrpc.Error{
		Code:    jsonrpc.CodeInternalError,
		Message: fmt.Sprintf("migration %s failed at step %d of %d: lock wait timeout on table \"orders\"; the migration was rolled back", name, failAt, steps),
		Data:    data,
	}
}
