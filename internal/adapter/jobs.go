package adapter

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
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
	t, err = c.create(ctx, c.Requester(ctx, req), name, p, raw, JobWire, nil, key, corr, c.traced(meta, name, firstAttempt, func(ctx context.Context) (json.RawMessage, error) {
		h := engine.FromContext(ctx)
		if h == nil {
			return nil, &task.Error{Code: task.CodeInternalError, Message: "the job runs without its task"}
		}
		c.runSpans.Store(h.TaskID(), trace.SpanFromContext(ctx))
		defer c.runSpans.Delete(h.TaskID())
		return c.rerun(ctx, &task.Task{ID: h.TaskID(), Request: raw})
	}))
	endCreate(span, t, err)
	return t, nil, err
}
