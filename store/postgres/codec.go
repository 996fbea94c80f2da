package postgres

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcptask/mcptask/store/internal/jsoncol"
	"github.com/mcptask/mcptask/store/internal/rowcodec"

	"github.com/mcptask/mcptask/store/internal/cursor"

	"github.com/jackc/pgx/v5"

	"github.com/mcptask/mcptask/task"
)

// taskColumns are the columns a task is read from, in scanTask's order.
const taskColumns = `id, owner, tool, wire, status, status_message, created_at_ms, updated_at_ms,
	ttl_ns, poll_ns, request, result, error, input_requests, input_responses, input_seq, runner, attempts,
	lease_expires_at_ms, idempotency_key, queue, queued, external_ref, correlation`

// row is a task encoded into column values, ready to bind.
type row struct {
	id, owner, tool, wire, status, statusMessage string
	createdMS, updatedMS, ttlNS, pollNS          int64
	expiresNS                                    *int64  // nil while not terminal
	request, result, errJSON, inReqs, inResps    *string // nil when absent
	inputSeq                                     int64
	runner                                       string
	attempts                                     int64
	leaseMS                                      *int64  // nil when no engine holds the task
	idemKey                                      *string // nil when the client chose none
	keyOwner                                     string  // the key's scope: task.Owner.KeyScope
	queue                                        string
	queued                                       bool
	externalRef                                  string
	correlation                                  string // JSON object, '' when none
}

// insertArgs binds the columns of insertSQL, in order.
func (r *row) insertArgs() []any {
	return []any{r.id, r.owner, r.tool, r.wire, r.status, r.statusMessage, r.createdMS, r.updatedMS,
		r.ttlNS, r.pollNS, r.expiresNS, r.request, r.result, r.errJSON, r.inReqs, r.inResps, r.inputSeq,
		r.runner, r.attempts, r.leaseMS, r.idemKey, r.keyOwner, r.queue, r.queued, r.externalRef, r.correlation}
}

// insertSQL inserts a task unless its ID or its (owner, idempotency key)
// is taken. It returns one row when it inserted, none on a conflict. A
// creation is not announced on the change channel: nobody can be waiting
// for a task before it exists, and a notifying transaction takes a
// database-wide lock until its commit is flushed, which would serialise
// every creation of every instance.
const insertSQL = `INSERT INTO %[1]s.tasks (id, owner, tool, wire, status, status_message, created_at_ms, updated_at_ms,
		ttl_ns, poll_ns, expires_at_ns, request, result, error, input_requests, input_responses, input_seq,
		runner, attempts, lease_expires_at_ms, idempotency_key, key_owner, queue, queued, external_ref, correlation)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,
		$23, $24, $25, $26)
	ON CONFLICT DO NOTHING
	RETURNING id`

// updateSQL writes every column of a task but its ID ($26), and announces
// the change on the change channel ($27). It returns one row when the task
// exists.
const updateSQL = `WITH upd AS (
	UPDATE %[1]s.tasks SET owner = $1, tool = $2, wire = $3, status = $4, status_message = $5,
		created_at_ms = $6, updated_at_ms = $7, ttl_ns = $8, poll_ns = $9, expires_at_ns = $10,
		request = $11, result = $12, error = $13, input_requests = $14, input_responses = $15,
		input_seq = $16, runner = $17, attempts = $18, lease_expires_at_ms = $19, idempotency_key = $20,
		key_owner = $21, queue = $22, queued = $23, external_ref = $24, correlation = $25
	WHERE id = $26
	RETURNING id
)
SELECT upd.id FROM upd CROSS JOIN LATERAL pg_notify($27, upd.id) AS n`

// updateArgs binds the parameters of updateSQL but the channel: every
// column but the ID, then the ID.
func (r *row) updateArgs() []any {
	return append(r.insertArgs()[1:], r.id)
}

