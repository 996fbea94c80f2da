package rowcodec

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/mcptask/mcptask/store/internal/jsoncol"
	"github.com/mcptask/mcptask/task"
)

// Dialect is what differs between the backends when a task is written:
// how they name themselves in errors, how a task without a lease or an
// idempotency key is stored, and which text a column refuses.
type Dialect struct {
	// Backend begins the errors ("sqlite store", "postgres store").
	Backend string
	// NullNone stores "no lease" and "no idempotency key" as NULL
	// (PostgreSQL) instead of 0 and "" (SQLite).
	NullNone bool
	// CheckText, when set, reports a string a text column cannot hold
	// (PostgreSQL: a NUL byte or invalid UTF-8); every text the task
	// writes is checked.
	CheckText func(string) error
}

// Encoded is a task encoded into the values of the tasks table's columns,
// ready to bind in the order of [Encoded.InsertArgs].
type Encoded struct {
	ID, Owner, Tool, Wire, Status, StatusMessage string
	CreatedMS, UpdatedMS, TTLNS, PollNS          int64
	expiresNS                                    any // int64, or nil while not terminal
	request, result, errJSON, inReqs, inResps    any // string, or nil when absent
	InputSeq                                     int64
	Runner                                       string
	Attempts                                     int64
	LeaseMS                                      int64  // 0 when no engine holds the task
	IdempotencyKey                               string // "" when the client chose none
	KeyOwner                                     string // the key's scope: task.Owner.KeyScope
	Queue                                        string
	Queued                                       bool
	ExternalRef                                  string
	correlation                                  string // JSON object, "" when none
	ToolError                                    bool   // completed with a tool error
	StartedMS                                    int64  // 0 while not started
	Parent, Root                                 string // "" for a task with no parent
	nullNone                                     bool
}

// InsertArgs binds the columns of the tasks table in the order of both
// backends' insert statements: id, owner, tool, wire, status,
// status_message, created_at_ms, updated_at_ms, ttl_ns, poll_ns,
// expires_at_ns, request, result, error, input_requests,
// input_responses, input_seq, runner, attempts, lease_expires_at_ms,
// idempotency_key, key_owner, queue, queued, external_ref, correlation,
// tool_error, started_at_ms, parent_id, root_id.
func (e *Encoded) InsertArgs() []any {
	var lease, key any = e.LeaseMS, e.IdempotencyKey
	if e.nullNone && e.LeaseMS == 0 {
		lease = nil
	}
	if e.nullNone && e.IdempotencyKey == "" {
		key = nil
	}
	return []any{e.ID, e.Owner, e.Tool, e.Wire, e.Status, e.StatusMessage, e.CreatedMS, e.UpdatedMS,
		e.TTLNS, e.PollNS, e.expiresNS, e.request, e.result, e.errJSON, e.inReqs, e.inResps, e.InputSeq,
		e.Runner, e.Attempts, lease, key, e.KeyOwner, e.Queue, e.Queued, e.ExternalRef, e.correlation,
		e.ToolError, e.StartedMS, e.Parent, e.Root}
}

// UpdateArgs binds the parameters of both backends' update statements:
// every column but the ID, then the ID.
func (e *Encoded) UpdateArgs() []any {
	return append(e.InsertArgs()[1:], e.ID)
}

// EventTask is the part of the encoded task that its history events read.
func (e *Encoded) EventTask() *task.Task {
	return &task.Task{Status: task.Status(e.Status), StatusMessage: e.StatusMessage, Attempts: e.Attempts,
		Runner: e.Runner, LastUpdatedAt: MSTime(e.UpdatedMS)}
}

