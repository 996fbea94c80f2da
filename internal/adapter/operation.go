package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// WithOperation returns meta with the task's latest operation on the
// ledger under wire.MetaOperation (see wire.Operation), for the answers
// of tasks/get of both wires: meta itself when the task recorded none or
// the ledger cannot be read (logged: the task's own answer must not fail
// for its evidence).
func (c *Core) WithOperation(ctx context.Context, t *task.Task, meta mcp.Meta) mcp.Meta {
	op, err := c.eng.LatestOperation(ctx, t.ID)
	if err != nil {
		if !abandoned(ctx, err) {
			c.Log().Warn("reading the task's latest operation for tasks/get", "task", t.ID, "err", err)
		}
		return meta
	}
	return WithOperationOf(op, meta)
}

// WithOperationOf returns meta with op, a task's latest operation already
// read (e.g. by engine.Engine.View), under wire.MetaOperation, as
// [Core.WithOperation] does: meta itself when op is nil.
func WithOperationOf(op *task.Operation, meta mcp.Meta) mcp.Meta {
	if op == nil {
		return meta
	}
	v := wireOperation(op)
	if meta == nil {
		meta = mcp.Meta{}
	}
	meta[wire.MetaOperation] = v
	return meta
}

// wireOperation is op's wire.Operation.
func wireOperation(op *task.Operation) wire.Operation {
	v := wire.Operation{Key: op.Key, State: string(op.State), Receipt: op.Receipt, Effect: op.Effect}
	if !op.ReconciledAt.IsZero() {
		v.ReconciledAt = op.ReconciledAt.UTC().Format(time.RFC3339Nano)
	}
	return v
}

// OperationsPageSize is the number of operations of one
// wire.MethodOperationsList page.
const OperationsPageSize = 100

// ListOperations answers wire.MethodOperationsList for owner on either
// wire: a page of owner's own operations (never another requester's),
// newest first. An invalid state, task ID or cursor is invalid params.
func (c *Core) ListOperations(ctx context.Context, method string, owner task.Owner, p wire.ListOperationsParams) (*wire.ListOperationsResult, error) {
	q := store.OperationQuery{State: task.OpState(p.State), Cursor: p.Cursor, Limit: OperationsPageSize}
	if p.State != "" && !q.State.Valid() {
		return nil, InvalidParams(fmt.Sprintf("invalid state %q: give one of intended, submitted, confirmed, rejected, unknown", p.State))
	}
	if p.TaskID != "" {
		id, err := ParseID(p.TaskID)
		if err != nil {
			return nil, err
		}
		q.TaskID = id
	}
	ops, next, err := c.eng.Operations(ctx, owner, q)
	switch {
	case errors.Is(err, store.ErrBadCursor):
		return nil, InvalidParams("invalid cursor: pass the nextCursor of a previous " + method + " unchanged, with the same state and taskId")
	case err != nil:
		if c.eng.Transient(err) {
			c.log.Warn("task store briefly unavailable", "method", method, "err", err)
			return nil, StoreUnavailable()
		}
		c.log.Error("listing operations", "err", err)
		return nil, InternalError("internal error while listing operations")
	}
	res := &wire.ListOperationsResult{Operations: make([]wire.ListedOperation, 0, len(ops)), NextCursor: next}
	for _, op := range ops {
		res.Operations = append(res.Operations, listedOperation(op))
	}
	return res, nil
}

// listedOperation is op as wire.MethodOperationsList lists it.
func listedOperation(op *task.Operation) wire.ListedOperation {
	return wire.ListedOperation{
		Operation:     wireOperation(op),
		TaskID:        string(op.TaskID),
		Tool:          op.Tool,
		Object:        op.Object,
		ObjectVersion: op.ObjectVersion,
		Detail:        op.Detail,
		Correlation:   op.Correlation,
		CreatedAt:     task.FormatTime(op.CreatedAt),
		UpdatedAt:     task.FormatTime(op.UpdatedAt),
	}
}

// ListOperationsParams are the params of wire.MethodOperationsList as the
// go-sdk decodes them.
type ListOperationsParams struct {
	mcp.ParamsBase
	wire.ListOperationsParams
}

// OperationsResult is the answer of wire.MethodOperationsList on either
// wire (ResultType is set on 2026-07-28 only).
type OperationsResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType,omitempty"`
	wire.ListOperationsResult
}

// ServeListOperations decodes r's params and answers
// wire.MethodOperationsList for owner with resultType (or none).
func (c *Core) ServeListOperations(ctx context.Context, r *Request, owner task.Owner, resultType string) (mcp.Result, error) {
	var p ListOperationsParams
	if err := r.Decode(&p); err != nil {
		return nil, err
	}
	res, err := c.ListOperations(ctx, r.Method, owner, p.ListOperationsParams)
	if err != nil {
		return nil, err
	}
	return &OperationsResult{ResultType: resultType, ListOperationsResult: *res}, nil
}

// maxEffectPages bounds the pages of unknown operations RefuseUnknownEffects reads.
const maxEffectPages = 10

// RefuseUnknownEffects answers a tools/call of toolOf(req) whose _meta asks for
// it (wire.MetaRefuseUnknownEffects): a wire.CodeUnknownEffect error
// listing owner's operations of tool in state unknown, when there are
// some; nil when there are none, when the call does not ask, or when it
// is the retry of a call that created its task already (its idempotency
// key names it). A ledger that cannot be read refuses the call (store
// unavailable, or an internal error): the check fails closed.
func (c *Core) RefuseUnknownEffects(ctx context.Context, req mcp.Request, toolOf func(mcp.Request) string) error {
	meta := MetaOf(req)
	if on, _ := meta[wire.MetaRefuseUnknownEffects].(bool); !on {
		return nil // (the tool is not even looked up)
	}
	tool := toolOf(req)
	owner := c.Requester(ctx, req)
	if key, err := IdempotencyKey(meta); err == nil && key != "" {
		if t, err := c.eng.Store().GetByKey(ctx, owner, key); err == nil && !t.Expired(c.eng.Now()) {
			return nil // the same call again: it finds its task
		}
	}
	var mine []wire.ListedOperation
	q := store.OperationQuery{State: task.OpUnknown, Limit: OperationsPageSize}
	for range maxEffectPages {
		ops, next, err := c.eng.Operations(ctx, owner, q)
		if err != nil {
			if c.eng.Transient(err) {
				return StoreUnavailable()
			}
			c.log.Error("listing operations to check a call's unknown effects", "tool", tool, "err", err)
			return InternalError("the server could not read its ledger to check the call's unknown effects")
		}
		for _, op := range ops {
			if op.Tool == tool {
				mine = append(mine, listedOperation(op))
			}
		}
		if next == "" {
			break
		}
		q.Cursor = next
	}
	if len(mine) == 0 {
		return nil
	}
	data, _ := json.Marshal(map[string]any{"tool": tool, "operations": mine})
	return &jsonrpc.Error{Code: wire.CodeUnknownEffect, Data: data, Message: fmt.Sprintf(
		"an earlier call of %s left its effect unknown (operation %q of task %s): reconcile it with the system of record before calling again; nothing was run", tool, mine[0].Key, mine[0].TaskID)}
}