// encodeTask validates t and encodes it into column values. It does not
// change t.
func encodeTask(t *task.Task) (*row, error) {
	if _, err := task.ParseID(string(t.ID)); err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	if !t.Status.Valid() {
		return nil, fmt.Errorf("postgres store: task %s has the unknown status %q", t.ID, t.Status)
	}
	for _, f := range []struct{ name, v string }{
		{"owner", string(t.Owner)}, {"tool", t.Tool}, {"wire", t.Wire}, {"status message", t.StatusMessage},
		{"runner", t.Runner}, {"idempotency key", t.IdempotencyKey}, {"queue", t.Queue}, {"external reference", t.ExternalRef},
	} {
		if err := checkText(f.v); err != nil {
			return nil, fmt.Errorf("postgres store: task %s: the %s %w", t.ID, f.name, err)
		}
	}
	r := &row{
		id:            string(t.ID),
		owner:         string(t.Owner),
		tool:          t.Tool,
		wire:          t.Wire,
		status:        string(t.Status),
		statusMessage: t.StatusMessage,
		createdMS:     t.CreatedAt.UnixMilli(),
		updatedMS:     t.LastUpdatedAt.UnixMilli(),
		ttlNS:         int64(t.TTL),
		pollNS:        int64(t.PollInterval),
		inputSeq:      t.InputSeq,
		runner:        t.Runner,
		attempts:      t.Attempts,
		keyOwner:      string(t.Owner.KeyScope()),
		queue:         t.Queue,
		queued:        t.Queued,
		externalRef:   t.ExternalRef,
	}
	if t.Status.Terminal() {
		// What task.ExpiresAt will say once the task is read back.
		ns := unixNano(rowcodec.MSTime(r.updatedMS).Add(t.TTL))
		r.expiresNS = &ns
	}
	if !t.LeaseExpiresAt.IsZero() {
		ms := t.LeaseExpiresAt.UnixMilli()
		r.leaseMS = &ms
	}
	if t.IdempotencyKey != "" {
		k := t.IdempotencyKey
		r.idemKey = &k
	}
	var err error
	if r.correlation, err = jsoncol.EncodeCorrelation(t.Correlation); err != nil {
		return nil, fmt.Errorf("postgres store: task %s: %w", t.ID, err)
	}
	if r.request, err = rawArg(t.Request); err != nil {
		return nil, fmt.Errorf("postgres store: task %s: request %w", t.ID, err)
	}
	if r.result, err = rawArg(t.Result); err != nil {
		return nil, fmt.Errorf("postgres store: task %s: result %w", t.ID, err)
	}
	if r.errJSON, err = encodeError(t.Error); err != nil {
		return nil, fmt.Errorf("postgres store: task %s: %w", t.ID, err)
	}
	if r.inReqs, err = encodeMap(t.InputRequests); err != nil {
		return nil, fmt.Errorf("postgres store: task %s: input requests: %w", t.ID, err)
	}
	if r.inResps, err = encodeMap(t.InputResponses); err != nil {
		return nil, fmt.Errorf("postgres store: task %s: input responses: %w", t.ID, err)
	}
	return r, nil
}

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

var (
	minNanoTime = time.Unix(0, math.MinInt64)
	maxNanoTime = time.Unix(0, math.MaxInt64)
)

// unixNano is t in Unix nanoseconds, saturated to the int64 range (years
// 1678 to 2262) instead of overflowing.
func unixNano(t time.Time) int64 {
	switch {
	case t.Before(minNanoTime):
		return math.MinInt64
	case t.After(maxNanoTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// rawArg binds a JSON value as text, byte for byte, or NULL when empty.
func rawArg(r json.RawMessage) (*string, error) {
	if len(r) == 0 {
		return nil, nil
	}
	s := string(r)
	if err := checkText(s); err != nil {
		return nil, err
	}
	return &s, nil
}

// encodeError binds e as a JSON text column, or NULL.
func encodeError(e *task.Error) (*string, error) {
	return textColumn(jsoncol.EncodeError(e))
}

// encodeMap binds m as a JSON text column, or NULL for a nil map.
func encodeMap(m map[string]json.RawMessage) (*string, error) {
	return textColumn(jsoncol.EncodeMap(m))
}

// textColumn binds encoded JSON as text PostgreSQL accepts, or NULL.
func textColumn(b []byte, err error) (*string, error) {
	if b == nil || err != nil {
		return nil, err
	}
	s := string(b)
	if err := checkText(s); err != nil {
		return nil, err
	}
	return &s, nil
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
