package adapter

import (
	"context"
	"time"

	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
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
		c.Log().Warn("reading the task's latest operation for tasks/get", "task", t.ID, "err", err)
		return meta
	}
	if op == nil {
		return meta
	}
	v := wire.Operation{Key: op.Key, State: string(op.State), Receipt: op.Receipt, Effect: op.Effect}
	if !op.ReconciledAt.IsZero() {
		v.ReconciledAt = op.ReconciledAt.UTC().Format(time.RFC3339Nano)
	}
	if meta == nil {
		meta = mcp.Meta{}
	}
	meta[wire.MetaOperation] = v
	return meta
}
