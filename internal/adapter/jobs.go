package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
)

// JobWire is the Wire recorded for tasks created through the job tools
// (see [Core.StartJob]).
const JobWire = "jobs"

// StartJob creates a task running the tool name with args for the
// requester of req (a call of a job tool, an ordinary tool), as a
// task-augmented call of that tool would: under the drain switch, the
// limits and the idempotency key (key, "" for none), with the arguments
// checked against the tool's input schema first. Arguments the schema
// rejects get that tool error as res, and no task. The tool must support
// tasks (Optional or Required). Its work runs the tool through the
// server's full request path, attached to the task, as a re-run does; a
// crash resolves it by the tool's recovery policy.
func (c *Core) StartJob(ctx context.Context, req mcp.Request, name string, args json.RawMessage, key string) (t *task.Task, res *mcp.CallToolResult, err error) {
	if name == "" {
		return nil, nil, InvalidParams("name the tool to start")
	}
	p := c.Tool(name)
	if p.Support == Forbidden {
		return nil, nil, InvalidParams(fmt.Sprintf("there is no tool %q that runs as a task (a tool that does not support tasks is called directly)", name))
	}
	if key != "" {
		if key, err = IdempotencyKey(map[string]any{wire.MetaIdempotencyKey: key}); err != nil {
			return nil, nil, err
		}
	}
	params := &mcp.CallToolParamsRaw{Name: name, Arguments: args}
	if res := c.RejectedArguments(params, p); res != nil {
		return nil, res, nil
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, nil, InvalidParams("cannot encode the call: " + err.Error())
	}
	// Traced in the trace of the job tool's call (its _meta); the stored
	// call has no _meta, so a re-run after a restart starts a new trace.
	meta := MetaOf(req)
	corr, err := c.Correlation(meta)
	if err != nil {
		return nil, nil, err
	}
	ctx, span := c.startCreate(ctx, meta, name, JobWire)
	t, err = c.create(ctx, creation{via: viaJobs, owner: c.Requester(ctx, req), tool: name, p: p, request: raw, version: JobWire, key: key, corr: corr,
		work: c.traced(meta, name, firstAttempt, c.storedCallWork(raw))})
	endCreate(span, t, err)
	return t, nil, err
}

// RunAgain creates a new task that makes the call of the finished task t
// again for t's owner, as an operator's re-run: the same tool, arguments
// and wire, the idempotency key key (the same key makes a resubmitted
// re-run return the task it made), no _meta of the old call (a new
// trace, no host correlation), under the drain switch and the limits, its
// work running the tool through the server's full request path as a
// re-run does. A task that has not ended, a tool that does not run as a
// task, and a task with an operation not settled on the ledger (intended,
// submitted or unknown: reconcile it first, or running the call again may
// repeat its effect) are refused with a *RunAgainError.
func (c *Core) RunAgain(ctx context.Context, t *task.Task, key string) (*task.Task, error) {
	if !t.Status.Terminal() {
		return nil, &RunAgainError{Reason: "it has not ended"}
	}
	p := c.Tool(t.Tool)
	if p.Support == Forbidden {
		return nil, &RunAgainError{Reason: fmt.Sprintf("the tool %q is not a task tool of this server (any more)", t.Tool)}
	}
	// Every operation the task recorded must be settled (confirmed or
	// rejected): one intended, submitted or unknown may have had its
	// effect, which running the call again could repeat.
	q := store.OperationQuery{TaskID: t.ID, Limit: store.MaxOperationLimit}
	for {
		ops, next, err := c.eng.Operations(ctx, t.Owner, q)
		if err != nil {
			return nil, err
		}
		for _, o := range ops {
			if !o.State.Settled() {
				return nil, &RunAgainError{Reason: "its effect is not settled on the ledger (operation " + o.Key + " is " + string(o.State) +
					"): reconcile it first, or the call may repeat its effect"}
			}
		}
		if next == "" {
			break
		}
		q.Cursor = next
	}
	var stored mcp.CallToolParamsRaw
	if err := json.Unmarshal(t.Request, &stored); err != nil {
		return nil, &RunAgainError{Reason: "its call is not stored whole"}
	}
	raw, err := json.Marshal(&mcp.CallToolParamsRaw{Name: t.Tool, Arguments: stored.Arguments})
	if err != nil {
		return nil, err
	}
	ttl := t.TTL
	nt, err := c.create(ctx, creation{via: viaCall, owner: t.Owner, tool: t.Tool, p: p, request: raw, version: t.Wire, ttl: &ttl, key: key,
		work: c.traced(nil, t.Tool, firstAttempt, c.storedCallWork(raw))})
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return nil, &RunAgainError{Reason: je.Message}
	}
	return nt, err
}

// RunAgainError is why [Core.RunAgain] refused to run a task's call
// again.
type RunAgainError struct{ Reason string }

func (e *RunAgainError) Error() string { return "the call cannot be run again: " + e.Reason }

// storedCallWork is the work of a task created to make the call raw (a
// job's, a re-run's): the call through the server's full request path,
// attached to the task, as a re-run after a crash makes it.
func (c *Core) storedCallWork(raw json.RawMessage) engine.Work {
	return func(ctx context.Context) (json.RawMessage, error) {
		h := engine.FromContext(ctx)
		if h == nil {
			return nil, &task.Error{Code: task.CodeInternalError, Message: "the work runs without its task"}
		}
		c.runSpans.Store(h.TaskID(), trace.SpanFromContext(ctx))
		defer c.runSpans.Delete(h.TaskID())
		return c.rerun(ctx, &task.Task{ID: h.TaskID(), Request: raw})
	}
}
