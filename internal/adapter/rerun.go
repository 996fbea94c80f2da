package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/tracing"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
)

// Recover is the engine's recovery policy: a task of a tool declared
// Rerunnable is run again, and so is a task of a tool declared Reattach
// whose work recorded an external reference (its handler then re-attaches
// to that work, see mcptask.ToolOptions.Reattach); any other task is
// failed by the engine.
func (c *Core) Recover(_ context.Context, t *task.Task) engine.Work {
	p := c.Tool(t.Tool)
	if len(t.Request) == 0 || !(p.Rerunnable || (p.Reattach && t.ExternalRef != "")) {
		return nil
	}
	return c.rerunWork(t)
}

// WorkOf is the engine's way to start a task that waited in its
// concurrency queue: the task's stored call, made through the server's
// full path as a re-run is.
func (c *Core) WorkOf(_ context.Context, t *task.Task) engine.Work {
	if len(t.Request) == 0 {
		return nil
	}
	return c.rerunWork(t)
}

// rerunWork is the work of a re-run of t, traced as a run attempt
// parented on the trace context of t's stored call.
func (c *Core) rerunWork(t *task.Task) engine.Work {
	var stored struct {
		Meta map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(t.Request, &stored) // rerun reports a stored call that does not decode
	return c.traced(stored.Meta, t.Tool, c.attemptOf(t), func(ctx context.Context) (json.RawMessage, error) {
		// The handler, reached through an in-memory session, runs in
		// this attempt's span (see RunAttached).
		c.runSpans.Store(t.ID, trace.SpanFromContext(ctx))
		defer c.runSpans.Delete(t.ID)
		return c.rerun(ctx, t)
	})
}

// rerun calls the task's tool again through an in-memory client session, so
// the call takes the server's full path (argument validation, typed
// handlers, middleware) and the handler runs attached to the existing task
// (see [Core.RunAttached]).
func (c *Core) rerun(ctx context.Context, t *task.Task) (json.RawMessage, error) {
	var params mcp.CallToolParamsRaw
	if err := json.Unmarshal(t.Request, &params); err != nil {
		return nil, &task.Error{Code: task.CodeInternalError, Message: "cannot decode the stored call to re-run it: " + err.Error()}
	}
	// The stored call's _meta goes with it (a tool may read it), but the
	// keys that made it a task, and the re-run's own key.
	meta := mcp.Meta{}
	for k, v := range params.Meta {
		switch k {
		case wire.MetaIdempotencyKey, wire.MetaSEP1686Task, wire.MetaTaskParam, wire.MetaRerun, wire.MetaStepApproval:
		default:
			meta[k] = v
		}
	}
	// The tool reads the trace context of this run attempt in its _meta.
	tracing.ToMeta(ctx, meta)
	if c.direct != nil {
		// The work's context is the task's already (its handle, its
		// cancellation, this attempt's span).
		p := &mcp.CallToolParamsRaw{Meta: meta, Name: params.Name, Arguments: params.Arguments}
		called := true
		out, err := toolWork(func(ctx context.Context, _ string, _ mcp.Request) (mcp.Result, error) {
			res, err, ok := c.direct(ctx, p)
			called = ok
			return res, err
		}, wire.MethodToolsCall, nil)(ctx)
		if called {
			return out, err
		}
	}
	meta[wire.MetaRerun] = c.nonce + ":" + string(t.ID)
	ss, cs, err := connectInMemory(ctx, c.srv, "mcptask-rerun")
	if err != nil {
		return nil, err
	}
	defer ss.Close()
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: params.Name, Arguments: params.Arguments})
	if err != nil {
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			return nil, &task.Error{Code: je.Code, Message: je.Message, Data: je.Data}
		}
		return nil, err
	}
	if m := res.GetMeta(); m != nil {
		delete(m, "io.modelcontextprotocol/serverInfo")
		if len(m) == 0 {
			res.SetMeta(nil)
		}
	}
	return resultJSON(res)
}

// RunAttached answers a tools/call that is an in-process re-run of a task
// (its _meta carries wire.MetaRerun with this process's nonce): the tool
// runs attached to that task. ok is false for any other call, which the
// caller answers on its wire.
func (c *Core) RunAttached(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request) (_ mcp.Result, _ error, ok bool) {
	v, _ := MetaOf(req)[wire.MetaRerun].(string)
	nonce, id, found := strings.Cut(v, ":")
	if !found || nonce != c.nonce {
		return nil, nil, false
	}
	actx, cancel, attached := c.eng.Attach(ctx, task.ID(id))
	defer cancel()
	if !attached {
		return nil, InvalidParams("no re-run of that task is in progress"), true
	}
	if span, ok := c.runSpans.Load(task.ID(id)); ok {
		actx = trace.ContextWithSpan(actx, span.(trace.Span))
	}
	res, err := next(actx, method, req)
	return res, err, true
}
