package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/rowcodec"
	"github.com/mcptask/mcptask/task"
)

var _ store.Viewer = (*Store)(nil)

// viewSQL reads a task, its newest operation and its log's head in one
// statement. The payload columns are read only when their flag (?1 to
// ?5) is set: SQLite reads a column's bytes (overflow pages included)
// only when the expression that needs them is evaluated. Whether a
// completed task is a tool error is its tool_error column, without its
// result. The operation
// is the first of Operations' order for the task (created_at_ms DESC,
// key DESC), found on the index operations_task; its columns are
// coalesced, an empty key meaning none.
const viewSQL = `SELECT t.id, t.owner, t.tool, t.wire, t.status, t.status_message, t.created_at_ms, t.updated_at_ms,
	t.ttl_ns, t.poll_ns,
	CASE WHEN ?1 THEN t.request END,
	CASE WHEN ?2 THEN t.result END,
	CASE WHEN ?3 THEN t.error END,
	CASE WHEN ?4 THEN t.input_requests END, CASE WHEN ?5 THEN t.input_responses END,
	t.input_seq, t.runner, t.attempts, t.lease_expires_at_ms, t.idempotency_key, t.queue, t.queued, t.external_ref,
	t.correlation, t.tool_error, t.started_at_ms, t.parent_id, t.root_id,
	coalesce(h.last_seq, 0), coalesce(h.dropped, 0),
	coalesce(o.key, ''), coalesce(o.task_id, ''), coalesce(o.tool, ''), coalesce(o.owner, ''), coalesce(o.object, ''),
	coalesce(o.object_version, ''), coalesce(o.effect, ''), coalesce(o.state, ''), coalesce(o.receipt, ''),
	coalesce(o.detail, ''), coalesce(o.created_at_ms, 0), coalesce(o.updated_at_ms, 0), coalesce(o.reconciled_at_ms, 0),
	coalesce(o.correlation, '')
FROM tasks t
LEFT JOIN task_log_heads h ON h.task_id = t.id
LEFT JOIN operations o ON o.key = (SELECT key FROM operations WHERE task_id = t.id
	ORDER BY created_at_ms DESC, key DESC LIMIT 1)
WHERE t.id = ?6`

// View reads the task with the given ID, its newest operation and its
// log's position in one statement (prepared once), loading only the
// payloads opts asks for; see [store.Viewer]. With Options.ViewCache, a
// task's View is read from memory until a write changes the task (see
// viewcache.go).
func (s *Store) View(ctx context.Context, id task.ID, opts store.ViewOptions) (*store.View, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	var gen uint64
	if s.views != nil {
		var v *store.View
		if v, gen = s.views.get(viewKey{id, opts}); v != nil {
			return v, nil
		}
	}
	st, err := s.readStmt(ctx, viewSQL)
	if err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: view task %s: %w", id, err))
	}
	v, err := scanView(st.QueryRowContext(ctx, opts.Request, opts.Result, opts.Error, opts.InputRequests,
		opts.InputResponses, string(id)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: view task %s: %w", id, err))
	}
	if s.views != nil {
		s.views.put(viewKey{id, opts}, v, gen)
	}
	return v, nil
}

// scanView reads the row of viewSQL.
func scanView(sc scanner) (*store.View, error) { return rowcodec.View(sc, "sqlite store") }
