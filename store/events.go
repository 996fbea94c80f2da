package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcptask/mcptask/task"
)

// Events is the facet of [Store] that keeps the requesters' event logs
// (MCP Events: task status and task output, see docs/events.md) and the
// durable webhook outbox beside the tasks.
//
// Every status change of a task (its creation included) appends a status
// event in the transaction of the change itself (a trigger on the task's
// history), and AppendEvents appends output events; each append also
// queues, in the same transaction, one delivery per matching webhook
// subscription. Nothing that commits a change can lose its event, and a
// delivery outlives any crash of the instance that would have sent it.
//
// Positions ([EventPos]) order one requester's events as their
// transactions committed: a reader that continues after a position never
// misses an event committed later (on PostgreSQL, only events of
// transactions older than every transaction still running are read).
type Events interface {
	// EventHead returns the position after which events committed from
	// now on are read: the "start from now" of a subscription.
	EventHead(ctx context.Context) (EventPos, error)

	// ReadEvents returns the events q selects after q.After, oldest
	// first.
	ReadEvents(ctx context.Context, q EventQuery) (*EventPage, error)

	// AppendEvents durably appends the output events evs of the task id
	// (its owner's and tool's), in order; ErrNotFound for an unknown
	// task.
	AppendEvents(ctx context.Context, id task.ID, evs []OutputEvent) error

	// PutSubscription creates the webhook subscription sub (by its ID)
	// or refreshes it: the secret, the expiry and Active are replaced,
	// the rest kept. A new subscription with a From position gets the
	// deliveries of its events after From (not older than FromTime);
	// Truncated reports whether events after From were older than the
	// retention or FromTime. A new subscription beyond max of its owner
	// (max > 0) is refused with ErrTooManySubscriptions.
	PutSubscription(ctx context.Context, sub *Subscription, max int) (created, truncated bool, err error)

	// GetSubscription returns the subscription id of owner; ErrNotFound
	// when there is none (or it is another owner's).
	GetSubscription(ctx context.Context, owner task.Owner, id string) (*Subscription, error)

	// DeleteSubscription deletes the subscription id of owner and its
	// deliveries; ErrNotFound when there is none.
	DeleteSubscription(ctx context.Context, owner task.Owner, id string) error

	// ClaimDeliveries leases up to limit pending deliveries that are due
	// at now, for lease: no other claim gets them until the lease ends
	// or they are finished. Each comes with its event, its
	// subscription's delivery details and its watermark.
	ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]*Delivery, error)

	// FinishDelivery records the end of an attempt of d: delivered
	// (deleted), retried at next, or dead (kept as a dead letter), with
	// the error category of a failure. It also updates the
	// subscription's delivery status. A late attempt (its lease lapsed
	// and another claim took the delivery) records nothing.
	FinishDelivery(ctx context.Context, d *Delivery, r DeliveryResult) error

	// DeadLetters returns up to limit dead deliveries, newest first.
	DeadLetters(ctx context.Context, limit int) ([]*DeadLetter, error)

	// EventCounts returns the deliveries pending and dead, for the
	// metrics.
	EventCounts(ctx context.Context) (pending, dead int64, err error)

	// PruneEvents deletes the events older than before (but those a
	// delivery still waits for), the dead letters older than before and
	// the subscriptions that expired before now, and returns how many
	// events it deleted.
	PruneEvents(ctx context.Context, before, now time.Time) (int, error)
}

// ErrTooManySubscriptions is returned by PutSubscription for a new
// subscription beyond its owner's cap.
var ErrTooManySubscriptions = errors.New("too many webhook subscriptions")

// EventKind is what an event tells: a status change or an output.
type EventKind string

// The kinds of event.
const (
	// EventKindStatus: the task was created or changed status.
	EventKindStatus EventKind = "status"
	// EventKindOutput: the task's work emitted an output.
	EventKindOutput EventKind = "output"
)

// EventPos is a position in the event log. Events are ordered by (Tx,
// Seq): Tx is the writing transaction's ID on PostgreSQL (0 on SQLite,
// whose single writer commits in Seq order). The zero EventPos is
// before every event.
type EventPos struct {
	Tx  uint64
	Seq int64
}

// Before reports whether p is before q.
func (p EventPos) Before(q EventPos) bool {
	return p.Tx < q.Tx || p.Tx == q.Tx && p.Seq < q.Seq
}

// String encodes p as an opaque cursor.
func (p EventPos) String() string {
	return "e1." + strconv.FormatUint(p.Tx, 36) + "." + strconv.FormatInt(p.Seq, 36)
}

// ParseEventPos decodes a cursor made by EventPos.String.
func ParseEventPos(s string) (EventPos, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || parts[0] != "e1" {
		return EventPos{}, fmt.Errorf("not an event cursor of this server")
	}
	tx, err1 := strconv.ParseUint(parts[1], 36, 64)
	seq, err2 := strconv.ParseInt(parts[2], 36, 64)
	if err1 != nil || err2 != nil || seq < 0 || tx > 1<<62 {
		return EventPos{}, fmt.Errorf("not an event cursor of this server")
	}
	return EventPos{Tx: tx, Seq: seq}, nil
}

