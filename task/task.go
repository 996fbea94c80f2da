package task

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Task is the durable record of one task. Stores persist every field; the
// wire adapters choose which to show.
type Task struct {
	// ID is the task's identifier.
	ID ID
	// Owner binds the task to its requester (an authenticated principal, or
	// "" when the server runs without authentication). Every task operation
	// checks it; another owner's task behaves exactly like an unknown one.
	Owner Owner
	// Tool is the name of the tool whose call created the task.
	Tool string
	// Wire is the protocol revision of the call that created the task,
	// e.g. "2026-07-28" or "2025-11-25".
	Wire string
	// Status is the current lifecycle status.
	Status Status
	// StatusMessage is an optional human-readable description of the state.
	StatusMessage string
	// CreatedAt and LastUpdatedAt are UTC timestamps.
	CreatedAt, LastUpdatedAt time.Time
	// TTL is the retention granted to the task.
	TTL time.Duration
	// PollInterval is the suggested delay between polls.
	PollInterval time.Duration
	// Request is the original call's params (JSON), kept so that a tool that
	// declares itself safe to re-run can be run again after a crash.
	Request json.RawMessage
	// Result is the JSON result of a completed task.
	Result json.RawMessage
	// ToolError is true when the task completed with a Result that says
	// isError: true (see [ToolError]): the tool ran and reported its own
	// failure (a failed build, a test suite with failures). Complete sets
	// it; see [Task.Outcome].
	ToolError bool
	// Error is the JSON-RPC error of a failed task.
	Error *Error
	// InputRequests holds the outstanding input requests, key to
	// {"method":..., "params":...}. Keys are unique for the task's lifetime.
	InputRequests map[string]json.RawMessage
	// InputResponses holds answers delivered by the client that the running
	// handler has not consumed yet.
	InputResponses map[string]json.RawMessage
	// InputSeq counts the input requests ever made; it mints unique keys.
	InputSeq int64
	// Runner names the engine instance running the task's work, "" if none.
	Runner string
	// StartedAt is when the task's work first started: its creation for
	// a task that did not wait in a queue, its start from the queue for
	// one that did; zero while it waits (and for a task recorded before
	// stores kept it). CreatedAt to StartedAt is the task's wait,
	// StartedAt to the end its run.
	StartedAt time.Time
	// Attempts counts the times the task's work was started: 1 for the
	// first run, more after re-runs following a crash or a shutdown.
	Attempts int64
	// LeaseExpiresAt is when Runner's hold on the work ends unless renewed
	// by a heartbeat; after it, another engine may take the task over.
	// Zero when no engine holds the task.
	LeaseExpiresAt time.Time
	// IdempotencyKey is the client-chosen key that makes a retried call
	// return this task instead of creating another; unique per Owner.
	// Empty when the client chose none.
	IdempotencyKey string
	// Queue names the concurrency queue the task runs in ("" for none):
	// the tasks of one queue run at most the queue's cap at once, across
	// every engine sharing the store; the others wait in creation order.
	Queue string
	// Queued is true while the task waits in its Queue for a free slot:
	// its status is working, no engine holds it (Runner is empty), its
	// work has not started (Attempts is 0), and its status message says
	// how many tasks are ahead of it.
	Queued bool
	// ExternalRef is what the task's work recorded to find its work again
	// in another system (the upstream task of a gateway tool, the job of a
	// job API): kept durably, so that after a crash the recovery policy
	// can re-attach to that work instead of failing the task with an
	// "outcome unknown" error. Empty when the work recorded none.
	ExternalRef string
	// Correlation holds the host's correlation keys of the call that
	// created the task, read from the call's _meta (e.g.
	// "claudecode/toolUseId" → the host's tool-use ID), so that a host's
	// record of the call and the task can be matched. Nil when the call
	// carried none. Bounded (see [CheckCorrelation]): at most
	// [MaxCorrelationKeys] keys of at most [MaxCorrelationKey] bytes,
	// values of at most [MaxCorrelationValue] bytes, strings only.
	Correlation map[string]string
	// Parent is the task whose work started this one as a child (see
	// mcptask.Task.Spawn), "" for a task a requester created.
	Parent ID
	// Root is the top of the tree a child belongs to (the task with no
	// parent it descends from). A task with no parent has "", or its own
	// ID once its work started a child (it is the top of a tree).
	Root ID
}

// Error is a JSON-RPC error object stored with a failed task.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// JSON-RPC error codes used by the domain.
const (
	CodeInvalidParams = -32602
	CodeInternalError = -32603
)

