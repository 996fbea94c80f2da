package postgres

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mcptask/mcptask/store/internal/cursor"
	"github.com/mcptask/mcptask/store/internal/rowcodec"

	"github.com/jackc/pgx/v5"

	"github.com/mcptask/mcptask/task"
)

// taskColumns are the columns a task is read from, in scanTask's order.
const taskColumns = `id, owner, tool, wire, status, status_message, created_at_ms, updated_at_ms,
	ttl_ns, poll_ns, request, result, error, input_requests, input_responses, input_seq, runner, attempts,
	lease_expires_at_ms, idempotency_key, queue, queued, external_ref, correlation, tool_error, started_at_ms,
	parent_id, root_id`

// dialect is how this backend writes a task: no lease and no idempotency
// key as NULL, and text PostgreSQL can hold.
var dialect = rowcodec.Dialect{Backend: "postgres store", NullNone: true, CheckText: checkText}

// row is a task encoded into column values, ready to bind.
type row = rowcodec.Encoded

// insertSQL inserts a task unless its ID or its (owner, idempotency key)
// is taken. It returns one row when it inserted, none on a conflict. A
// creation is not announced on the change channel: nobody can be waiting
// for a task before it exists, and a notifying transaction takes a
// database-wide lock until its commit is flushed, which would serialise
// every creation of every instance.
const insertSQL = `INSERT INTO %[1]s.tasks (id, owner, tool, wire, status, status_message, created_at_ms, updated_at_ms,
		ttl_ns, poll_ns, expires_at_ns, request, result, error, input_requests, input_responses, input_seq,
		runner, attempts, lease_expires_at_ms, idempotency_key, key_owner, queue, queued, external_ref, correlation,
		tool_error, started_at_ms, parent_id, root_id)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,
		$23, $24, $25, $26, $27, $28, $29, $30)
	ON CONFLICT DO NOTHING
	RETURNING id`

// updateSQL writes every column of a task but its ID ($30), and announces
// the change on the change channel ($31). It returns one row when the task
// exists.
const updateSQL = `WITH upd AS (
	UPDATE %[1]s.tasks SET owner = $1, tool = $2, wire = $3, status = $4, status_message = $5,
		created_at_ms = $6, updated_at_ms = $7, ttl_ns = $8, poll_ns = $9, expires_at_ns = $10,
		request = $11, result = $12, error = $13, input_requests = $14, input_responses = $15,
		input_seq = $16, runner = $17, attempts = $18, lease_expires_at_ms = $19, idempotency_key = $20,
		key_owner = $21, queue = $22, queued = $23, external_ref = $24, correlation = $25,
		tool_error = $26, started_at_ms = $27, parent_id = $28, root_id = $29
	WHERE id = $30
	RETURNING id
)
SELECT upd.id FROM upd CROSS JOIN LATERAL pg_notify($31, upd.id) AS n`

// encodeTask validates t and encodes it into column values. It does not
// change t.
func encodeTask(t *task.Task) (*row, error) { return dialect.Encode(t) }

// checkText reports a string that a PostgreSQL text value cannot hold:
// one with a NUL byte or that is not valid UTF-8 (the database encoding
// this store requires).
func checkText(s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("contains a NUL byte, which PostgreSQL text cannot hold")
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("is not valid UTF-8")
	}
	return nil
}

// scanAll reads every row of rows as a task and closes rows.
func scanAll(rows pgx.Rows) ([]*task.Task, error) {
	defer rows.Close()
	var tasks []*task.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, t)
	}
	return tasks, rows.Err()
}

// scanTask reads one task selected with taskColumns.
func scanTask(sc pgx.Row) (*task.Task, error) { return rowcodec.Task(sc, "postgres store") }

// makeCursor returns the cursor of the position just after t in owner's
// listing.
func (s *Store) makeCursor(owner task.Owner, t *task.Task) string {
	return cursor.Signer{Key: s.cursorKey, Domain: "mcptask/postgres list cursor"}.Make(owner, t)
}

// parseCursor checks that c was issued for owner and returns its position.
func (s *Store) parseCursor(owner task.Owner, c string) (createdMS int64, id string, err error) {
	return cursor.Signer{Key: s.cursorKey, Domain: "mcptask/postgres list cursor"}.Parse(owner, c)
}
