package engine

import (
	"errors"
	"fmt"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// Errors returned by engine methods.
var (
	// ErrNotFound means no task with that ID is visible to the requester:
	// it does not exist, has expired, or belongs to someone else. It is the
	// store's ErrNotFound: one sentinel for "no such task" in every layer;
	// the engine returns it as a *NotFoundError that also says why.
	ErrNotFound = store.ErrNotFound
	// ErrClosed means the engine is shutting down and accepts no new work.
	ErrClosed = errors.New("engine is shut down")
	// ErrBadCursor means a List cursor was not issued by the store.
	ErrBadCursor = store.ErrBadCursor
	// ErrTooManyActive means Start was refused because the owner already
	// has StartSpec.MaxActive unfinished tasks.
	ErrTooManyActive = store.ErrTooManyActive
)

// NotFoundError is the ErrNotFound of a task the requester may not see,
// with the reason, for the audit trail only: requesters must be answered
// exactly as for an unknown task whatever the reason. errors.Is(err,
// ErrNotFound) holds.
type NotFoundError struct {
	// Reason is audit.ReasonUnknown, audit.ReasonOtherOwner or
	// audit.ReasonExpired.
	Reason string
	// Owner and Tool are the task's, when it exists.
	Owner task.Owner
	Tool  string
}

func (e *NotFoundError) Error() string { return ErrNotFound.Error() }

// Is makes errors.Is(err, ErrNotFound) hold.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// TerminalError is returned by operations that need a non-terminal task.
type TerminalError struct{ Status task.Status }

func (e *TerminalError) Error() string {
	return fmt.Sprintf("task is already %s", e.Status)
}

// ErrIdempotencyConflict is returned by Start when an idempotency key is
// reused for another call: of another tool, or with other arguments (see
// task.CallDigest).
var ErrIdempotencyConflict = errors.New("the idempotency key was already used for another call (another tool or other arguments)")

// NotTerminalError is Delete's refusal of a task that has not ended
// (working or input_required): it must be cancelled first.
type NotTerminalError struct {
	Status task.Status
	// Parent, when set, is the parent whose status is Status: a child is
	// kept while its parent runs (a re-run of the parent's work must
	// find the steps it finished).
	Parent task.ID
}

func (e *NotTerminalError) Error() string {
	if e.Parent != "" {
		return fmt.Sprintf("its parent task %s is %s: a step is deleted once its parent has ended", e.Parent, e.Status)
	}
	return fmt.Sprintf("task is %s: cancel it first, then delete it", e.Status)
}

// AnswerError is Respond's refusal of an answer that check found bad:
// nothing of that Respond was stored, and the task still waits.
type AnswerError struct {
	Key string // the input request's key
	Err error  // what check said
}

func (e *AnswerError) Error() string { return fmt.Sprintf("the answer to %q: %v", e.Key, e.Err) }

// Unwrap returns what check said.
func (e *AnswerError) Unwrap() error { return e.Err }

// CancelRefusedError is the error of a cancel that the system doing the
// task's work refused or could not be told of (see [Hooks.Cancel]): the
// task was not cancelled and goes on.
type CancelRefusedError struct {
	// Reason is what the system said (or why it could not be asked),
	// without secrets.
	Reason string
}

func (e *CancelRefusedError) Error() string { return "the task was not cancelled: " + e.Reason }

// CancelledError, returned by a task's work, ends the task cancelled, not
// failed: the system doing the work cancelled it (e.g. a job cancelled in
// its job system, or on the task's cancel: see [Hooks.Cancel]). Message
// is the task's status message.
type CancelledError struct{ Message string }

func (e *CancelledError) Error() string { return e.Message }
