package sqlite

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/mcptask/mcptask/store/internal/jsoncol"
	"github.com/mcptask/mcptask/store/internal/rowcodec"

	"github.com/mcptask/mcptask/store/internal/cursor"

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
	expiresNS                                    any // int64, or nil while not terminal
	request, result, errJSON, inReqs, inResps    any // string, or nil when absent
	inputSeq                                     int64
	runner                                       string
	attempts                                     int64
	leaseMS                                      int64 // 0 when no lease
	idempotencyKey                               string
	keyOwner                                     string // the key's scope: task.Owner.KeyScope
	queue                                        string
	queued                                       bool
	externalRef                                  string
	correlation                                  string // JSON object, '' when none
}

// insertArgs binds the columns of insertSQL.
func (r *row) insertArgs() []any {
	return []any{r.id, r.owner, r.tool, r.wire, r.status, r.statusMessage, r.createdMS, r.updatedMS,
		r.ttlNS, r.pollNS, r.expiresNS, r.request, r.result, r.errJSON, r.inReqs, r.inResps, r.inputSeq, r.runner, r.attempts,
		r.leaseMS, r.idempotencyKey, r.keyOwner, r.queue, r.queued, r.externalRef, r.correlation}
}

// updateArgs binds the parameters of updateSQL: every column but the ID,
// then the ID.
func (r *row) updateArgs() []any {
	return append(r.insertArgs()[1:], r.id)
}

const insertSQL = `INSERT INTO tasks (id, owner, tool, wire, status, status_message, created_at_ms, updated_at_ms,
	ttl_ns, poll_ns, expires_at_ns, request, result, error, input_requests, input_responses, input_seq, runner, attempts,
	lease_expires_at_ms, idempotency_key, key_owner, queue, queued, external_ref, correlation)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (id) DO NOTHING`

const updateSQL = `UPDATE tasks SET owner = ?, tool = ?, wire = ?, status = ?, status_message = ?,
	created_at_ms = ?, updated_at_ms = ?, ttl_ns = ?, poll_ns = ?, expires_at_ns = ?, request = ?, result = ?,
	error = ?, input_requests = ?, input_responses = ?, input_seq = ?, runner = ?, attempts = ?,
	lease_expires_at_ms = ?, idempotency_key = ?, key_owner = ?, queue = ?, queued = ?, external_ref = ?,
	correlation = ?
	WHERE id = ?`

// encodeTask validates t and encodes it into column values. It does not
// change t.
func encodeTask(t *task.Task) (*row, error) {
	if _, err := task.ParseID(string(t.ID)); err != nil {
		return nil, fmt.Errorf("sqlite store: %w", err)
	}
	if !t.Status.Valid() {
		return nil, fmt.Errorf("sqlite store: task %s has the unknown status %q", t.ID, t.Status)
	}
	r := &row{
		id:             string(t.ID),
		owner:          string(t.Owner),
		tool:           t.Tool,
		wire:           t.Wire,
		status:         string(t.Status),
		statusMessage:  t.StatusMessage,
		createdMS:      t.CreatedAt.UnixMilli(),
		updatedMS:      t.LastUpdatedAt.UnixMilli(),
		ttlNS:          int64(t.TTL),
		pollNS:         int64(t.PollInterval),
		request:        rawArg(t.Request),
		result:         rawArg(t.Result),
		inputSeq:       t.InputSeq,
		runner:         t.Runner,
		attempts:       t.Attempts,
		leaseMS:        leaseMS(t.LeaseExpiresAt),
		idempotencyKey: t.IdempotencyKey,
		keyOwner:       string(t.Owner.KeyScope()),
		queue:          t.Queue,
		queued:         t.Queued,
		externalRef:    t.ExternalRef,
	}
	if t.Status.Terminal() {
		// What task.ExpiresAt will say once the task is read back.
		r.expiresNS = unixNano(rowcodec.MSTime(r.updatedMS).Add(t.TTL))
	}
	var err error
	if r.correlation, err = jsoncol.EncodeCorrelation(t.Correlation); err != nil {
		return nil, fmt.Errorf("sqlite store: task %s: %w", t.ID, err)
	}
	if r.errJSON, err = encodeError(t.Error); err != nil {
		return nil, fmt.Errorf("sqlite store: task %s: %w", t.ID, err)
	}
	if r.inReqs, err = encodeMap(t.InputRequests); err != nil {
		return nil, fmt.Errorf("sqlite store: task %s: input requests: %w", t.ID, err)
	}
	if r.inResps, err = encodeMap(t.InputResponses); err != nil {
		return nil, fmt.Errorf("sqlite store: task %s: input responses: %w", t.ID, err)
	}
	return r, nil
}

// leaseMS encodes a lease expiry as Unix milliseconds (rounded down), 0
// meaning no lease. (A lease at exactly the Unix epoch would read back as
// no lease; no engine takes such a lease.)
func leaseMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// ceilMS is t in Unix milliseconds, rounded up: a stored millisecond
// value v is before t exactly when v < ceilMS(t).
func ceilMS(t time.Time) int64 {
	ms := t.UnixMilli() // rounded down
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
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

// rawArg binds a JSON value as TEXT, byte for byte, or NULL when empty.
func rawArg(r json.RawMessage) any {
	if len(r) == 0 {
		return nil
	}
	return string(r)
}

// encodeError binds e as a JSON TEXT column, or NULL.
func encodeError(e *task.Error) (any, error) {
	b, err := jsoncol.EncodeError(e)
	if b == nil || err != nil {
		return nil, err
	}
	return string(b), nil
}

// encodeMap binds m as a JSON TEXT column, or NULL for a nil map.
func encodeMap(m map[string]json.RawMessage) (any, error) {
	b, err := jsoncol.EncodeMap(m)
	if b == nil || err != nil {
		return nil, err
	}
	return string(b), nil
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
