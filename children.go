package mcptask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/internal/tracing"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SpawnOptions are the options of [Task.Spawn]; the zero value is
// usable.
type SpawnOptions struct {
	// Step names the child among the task's children, stable across
	// re-runs of the task's work: a re-run after a crash that spawns the
	// same step finds the child it started before (running, or finished
	// with its result) instead of starting it again. "" means the tool's
	// name (one child per tool). At most 128 printable characters.
	Step string
	// Approval, if set, holds the child until an approver approves it,
	// as ToolOptions.Approval holds every task of a tool (the child is
	// listed with the approvals, decided by the same means, and fails if
	// denied or expired).
	Approval *Approval
}

// Spawn starts a child task: a call of tool (any task tool of this
// server: a Go tool, an upstream's, a command, an HTTP job) with args
// (marshalled as JSON; nil for none), made as a task for this task's
// requester, linked to this task (tasks/get shows the child's parent
// and the parent's children under io.mcptask/), and cancelled with it.
// The call takes the server's full path: the tool's argument schema, the
// fleet's switches and approval gates, the requester's cap on unfinished
// tasks, and the tree limits (Limits.MaxChildDepth, MaxChildren,
// MaxTreeTasks) apply; a child refused is a *[SpawnError] (or the
// refusal's JSON-RPC error). The child is durable before Spawn returns.
//
// Spawning is idempotent by step (see SpawnOptions.Step): the work of a
// task re-run after a crash finds the children it started, so that a
// finished step never runs again, provided the step's call is the same
// (a step spawned again with other arguments is refused). Wait for a
// child with [Child.Wait]; children run concurrently with their parent
// and each other.
func (t *Task) Spawn(ctx context.Context, tool string, args any, opts *SpawnOptions) (*Child, error) {
	var o SpawnOptions
	if opts != nil {
		o = *opts
	}
	if o.Step == "" {
		o.Step = tool
	}
	var raw json.RawMessage
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, fmt.Errorf("mcptask: Spawn: encoding the arguments: %w", err)
		}
		raw = b
	}
	meta := map[string]any{}
	// The child's runs are traced under this run (a re-run after a
	// restart too, from its stored call).
	tracing.ToMeta(ctx, meta)
	spec := engine.SpawnSpec{Step: o.Step, Tool: tool, Arguments: raw, Meta: meta}
	if a := o.Approval; a != nil {
		if len(a.Approvers) == 0 {
			return nil, &SpawnError{Step: o.Step, Tool: tool, Reason: "an approval needs at least one approver"}
		}
		meta[wire.MetaStepApproval] = stepApproval{Approvers: a.Approvers, Expires: a.expires().String(), Reason: a.Reason, SelfApproval: a.SelfApproval}
		spec.Gate, spec.GateMessage = adapter.GateApproval, a.message(t.h.Now())
	}
	c, err := t.h.Spawn(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &Child{parent: t, id: c.ID, step: o.Step, tool: tool, created: c.CreatedAt}, nil
}

// SpawnError is why [Task.Spawn] started no child: a bad step name, a
// tool that does not run as a task here, arguments its schema refuses, a
// step spawned again with another call, or a tree limit (Limit names it:
// "depth", "children" or "tree").
type SpawnError = adapter.SpawnError

// stepApproval is a child's own approval as its stored call keeps it
// (wire.MetaStepApproval).
type stepApproval struct {
	Approvers    []string `json:"approvers"`
	Expires      string   `json:"expires"`
	Reason       string   `json:"reason,omitempty"`
	SelfApproval bool     `json:"selfApproval,omitempty"`
}