// EventQuery selects events of one owner.
type EventQuery struct {
	// Owner is whose events are read (required).
	Owner task.Owner
	// Kind selects status or output events.
	Kind EventKind
	// TaskID, if set, selects the events of that task only.
	TaskID task.ID
	// Tool, if set, selects the events of that tool's tasks only.
	Tool string
	// After is the position to read after.
	After EventPos
	// NotBefore, if set, skips events older than it (Truncated says
	// whether any were).
	NotBefore time.Time
	// Limit caps the events read; <= 0 means DefaultEventLimit, and at
	// most MaxEventLimit.
	Limit int
}

// The page sizes of ReadEvents.
const (
	// DefaultEventLimit is the page size of a query without a Limit.
	DefaultEventLimit = 100
	// MaxEventLimit caps a query's Limit.
	MaxEventLimit = 1000
)

// EventPage is what ReadEvents returns.
type EventPage struct {
	// Events are the events read, oldest first.
	Events []*Event
	// Next is the position to continue after: the last event's, else
	// the newest position known to have nothing more for the query.
	Next EventPos
	// More reports whether more events follow Next.
	More bool
	// Truncated reports that events after the position given were
	// skipped: older than the retention (pruned) or than NotBefore.
	Truncated bool
}

// Event is one event of a requester's log.
type Event struct {
	// Pos is the event's position; its ID is derived from it.
	Pos EventPos
	// Kind says what it tells.
	Kind EventKind
	// TaskID and Tool are the task's.
	TaskID task.ID
	Tool   string
	// At is when it happened.
	At time.Time
	// Status is the task's status after a status event; Outcome its
	// outcome when that status is terminal.
	Status  task.Status
	Outcome task.Outcome
	// Text is the status message of a status event, or an output's
	// text (a log line).
	Text string
	// Stream names an output's source ("emit", "stdout", ...).
	Stream string
	// Data is an emitted output's JSON value (nil for a text output).
	Data []byte
}

// ID is the event's stable ID (eventId, webhook-id).
func (e *Event) ID() string { return "evt_" + strconv.FormatInt(e.Pos.Seq, 36) }

// OutputEvent is one output event appended by AppendEvents.
type OutputEvent struct {
	// Time is when it was emitted; zero means now.
	Time time.Time
	// Stream names its source.
	Stream string
	// Text is a text output.
	Text string
	// Data is a JSON output (nil for a text one).
	Data []byte
}

// Subscription is a webhook subscription of events/subscribe.
type Subscription struct {
	// ID is derived from (Owner, URL, Name, Args) by the caller.
	ID    string
	Owner task.Owner
	// Name and Args are the event type and its arguments as given
	// (canonical JSON); Kind, TaskID and Tool what they select.
	Name   string
	Args   string
	Kind   EventKind
	TaskID task.ID
	Tool   string
	// URL is the callback.
	URL string
	// Secret signs deliveries; OldSecret, until OldUntil, too (a
	// rotation).
	Secret    string
	OldSecret string
	OldUntil  time.Time
	// Expires is when it lapses; zero means never.
	Expires time.Time
	// Created and Refreshed are when it was made and last refreshed.
	Created, Refreshed time.Time
	// From, if not nil, is the position a new subscription replays
	// after, and FromTime the oldest event time it replays.
	From     *EventPos
	FromTime time.Time
	// Active is false once deliveries were suspended after failures; a
	// refresh sets it again.
	Active bool
	// The delivery status: the last successful delivery, the category
	// of the last failure, since when it has been failing.
	LastDelivery time.Time
	LastError    string
	FailedSince  time.Time
}

// Delivery is one claimed delivery of an event to a subscription.
type Delivery struct {
	// Sub is the subscription (its URL, secrets, ID).
	Sub *Subscription
	// Event is the event to deliver.
	Event *Event
	// Attempts counts the attempts so far, this one included.
	Attempts int
	// Created is when the delivery was queued.
	Created time.Time
	// Watermark is the position every event of the subscription at or
	// before which has been delivered or abandoned: safe to persist.
	Watermark EventPos
}

// DeliveryResult is how an attempt ended.
type DeliveryResult struct {
	// Delivered: the endpoint accepted it.
	Delivered bool
	// Dead: no further attempt (the budget is spent, or the failure is
	// final).
	Dead bool
	// Suspend, with Dead, suspends the subscription's deliveries until
	// its client refreshes it (the budget was spent: the endpoint is
	// down); a final failure of one event does not.
	Suspend bool
	// Next is when to try again (neither Delivered nor Dead).
	Next time.Time
	// Error is the failure's category.
	Error string
	// At is when the attempt ended.
	At time.Time
}

// DeadLetter is a delivery given up on.
type DeadLetter struct {
	SubID    string
	Owner    task.Owner
	URL      string
	Event    *Event
	Attempts int
	Error    string
	At       time.Time
}
