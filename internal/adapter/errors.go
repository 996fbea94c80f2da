package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/rollout"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// EngineError translates an engine error of owner's request for the task
// id by method into a JSON-RPC error. A task the requester may not see,
// whatever the reason, is answered as an unknown task; the audit trail
// gets the reason.
func (c *Core) EngineError(ctx context.Context, method string, owner task.Owner, id task.ID, err error) error {
	var (
		term    *engine.TerminalError
		refused *engine.CancelRefusedError
	)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		c.auditDenied(ctx, method, owner, id, err)
		return InvalidParams(fmt.Sprintf("task %q not found: it does not exist or has expired", id))
	case errors.As(err, &term):
		return InvalidParams(fmt.Sprintf("task %q is already %s", id, term.Status))
	case errors.As(err, &refused):
		data, _ := json.Marshal(map[string]any{"reason": wire.ReasonCancelRefused, "detail": refused.Reason})
		return &jsonrpc.Error{Code: wire.CodeCancelRefused, Message: fmt.Sprintf("task %q was not cancelled: %s; it goes on", id, refused.Reason), Data: data}
	case errors.Is(err, engine.ErrClosed):
		return InternalError("the server is shutting down")
	case abandoned(ctx, err):
		c.log.Debug("request abandoned by its client before its task was read", "task", id, "method", method, "err", err)
		return InternalError("the request was cancelled")
	}
	if c.eng.Transient(err) {
		c.log.Warn("task store briefly unavailable", "task", id, "method", method, "err", err)
		return StoreUnavailable()
	}
	c.log.Error("task operation failed", "task", id, "err", err)
	return InternalError("internal error while accessing the task")
}

// abandoned reports whether err is only that ctx, a request's context,
// is done: its client gave up (closed its connection, cancelled it) and
// no one reads the answer. Such a failure is no fault of the server's and
// is not logged as one: after a pause (a SIGSTOP, a long GC), every
// request its clients gave up on meanwhile fails so at once, and each
// logged an ERROR line (issue 25, L11).
func abandoned(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, ctx.Err())
}

// storeRetryAfter is the pause a client is asked to make after a
// StoreUnavailable error.
const storeRetryAfter = time.Second

// StoreUnavailable is the error of a request the task store could not
// serve just now (see wire.CodeUnavailable).
func StoreUnavailable() error {
	data, _ := json.Marshal(map[string]any{"reason": wire.ReasonStoreUnavailable, "retryAfterMs": storeRetryAfter.Milliseconds()})
	return &jsonrpc.Error{Code: wire.CodeUnavailable, Message: "the task store is briefly unavailable; try again shortly (the tasks are not affected)", Data: data}
}

// auditDenied records a request for a task the requester may not see.
func (c *Core) auditDenied(ctx context.Context, method string, owner task.Owner, id task.ID, err error) {
	var nf *engine.NotFoundError
	if errors.As(err, &nf) {
		c.eng.Audit().Denied(ctx, audit.Denial{Requester: owner, Task: string(id), Op: method, Reason: nf.Reason, Owner: nf.Owner, Tool: nf.Tool})
		c.eng.Observer().Denied(nf.Reason)
	}
}

// AuditOutcome records that owner was given a finished task's outcome.
func (c *Core) AuditOutcome(ctx context.Context, method string, owner task.Owner, t *task.Task) {
	if t.Status == task.Completed || t.Status == task.Failed {
		c.eng.Audit().ResultRetrieved(ctx, owner, audit.TaskOf(t), string(t.Status), method)
	}
}

// TaskError is the JSON-RPC error of a failed task.
func TaskError(t *task.Task) *jsonrpc.Error {
	e := t.Error
	if e == nil {
		e = &task.Error{Code: task.CodeInternalError, Message: "the task failed"}
	}
	return &jsonrpc.Error{Code: e.Code, Message: e.Message, Data: e.Data}
}

// NotServed is the error of a task-augmented call of tool that the
// fleet's switches do not serve as a task (decision d): data names the
// reason (wire.ReasonDraining, "canary", "rollback") and the fallback
// (for jobs, the job tools to use instead).
func NotServed(tool string, d rollout.Decision) error {
	data := map[string]any{"reason": string(d.Why), "tool": tool, "fallback": string(d.Fallback)}
	why := "it is draining"
	switch d.Why {
	case rollout.NotCanary:
		why = "it is in a canary that does not include you"
	case rollout.RolledBack:
		why = "it was rolled back"
	}
	hint := "try again later or elsewhere"
	if d.Fallback == rollout.Jobs && d.Why != rollout.Draining {
		hint = "start it with the job tools instead (the tool named like job_start, with {\"tool\": \"" + tool + "\"})"
	}
	b, _ := json.Marshal(data)
	return &jsonrpc.Error{Code: wire.CodeUnavailable, Message: fmt.Sprintf("the server accepts no new tasks of %s now (%s); existing tasks are not affected: %s", tool, why, hint), Data: b}
}

// DeleteTask deletes owner's finished task id (the tasks/delete of either
// wire) and returns nil, or the JSON-RPC error to answer: a task that has
// not ended is refused with wire.CodeTaskNotTerminal (data: reason
// wire.ReasonNotTerminal, status), saying to cancel it first; a task the
// requester may not see is answered as an unknown task, as by tasks/get.
func (c *Core) DeleteTask(ctx context.Context, method string, owner task.Owner, id task.ID) error {
	_, err := c.eng.Delete(ctx, owner, id)
	var nt *engine.NotTerminalError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nt) && nt.Parent != "":
		data, _ := json.Marshal(map[string]any{"reason": wire.ReasonNotTerminal, "status": string(nt.Status), "parentTaskId": string(nt.Parent)})
		return &jsonrpc.Error{Code: wire.CodeTaskNotTerminal, Data: data,
			Message: fmt.Sprintf("task %q is a step of task %q, which is %s: a step is deleted once its parent has ended", id, nt.Parent, nt.Status)}
	case errors.As(err, &nt):
		data, _ := json.Marshal(map[string]any{"reason": wire.ReasonNotTerminal, "status": string(nt.Status)})
		return &jsonrpc.Error{Code: wire.CodeTaskNotTerminal, Data: data,
			Message: fmt.Sprintf("task %q is %s: only a finished task can be deleted; cancel it first (%s), then delete it", id, nt.Status, wire.MethodTasksCancel)}
	}
	return c.EngineError(ctx, method, owner, id, err)
}