// childApproval returns the approval a child's stored call holds it for
// (a workflow's approval step), nil for none or a task that is no child.
func childApproval(t *task.Task) *Approval {
	if t.Parent == "" || len(t.Request) == 0 {
		return nil
	}
	var call struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(t.Request, &call) != nil || call.Meta[wire.MetaStepApproval] == nil {
		return nil
	}
	var sa stepApproval
	if json.Unmarshal(call.Meta[wire.MetaStepApproval], &sa) != nil {
		return nil
	}
	d, _ := time.ParseDuration(sa.Expires)
	return &Approval{Approvers: sa.Approvers, Expires: d, Reason: sa.Reason, SelfApproval: sa.SelfApproval}
}

// Child is a child task started by [Task.Spawn].
type Child struct {
	parent     *Task
	id         task.ID
	step, tool string
	created    time.Time
}

// CreatedAt returns when the child was created (by this run of the
// parent's work or an earlier one): a deadline on a step measured from
// it holds across re-runs.
func (c *Child) CreatedAt() time.Time { return c.created }

// Cancel cancels the child (and its own children), as its requester
// would; a child that has ended already is left as it is.
func (c *Child) Cancel(ctx context.Context) error {
	_, err := c.parent.h.CancelChild(ctx, c.id)
	var te *engine.TerminalError
	if errors.As(err, &te) {
		return nil
	}
	return err
}

// ID returns the child's task ID.
func (c *Child) ID() string { return string(c.id) }

// Step returns the child's step name.
func (c *Child) Step() string { return c.step }

// Wait waits until the child has ended and returns its result. Meanwhile
// a question the child asks (input_required: an elicitation, a sampling
// request) is asked of the requester through the parent task, which shows
// input_required with it, and the answer goes to the child. A child that
// completed returns its result, a tool error too (IsError set); one that
// failed or was cancelled returns a *[ChildError]. When ctx ends first
// (the parent cancelled, the server shutting down), Wait returns ctx's
// error and the child goes on: a re-run of the parent finds it.
func (c *Child) Wait(ctx context.Context) (*mcp.CallToolResult, error) {
	t, err := c.parent.h.AwaitChild(ctx, c.id)
	if err != nil {
		return nil, err
	}
	return c.outcome(t)
}

// Result returns the child's result now: as Wait does for a child that
// has ended, a *[ChildError] whose Status is working or input_required
// for one that has not.
func (c *Child) Result(ctx context.Context) (*mcp.CallToolResult, error) {
	t, err := c.parent.h.Child(ctx, c.id)
	if err != nil {
		return nil, err
	}
	return c.outcome(t)
}

func (c *Child) outcome(t *task.Task) (*mcp.CallToolResult, error) {
	switch t.Status {
	case task.Completed:
		var res mcp.CallToolResult
		if err := json.Unmarshal(t.Result, &res); err != nil {
			return nil, fmt.Errorf("mcptask: the result of child %s is not a tool result: %w", t.ID, err)
		}
		return &res, nil
	case task.Failed:
		e := &ChildError{ID: string(t.ID), Step: c.step, Tool: c.tool, Status: string(t.Status), Message: t.StatusMessage}
		if t.Error != nil {
			e.Code, e.Message = t.Error.Code, t.Error.Message
		}
		return nil, e
	default:
		msg := t.StatusMessage
		if !t.Status.Terminal() && msg == "" {
			msg = "it has not finished"
		}
		return nil, &ChildError{ID: string(t.ID), Step: c.step, Tool: c.tool, Status: string(t.Status), Message: msg}
	}
}

// ChildError is a child that did not complete: it failed (Code and
// Message are its error), was cancelled, or (from [Child.Result]) has
// not finished yet.
type ChildError struct {
	// ID, Step and Tool name the child.
	ID, Step, Tool string
	// Status is the child's status: failed, cancelled, working or
	// input_required.
	Status string
	// Code is the JSON-RPC error code of a failed child, 0 otherwise.
	Code int64
	// Message says why.
	Message string
}

func (e *ChildError) Error() string {
	return fmt.Sprintf("step %q (task %s, tool %s) %s: %s", e.Step, e.ID, e.Tool, e.Status, e.Message)
}