// Encode validates t and encodes it into column values as d writes them.
// It does not change t. (A lease at exactly the Unix epoch would read
// back as no lease; no engine takes such a lease.)
func (d Dialect) Encode(t *task.Task) (*Encoded, error) {
	if _, err := task.ParseID(string(t.ID)); err != nil {
		return nil, fmt.Errorf("%s: %w", d.Backend, err)
	}
	if !t.Status.Valid() {
		return nil, fmt.Errorf("%s: task %s has the unknown status %q", d.Backend, t.ID, t.Status)
	}
	if d.CheckText != nil {
		for _, f := range []struct{ name, v string }{
			{"owner", string(t.Owner)}, {"tool", t.Tool}, {"wire", t.Wire}, {"status message", t.StatusMessage},
			{"runner", t.Runner}, {"idempotency key", t.IdempotencyKey}, {"queue", t.Queue}, {"external reference", t.ExternalRef},
		} {
			if err := d.CheckText(f.v); err != nil {
				return nil, fmt.Errorf("%s: task %s: the %s %w", d.Backend, t.ID, f.name, err)
			}
		}
	}
	e := &Encoded{
		ID:             string(t.ID),
		Owner:          string(t.Owner),
		Tool:           t.Tool,
		Wire:           t.Wire,
		Status:         string(t.Status),
		StatusMessage:  t.StatusMessage,
		CreatedMS:      t.CreatedAt.UnixMilli(),
		UpdatedMS:      t.LastUpdatedAt.UnixMilli(),
		TTLNS:          int64(t.TTL),
		PollNS:         int64(t.PollInterval),
		InputSeq:       t.InputSeq,
		Runner:         t.Runner,
		Attempts:       t.Attempts,
		IdempotencyKey: t.IdempotencyKey,
		KeyOwner:       string(t.Owner.KeyScope()),
		Queue:          t.Queue,
		Queued:         t.Queued,
		ExternalRef:    t.ExternalRef,
		ToolError:      t.Status == task.Completed && t.ToolError,
		Parent:         string(t.Parent),
		Root:           string(t.Root),
		nullNone:       d.NullNone,
	}
	if !t.LeaseExpiresAt.IsZero() {
		e.LeaseMS = t.LeaseExpiresAt.UnixMilli()
	}
	if !t.StartedAt.IsZero() {
		e.StartedMS = t.StartedAt.UnixMilli()
	}
	if t.Status.Terminal() {
		// What task.ExpiresAt will say once the task is read back.
		e.expiresNS = UnixNano(MSTime(e.UpdatedMS).Add(t.TTL))
	}
	var err error
	if e.correlation, err = jsoncol.EncodeCorrelation(t.Correlation); err != nil {
		return nil, fmt.Errorf("%s: task %s: %w", d.Backend, t.ID, err)
	}
	if e.request, err = d.text(t.Request, nil); err != nil {
		return nil, fmt.Errorf("%s: task %s: request %w", d.Backend, t.ID, err)
	}
	if e.result, err = d.text(t.Result, nil); err != nil {
		return nil, fmt.Errorf("%s: task %s: result %w", d.Backend, t.ID, err)
	}
	if e.errJSON, err = d.text(jsoncol.EncodeError(t.Error)); err != nil {
		return nil, fmt.Errorf("%s: task %s: %w", d.Backend, t.ID, err)
	}
	if e.inReqs, err = d.text(jsoncol.EncodeMap(t.InputRequests)); err != nil {
		return nil, fmt.Errorf("%s: task %s: input requests: %w", d.Backend, t.ID, err)
	}
	if e.inResps, err = d.text(jsoncol.EncodeMap(t.InputResponses)); err != nil {
		return nil, fmt.Errorf("%s: task %s: input responses: %w", d.Backend, t.ID, err)
	}
	return e, nil
}

// text binds JSON as a text column, byte for byte, or NULL when empty.
func (d Dialect) text(b json.RawMessage, err error) (any, error) {
	if len(b) == 0 || err != nil {
		return nil, err
	}
	s := string(b)
	if d.CheckText != nil {
		if err := d.CheckText(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

var (
	minNanoTime = time.Unix(0, math.MinInt64)
	maxNanoTime = time.Unix(0, math.MaxInt64)
)

// UnixNano is t in Unix nanoseconds, saturated to the int64 range (years
// 1678 to 2262) instead of overflowing.
func UnixNano(t time.Time) int64 {
	switch {
	case t.Before(minNanoTime):
		return math.MinInt64
	case t.After(maxNanoTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// CeilMS is t in Unix milliseconds, rounded up: for a lease kept at
// millisecond precision, MSTime(lease).Before(t) exactly when
// lease < CeilMS(t).
func CeilMS(t time.Time) int64 {
	ms := t.UnixMilli() // rounded down, negative times included
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		ms++
	}
	return ms
}

// InQueue is a copy of e as it is inserted when it waits in its queue
// behind waiting others: queued, with no runner, lease or run.
func (e *Encoded) InQueue(waiting int64) *Encoded {
	w := *e
	w.Queued, w.Runner, w.LeaseMS, w.Attempts, w.StartedMS = true, "", 0, 0, 0
	w.StatusMessage = task.QueuedMessage(waiting)
	return &w
}