// New returns a fresh working task for tool, created at now, with retention
// and polling from p.
func New(p Policy, owner Owner, tool string, requestedTTL *time.Duration, now time.Time) *Task {
	now = now.UTC()
	return &Task{
		ID:            NewID(),
		Owner:         owner,
		Tool:          tool,
		Status:        Working,
		CreatedAt:     now,
		LastUpdatedAt: now,
		TTL:           p.TTL(requestedTTL),
		PollInterval:  p.Poll(),
	}
}

// Transition moves t to status to at time now, or returns a
// *TransitionError if the table forbids it. Leaving input_required drops any
// outstanding input requests.
func (t *Task) Transition(to Status, now time.Time) error {
	if !CanTransition(t.Status, to) {
		return &TransitionError{From: t.Status, To: to}
	}
	t.Status = to
	t.LastUpdatedAt = now.UTC()
	if to.Terminal() {
		t.InputRequests = nil
		t.InputResponses = nil
		t.Runner = ""
		t.LeaseExpiresAt = time.Time{}
	}
	return nil
}

// Complete ends the task completed with result.
func (t *Task) Complete(result json.RawMessage, now time.Time) error {
	if err := t.Transition(Completed, now); err != nil {
		return err
	}
	t.Result = result
	t.ToolError = ToolError(result)
	return nil
}

// Fail ends the task failed with err; msg, if not empty, becomes the status
// message.
func (t *Task) Fail(err *Error, msg string, now time.Time) error {
	if e := t.Transition(Failed, now); e != nil {
		return e
	}
	if err != nil && len(err.Message) > MaxErrorMessage {
		cp := *err
		cp.Message = capString(cp.Message, MaxErrorMessage)
		err = &cp
	}
	t.Error = err
	if msg != "" {
		t.StatusMessage = CapStatusMessage(msg)
	}
	return nil
}

// Cancel ends the task cancelled.
func (t *Task) Cancel(msg string, now time.Time) error {
	if err := t.Transition(Cancelled, now); err != nil {
		return err
	}
	if msg != "" {
		t.StatusMessage = CapStatusMessage(msg)
	}
	return nil
}

// SetStatusMessage changes the status message of a non-terminal task.
func (t *Task) SetStatusMessage(msg string, now time.Time) error {
	if t.Status.Terminal() {
		return &TransitionError{From: t.Status, To: t.Status}
	}
	t.StatusMessage = CapStatusMessage(msg)
	t.LastUpdatedAt = now.UTC()
	return nil
}

// MaxStatusMessage is the longest status message a task keeps, in bytes:
// a status message is for people (progress, the step it is at), and every
// poll of the task carries it.
const MaxStatusMessage = 4096

// MaxErrorMessage is the longest message of a failed task's error that a
// task keeps, in bytes (a tool's error may echo a whole request).
const MaxErrorMessage = 16 << 10

// QueuedMessage is the status message of a task waiting in its
// concurrency queue with ahead tasks before it.
func QueuedMessage(ahead int64) string {
	if ahead == 0 {
		return "queued: next to start"
	}
	return fmt.Sprintf("queued: %d ahead", ahead)
}

// CapStatusMessage returns msg cut to MaxStatusMessage bytes (on a
// character boundary, ending in "…" when cut).
func CapStatusMessage(msg string) string { return capString(msg, MaxStatusMessage) }

// CapErrorMessage returns msg cut to MaxErrorMessage bytes (on a
// character boundary, ending in "…" when cut).
func CapErrorMessage(msg string) string { return capString(msg, MaxErrorMessage) }

func capString(msg string, limit int) string {
	if len(msg) <= limit {
		return msg
	}
	const ellipsis = "…"
	cut := limit - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + ellipsis
}

// ExpiresAt is the moment after which a terminal task may be swept: TTL after
// its last change. Retention never starts before the task is terminal, so a
// client polling at the suggested interval always sees the outcome.
func (t *Task) ExpiresAt() time.Time { return t.LastUpdatedAt.Add(t.TTL) }

// Expired reports whether t is terminal and past its retention at now.
func (t *Task) Expired(now time.Time) bool {
	return t.Status.Terminal() && now.After(t.ExpiresAt())
}

// Clone returns a deep copy of t.
func (t *Task) Clone() *Task {
	c := *t
	c.Request = cloneRaw(t.Request)
	c.Result = cloneRaw(t.Result)
	if t.Error != nil {
		e := *t.Error
		e.Data = cloneRaw(t.Error.Data)
		c.Error = &e
	}
	c.InputRequests = cloneMap(t.InputRequests)
	c.InputResponses = cloneMap(t.InputResponses)
	c.Correlation = CloneCorrelation(t.Correlation)
	return &c
}

func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return append(json.RawMessage(nil), r...)
}

func cloneMap(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return nil
	}
	c := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		c[k] = cloneRaw(v)
	}
	return c
}

// FormatTime formats a timestamp as RFC 3339 in UTC with millisecond
// precision, as the wires show it.
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
