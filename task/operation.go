package task

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// OpState is the state of a domain operation on the ledger: what the
// downstream system has (or has not) confirmed of a task's side effect,
// apart from the task's own status.
type OpState string

// The states of an operation. intended → submitted → confirmed |
// rejected; any unfinished state may become unknown (reconciliation could
// not tell), and unknown may still become confirmed or rejected (an
// operator, or a later reconciliation, found out).
const (
	// OpIntended: recorded durably before the side effect starts.
	OpIntended OpState = "intended"
	// OpSubmitted: the downstream system took it and gave a receipt (a
	// job ID, a payment intent, a commit SHA).
	OpSubmitted OpState = "submitted"
	// OpConfirmed: the downstream system confirmed the effect.
	OpConfirmed OpState = "confirmed"
	// OpRejected: the downstream system refused it, or it was not applied.
	OpRejected OpState = "rejected"
	// OpUnknown: nobody can tell whether the effect happened; an operator
	// must look (reconcile before retrying).
	OpUnknown OpState = "unknown"
)

// Valid reports whether s is one of the states.
func (s OpState) Valid() bool {
	switch s {
	case OpIntended, OpSubmitted, OpConfirmed, OpRejected, OpUnknown:
		return true
	}
	return false
}

// Settled reports whether s is confirmed or rejected: the downstream
// system's answer is known.
func (s OpState) Settled() bool { return s == OpConfirmed || s == OpRejected }

// CanMoveOp reports whether an operation may go from one state to another.
func CanMoveOp(from, to OpState) bool {
	switch from {
	case OpIntended:
		return to == OpSubmitted || to == OpConfirmed || to == OpRejected || to == OpUnknown
	case OpSubmitted:
		return to == OpConfirmed || to == OpRejected || to == OpUnknown || to == OpSubmitted
	case OpUnknown:
		return to == OpConfirmed || to == OpRejected || to == OpSubmitted
	}
	return false // settled states are final
}

// Operation is one entry of the domain operation ledger: a side effect a
// task's work intends, submitted, and had confirmed or rejected by the
// system of record. It holds no arguments and no results: a short
// description of the intended effect, and references.
type Operation struct {
	// Key identifies the operation, stable across re-runs of the task
	// (by default derived from the task and its idempotency key); unique
	// in the ledger.
	Key string
	// TaskID is the task whose work recorded it. The entry outlives the
	// task (the ledger's retention is its own).
	TaskID ID
	// Tool is the task's tool.
	Tool string
	// Owner is the actor and tenant (the task's owner).
	Owner Owner
	// Object and ObjectVersion name what the effect acts on, if known
	// (e.g. "service/api", "v42").
	Object, ObjectVersion string
	// Effect is a short description of the intended effect, never a
	// payload (e.g. "deploy api to production").
	Effect string
	// State is the operation's state.
	State OpState
	// Receipt is the downstream system's reference, once submitted.
	Receipt string
	// Detail is what the last change said (a rejection's reason, what a
	// reconciliation found), short.
	Detail string
	// CreatedAt and UpdatedAt are UTC timestamps.
	CreatedAt, UpdatedAt time.Time
	// ReconciledAt is when a reconciliation last asked the system of
	// record; zero if never.
	ReconciledAt time.Time
	// Correlation holds the host's correlation keys of the call that
	// created the operation's task (a copy of Task.Correlation, e.g.
	// "claudecode/toolUseId" → the host's tool-use ID). Nil when none;
	// bounded as Task.Correlation is (see [CheckCorrelation]).
	Correlation map[string]string
}

// MaxEffect bounds the length of an operation's effect, object, version,
// receipt and detail, in bytes: the ledger holds references, not payloads.
const MaxEffect = 512

// OpError is the error of a ledger change the states forbid.
type OpError struct {
	Key      string
	From, To OpState
}

func (e *OpError) Error() string {
	return fmt.Sprintf("operation %q cannot go from %s to %s", e.Key, e.From, e.To)
}

// Move changes o's state to to at now, with detail, or returns an
// *OpError if the states forbid it.
func (o *Operation) Move(to OpState, detail string, now time.Time) error {
	if !CanMoveOp(o.State, to) {
		return &OpError{Key: o.Key, From: o.State, To: to}
	}
	o.State = to
	o.Detail = capString(detail, MaxEffect)
	o.UpdatedAt = now.UTC()
	return nil
}

// MaxOpKey bounds the length of an operation's key, in bytes.
const MaxOpKey = 256

// Normalize makes o's strings valid UTF-8 without NUL and caps them to
// [MaxEffect] (the key excepted), sets an
// empty state to intended and its times to UTC, and checks what a ledger
// needs: a key of at most [MaxOpKey] bytes, a task ID, a valid state.
func (o *Operation) Normalize() error {
	switch {
	case o.Key == "":
		return fmt.Errorf("operation without a key")
	case len(o.Key) > MaxOpKey:
		return fmt.Errorf("operation key longer than %d bytes", MaxOpKey)
	case !utf8.ValidString(o.Key) || strings.ContainsRune(o.Key, 0):
		return fmt.Errorf("operation key not valid UTF-8 without NUL")
	case o.TaskID == "":
		return fmt.Errorf("operation %q without a task ID", o.Key)
	}
	if o.State == "" {
		o.State = OpIntended
	}
	if !o.State.Valid() {
		return fmt.Errorf("operation %q: invalid state %q", o.Key, o.State)
	}
	if err := CheckCorrelation(o.Correlation); err != nil {
		return fmt.Errorf("operation %q: %w", o.Key, err)
	}
	o.Correlation = CloneCorrelation(o.Correlation)
	for _, p := range []*string{&o.Object, &o.ObjectVersion, &o.Effect, &o.Receipt, &o.Detail, &o.Tool} {
		*p = capString(strings.ReplaceAll(strings.ToValidUTF8(*p, "\uFFFD"), "\x00", ""), MaxEffect)
	}
	o.CreatedAt = o.CreatedAt.UTC()
	o.UpdatedAt = o.UpdatedAt.UTC()
	o.ReconciledAt = o.ReconciledAt.UTC()
	return nil
}
