package rowcodec

import (
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/cursor"
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
