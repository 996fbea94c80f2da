package sqlite

import (
	"time"

	"github.com/mcptask/mcptask/store/internal/cursor"
	"github.com/mcptask/mcptask/store/internal/rowcodec"

	"github.com/mcptask/mcptask/task"
)

// taskColumns are the columns a task is read from, in scanTask's order.
const taskColumns = `id, owner, tool, wire, status, status_message, created_at_ms, updated_at_ms,
	ttl_ns, poll_ns, request, result, error, input_requests, input_responses, input_seq, runner, attempts,
	lease_expires_at_ms, idempotency_key, queue, queued, external_ref, correlation, tool_error, started_at_ms,
	parent_id, root_id`

// dialect is how this backend writes a task: no lease and no idempotency
// key as 0 and "".
var dialect = rowcodec.Dialect{Backend: "sqlite store"}

// row is a task encoded into column values, ready to bind.
type row = rowcodec.Encoded

// encodeTask validates t and encodes it into column values. It does not
// change t.
func encodeTask(t *task.Task) (*row, error) { return dialect.Encode(t) }

const insertSQL = `INSERT INTO tasks (id, owner, tool, wire, status, status_message, created_at_ms, updated_at_ms,
	ttl_ns, poll_ns, expires_at_ns, request, result, error, input_requests, input_responses, input_seq, runner, attempts,
	lease_expires_at_ms, idempotency_key, key_owner, queue, queued, external_ref, correlation, tool_error, started_at_ms,
	parent_id, root_id)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (id) DO NOTHING`

const updateSQL = `UPDATE tasks SET owner = ?, tool = ?, wire = ?, status = ?, status_message = ?,
	created_at_ms = ?, updated_at_ms = ?, ttl_ns = ?, poll_ns = ?, expires_at_ns = ?, request = ?, result = ?,
	error = ?, input_requests = ?, input_responses = ?, input_seq = ?, runner = ?, attempts = ?,
	lease_expires_at_ms = ?, idempotency_key = ?, key_owner = ?, queue = ?, queued = ?, external_ref = ?,
	correlation = ?, tool_error = ?, started_at_ms = ?, parent_id = ?, root_id = ?
	WHERE id = ?`

// leaseMS encodes a lease expiry as Unix milliseconds (rounded down), 0
// meaning no lease. (A lease at exactly the Unix epoch would read back as
// no lease; no engine takes such a lease.)
func leaseMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// scanTask reads one task selected with taskColumns.
func scanTask(sc scanner) (*task.Task, error) { return rowcodec.Task(sc, "sqlite store") }

// makeCursor returns the cursor of the position just after t in owner's
// listing.
func (s *Store) makeCursor(owner task.Owner, t *task.Task) string {
	return cursor.Signer{Key: s.cursorKey, Domain: "mcptask/sqlite list cursor"}.Make(owner, t)
}

// parseCursor checks that c was issued for owner and returns its position.
func (s *Store) parseCursor(owner task.Owner, c string) (createdMS int64, id string, err error) {
	return cursor.Signer{Key: s.cursorKey, Domain: "mcptask/sqlite list cursor"}.Parse(owner, c)
}
