package rowcodec

import (
	"fmt"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/cursor"
	"github.com/mcptask/mcptask/store/internal/jsoncol"
	"github.com/mcptask/mcptask/task"
)

// OperationFilter returns the conditions of the WHERE clause that selects
// what q asks of the operations table, each with ? placeholders in the
// order of args (a backend numbering its placeholders rewrites them), the
// position of q's cursor, signed by sig, included.
func OperationFilter(q store.OperationQuery, sig cursor.Signer) (conds []string, args []any, err error) {
	if q.Owner != "" {
		conds, args = append(conds, "owner = ?"), append(args, string(q.Owner))
	}
	if q.State != "" {
		conds, args = append(conds, "state = ?"), append(args, string(q.State))
	}
	if q.TaskID != "" {
		conds, args = append(conds, "task_id = ?"), append(args, string(q.TaskID))
	}
	if q.Cursor != "" {
		createdMS, key, err := sig.ParseAt(q.Scope(), q.Cursor)
		if err != nil {
			return nil, nil, err
		}
		conds, args = append(conds, "(created_at_ms, key) < (?, ?)"), append(args, createdMS, key)
	}
	return conds, args, nil
}

// OperationPage cuts ops, read with a limit of q.PageLimit()+1, to a page
// of q and returns the cursor of the next page ("" when none).
func OperationPage(q store.OperationQuery, sig cursor.Signer, ops []*task.Operation) ([]*task.Operation, string) {
	limit := q.PageLimit()
	if len(ops) <= limit {
		return ops, ""
	}
	ops = ops[:limit]
	last := ops[limit-1]
	return ops, sig.MakeAt(q.Scope(), last.CreatedAt.UnixMilli(), last.Key)
}

// RecordArgs checks op for RecordOperation and binds the values of the
// backends' opColumns, in order: a zero CreatedAt is now, a zero UpdatedAt
// the creation. o is op as normalized.
func RecordArgs(op *task.Operation, now time.Time, backend string) (o task.Operation, args []any, err error) {
	o = *op
	if err := o.Normalize(); err != nil {
		return o, nil, fmt.Errorf("%s: record operation: %w", backend, err)
	}
	if o.CreatedAt.IsZero() {
		o.CreatedAt = now.UTC()
	}
	if o.UpdatedAt.IsZero() {
		o.UpdatedAt = o.CreatedAt
	}
	corr, err := jsoncol.EncodeCorrelation(o.Correlation)
	if err != nil {
		return o, nil, fmt.Errorf("%s: record operation %q: %w", backend, o.Key, err)
	}
	return o, []any{o.Key, string(o.TaskID), o.Tool, string(o.Owner), o.Object, o.ObjectVersion, o.Effect,
		string(o.State), o.Receipt, o.Detail, o.CreatedAt.UnixMilli(), o.UpdatedAt.UnixMilli(), opMS(o.ReconciledAt), corr}, nil
}

// UpdateArgs checks o, as UpdateOperation's fn left the operation with
// key, and binds the parameters of the backends' update: task_id, tool,
// owner, object, object_version, effect, state, receipt, detail,
// updated_at_ms, reconciled_at_ms, correlation, then the key. It sets o's
// times to what will read back (millisecond precision).
func UpdateArgs(o *task.Operation, key, backend string) ([]any, error) {
	if o.Key != key {
		return nil, fmt.Errorf("%s: UpdateOperation of %q: fn changed the key to %q", backend, key, o.Key)
	}
	if err := o.Normalize(); err != nil {
		return nil, fmt.Errorf("%s: update operation: %w", backend, err)
	}
	corr, err := jsoncol.EncodeCorrelation(o.Correlation)
	if err != nil {
		return nil, fmt.Errorf("%s: update operation %q: %w", backend, key, err)
	}
	o.UpdatedAt = MSTime(o.UpdatedAt.UnixMilli())
	o.ReconciledAt = OpTime(opMS(o.ReconciledAt))
	return []any{string(o.TaskID), o.Tool, string(o.Owner), o.Object, o.ObjectVersion, o.Effect, string(o.State),
		o.Receipt, o.Detail, o.UpdatedAt.UnixMilli(), opMS(o.ReconciledAt), corr, key}, nil
}

// opMS is a ledger time as Unix milliseconds, 0 for the zero time.
func opMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
