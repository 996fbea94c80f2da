package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/rowcodec"
	"github.com/mcptask/mcptask/task"
)

var _ store.Viewer = (*Store)(nil)

// viewSQL reads a task, its newest operation and its log's head in one
// statement (%[1]s is the schema). The payload columns are read only when
// their flag ($1 to $5) is set: a column that is not selected is neither
// detoasted nor sent; whether a completed task is a tool error is its
// tool_error column, without its result. The operation is the first of Operations' order for
// the task (created_at_ms DESC, key DESC), found on the index
// operations_task by the lateral subquery; its columns are coalesced, an
// empty key meaning none.
const viewSQL = `SELECT t.id, t.owner, t.tool, t.wire, t.status, t.status_message, t.created_at_ms, t.updated_at_ms,
	t.ttl_ns, t.poll_ns,
	CASE WHEN $1::boolean THEN t.request END,
	CASE WHEN $2::boolean THEN t.result END,
	CASE WHEN $3::boolean THEN t.error END, CASE WHEN $4::boolean THEN t.input_requests END,
	CASE WHEN $5::boolean THEN t.input_responses END,
	t.input_seq, t.runner, t.attempts, t.lease_expires_at_ms, t.idempotency_key, t.queue, t.queued, t.external_ref,
	t.correlation, t.tool_error, t.started_at_ms, t.parent_id, t.root_id,
	coalesce(h.last_seq, 0), coalesce(h.dropped, 0),
	coalesce(o.key, ''), coalesce(o.task_id, ''), coalesce(o.tool, ''), coalesce(o.owner, ''), coalesce(o.object, ''),
	coalesce(o.object_version, ''), coalesce(o.effect, ''), coalesce(o.state, ''), coalesce(o.receipt, ''),
	coalesce(o.detail, ''), coalesce(o.created_at_ms, 0), coalesce(o.updated_at_ms, 0), coalesce(o.reconciled_at_ms, 0),
	coalesce(o.correlation, '')
FROM %[1]s.tasks t
LEFT JOIN %[1]s.task_log_heads h ON h.task_id = t.id
LEFT JOIN LATERAL (SELECT * FROM %[1]s.operations WHERE task_id = t.id
	ORDER BY created_at_ms DESC, key DESC LIMIT 1) o ON true
WHERE t.id = $6`

// View reads the task with the given ID, its newest operation and its
// log's position in one statement, loading only the payloads opts asks
// for; see [store.Viewer].
func (s *Store) View(ctx context.Context, id task.ID, opts store.ViewOptions) (*store.View, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	v, err := scanView(s.pool.QueryRow(ctx, s.viewSQL, opts.Request, opts.Result, opts.Error, opts.InputRequests,
		opts.InputResponses, string(id)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres store: view task %s: %w", id, err)
	}
	return v, nil
}

// scanView reads the row of viewSQL.
func scanView(sc pgx.Row) (*store.View, error) { return rowcodec.View(sc, "postgres store") }
