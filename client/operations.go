package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// OperationFilter selects the operations [Client.Operations] lists. Zero
// fields select everything.
type OperationFilter struct {
	// State, if set, selects the operations in that state only:
	// "intended", "submitted", "confirmed", "rejected" or "unknown".
	State string
	// TaskID, if set, selects the operations of that task only.
	TaskID string
}

// Operation is one domain operation on the server's ledger: what a task's
// work did (or meant to do) downstream, and what the system of record
// said of it, apart from the task's status.
type Operation struct {
	// Key is the operation's key on the ledger.
	Key string
	// TaskID is the task whose work recorded it (it may have expired or
	// been deleted since).
	TaskID string
	// Tool is the task's tool.
	Tool string
	// State is intended, submitted, confirmed, rejected or unknown.
	State string
	// Effect is the short description of the intended effect.
	Effect string
	// Object and ObjectVersion name what the effect acts on, if known.
	Object, ObjectVersion string
	// Receipt is the downstream system's reference, once submitted.
	Receipt string
	// Detail is what the last change said.
	Detail string
	// CreatedAt and UpdatedAt are when it was recorded and last changed;
	// ReconciledAt when a reconciliation last asked the system of record
	// (zero if never).
	CreatedAt, UpdatedAt, ReconciledAt time.Time
}

// maxOperationPages bounds the pages [Client.Operations] reads.
const maxOperationPages = 100

// ErrTooManyOperations is returned (with the operations read) by
// [Client.Operations] when the listing has more pages than it reads.
var ErrTooManyOperations = errors.New("client: more operations than one listing reads; narrow it with a state or a task")

// Operations lists the requester's own operations on the server's ledger
// that f selects, newest first (mcptask's io.mcptask/operations/list, on
// both wires), reading every page up to a bound (past it, what was read
// and ErrTooManyOperations). A server that does not serve the method (no
// ledger, not mcptask, or a wire without tasks) gives ErrUnsupported.
func (c *Client) Operations(ctx context.Context, f OperationFilter) ([]Operation, error) {
	return c.impl.operations(ctx, f)
}

// unknownEffects returns an *UnknownEffectError when the requester has an
// operation of tool in state unknown on the server's ledger, or of the
// tool a job tool's call (PREFIXstart {"tool": T}) would start. A server
// without a ledger (or a session without tasks) is remembered, not asked
// again. A listing that fails otherwise (a rate limit, a server or network
// error, more pages than a listing reads) refuses the call too, with the
// error: the check fails closed.
func (c *clientImpl) unknownEffects(ctx context.Context, tool string, args any) error {
	if !c.opsAdvertised || c.noLedger.Load() {
		return nil // a server that did not offer it is never sent the request
	}
	if job := jobTool(tool, args); job != "" {
		tool = job
	}
	ops, err := c.operations(ctx, OperationFilter{State: string(task.OpUnknown)})
	if errors.Is(err, ErrUnsupported) {
		c.noLedger.Store(true)
		return nil
	}
	var mine []Operation
	for _, o := range ops {
		if o.Tool == tool {
			mine = append(mine, o)
		}
	}
	switch {
	case len(mine) > 0:
		return &UnknownEffectError{Tool: tool, Operations: mine}
	case err != nil:
		return &UnknownEffectError{Tool: tool, Err: err}
	}
	return nil
}

// jobTool returns the tool a call of name with args starts as a job, when
// it is the start tool of a job API (mcptask's PREFIXstart, whose
// arguments name the tool: {"tool": T, "arguments": {...}}), else "".
// The job's task, and the operations its work records, are T's.
func jobTool(name string, args any) string {
	if !strings.HasSuffix(name, jobStart) || args == nil {
		return ""
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return ""
	}
	var in struct {
		Tool string `json:"tool"`
	}
	if json.Unmarshal(raw, &in) != nil {
		return ""
	}
	return in.Tool
}

func (c *clientImpl) operations(ctx context.Context, f OperationFilter) ([]Operation, error) {
	if _, none := c.tw.(wireNone); none {
		return nil, fmt.Errorf("%s: the session has no tasks: %w", wire.MethodOperationsList, ErrUnsupported)
	}
	var out []Operation
	p := &taskParams{State: f.State, TaskID: f.TaskID}
	for range maxOperationPages {
		var raw json.RawMessage
		err := c.paced(ctx, wire.MethodOperationsList, func() (err error) {
			raw, err = c.custom(ctx, wire.MethodOperationsList, p)
			return err
		})
		if err != nil {
			if we, ok := rpcError(err); ok && we.Code == jsonrpc.CodeMethodNotFound {
				return nil, fmt.Errorf("%s: %s: %w", wire.MethodOperationsList, we.Message, ErrUnsupported)
			}
			return nil, fmt.Errorf("%s: %w", wire.MethodOperationsList, err)
		}
		var page wire.ListOperationsResult
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("%s: unreadable answer: %w", wire.MethodOperationsList, err)
		}
		for _, o := range page.Operations {
			out = append(out, listedOf(o))
		}
		if page.NextCursor == "" {
			return out, nil
		}
		p.Cursor = page.NextCursor
	}
	return out, ErrTooManyOperations
}

// unknownEffectOf returns the *UnknownEffectError of a call of name (with
// args) that the server refused for an unknown effect
// (wire.CodeUnknownEffect), nil for any other outcome.
func unknownEffectOf(name string, args any, err error) *UnknownEffectError {
	we, ok := rpcError(err)
	if !ok || we.Code != wire.CodeUnknownEffect {
		return nil
	}
	var data struct {
		Tool       string                 `json:"tool"`
		Operations []wire.ListedOperation `json:"operations"`
	}
	_ = json.Unmarshal(we.Data, &data)
	tool := data.Tool
	if tool == "" {
		if tool = jobTool(name, args); tool == "" {
			tool = name
		}
	}
	e := &UnknownEffectError{Tool: tool}
	for _, o := range data.Operations {
		e.Operations = append(e.Operations, listedOf(o))
	}
	if len(e.Operations) == 0 {
		e.Err = errors.New(we.Message)
	}
	return e
}

// listedOf is the Operation of a listed one (operations/list, or a
// call refused for an unknown effect).
func listedOf(o wire.ListedOperation) Operation {
	return Operation{
		Key: o.Key, TaskID: o.TaskID, Tool: o.Tool, State: o.State, Effect: o.Effect,
		Object: o.Object, ObjectVersion: o.ObjectVersion, Receipt: o.Receipt, Detail: o.Detail,
		CreatedAt: parseTime(o.CreatedAt), UpdatedAt: parseTime(o.UpdatedAt), ReconciledAt: parseTime(o.ReconciledAt),
	}
}
