package engine

import (
	"context"
	"errors"
	"time"

	"github.com/mcptask/mcptask/internal/tracing"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"go.opentelemetry.io/otel/trace"
)

// Observer is told of the events of an engine's tasks and of the requests
// about them, e.g. to count them as metrics (package metrics implements
// it). Its arguments are bounded by design: tool names, statuses, methods
// and reasons, never a task ID, a principal or an argument. Methods are
// called on the goroutine of the event: they must be quick and must not
// block. Set it as [Options.Observer]; nil observes nothing.
type Observer interface {
	TaskObserver
	RequestObserver
	StoreObserver
}

// TaskObserver is told of task lifecycle events, once each, by the engine
// that made the change.
type TaskObserver interface {
	// TaskCreated: a task of tool was created (an idempotent retry
	// answered with an existing task is not a creation).
	TaskCreated(tool string)
	// TaskFinished: a task of tool finished with outcome (its status
	// is outcome.Status()), age after its creation.
	TaskFinished(tool string, outcome task.Outcome, age time.Duration)
	// QueueWaited: a task that waited in the concurrency queue queue
	// started on this engine, wait after its creation.
	QueueWaited(queue string, wait time.Duration)
}

// RequestObserver is told of the requests of the tasks protocol and of
// the ones refused, by the server's adapter.
type RequestObserver interface {
	// Request: a tasks/* request (method) was answered with outcome: "ok",
	// "error", or "limited" (refused by the request rate).
	Request(method, outcome string)
	// Denied: a request named a task the requester may not see, for
	// reason (audit.ReasonUnknown, ReasonOtherOwner, ReasonExpired).
	Denied(reason string)
	// Limited: a request was refused by a per-requester limit
	// ("request_rate", "create_rate", "active_tasks", "listen_streams").
	Limited(limit string)
	// TaskRefused: a task of tool was refused before its creation, for
	// reason ("draining", "create_rate" or "active_tasks").
	TaskRefused(tool, reason string)
	// CallRouted: a task-augmented call of tool was served in mode:
	// "task", "approval" (a task held for an approval), "handoff" (a
	// task held for an operator's outcome), "sync" (answered as a plain
	// call) or "refused" (see package rollout).
	CallRouted(tool, mode string)
	// PollRaised: a requester polling faster than suggested was given a
	// raised poll interval.
	PollRaised()
}

// nopObserver observes nothing: each of its methods does nothing.
type nopObserver struct{}

func (nopObserver) TaskCreated(string)                               {}
func (nopObserver) TaskFinished(string, task.Outcome, time.Duration) {}
func (nopObserver) QueueWaited(string, time.Duration)                {}
func (nopObserver) Request(string, string)                           {}
func (nopObserver) Denied(string)                                    {}
func (nopObserver) Limited(string)                                   {}
func (nopObserver) TaskRefused(string, string)                       {}
func (nopObserver) CallRouted(string, string)                        {}
func (nopObserver) StoreCall(string, time.Duration, error)           {}
func (nopObserver) FeedReconnect()                                   {}
func (nopObserver) TaskTakenOver(string, string)                     {}
func (nopObserver) PollRaised()                                      {}

// Observer returns the engine's observer (see Options.Observer): never
// nil, one that observes nothing when none is set.
func (e *Engine) Observer() Observer {
	if e.opts.Observer == nil {
		return nopObserver{}
	}
	return e.opts.Observer
}

// observeChange tells the observer of a status change of t from from.
func (e *Engine) observeChange(t *task.Task, from task.Status) {
	if e.opts.Observer == nil || from.Terminal() || !t.Status.Terminal() {
		return
	}
	e.opts.Observer.TaskFinished(t.Tool, t.Outcome(), e.now().Sub(t.CreatedAt))
}

// StoreObserver is told of the engine's use of its store.
type StoreObserver interface {
	// StoreCall: the store call op ("create", "get", "update", "list",
	// "claim", "heartbeat", "delete_expired", "start_queued", "view")
	// took d and failed with err, or succeeded (nil). Answers that are
	// the caller's concern (not found, a duplicate, a quota, an update
	// function's own error, a cancelled context) count as successes.
	StoreCall(op string, d time.Duration, err error)
	// FeedReconnect: the store's change feed had failed and the engine
	// follows it again.
	FeedReconnect()
	// TaskTakenOver: the engine took over a task of tool left by a
	// stopped process or an expired lease, with outcome: "rerun",
	// "failed_unknown" (its work is not re-runnable), "failed_attempts"
	// (started too often), "reconciled" (settled by Hooks.Reconcile),
	// or "not_rerun" (the task ended or was taken elsewhere meanwhile, or
	// the store failed the re-run).
	TaskTakenOver(tool, outcome string)
}

// timedStore forwards the calls of the Store interface to the store,
// telling the observer of each.
type timedStore struct {
	store.Store
	e *Engine
}

// observe tells the observer of one call of op that started at start.
func (s timedStore) observe(op string, start time.Time, err error) {
	if s.e.opts.Observer == nil {
		return
	}
	s.e.opts.Observer.StoreCall(op, time.Since(start), storeFailure(err))
}

// storeFailure returns err if it is a failure of the store, nil if it is
// an answer that is the caller's concern (not found, a duplicate, a quota,
// a cancelled context) or none.
func storeFailure(err error) error {
	if err == nil {
		return nil
	}
	var dup *store.DuplicateError
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrTooManyActive) ||
		errors.As(err, &dup) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// Create is the store's Create, timed as "create".
func (s timedStore) Create(ctx context.Context, t *task.Task, opts store.CreateOptions) error {
	start := time.Now()
	err := s.Store.Create(ctx, t, opts)
	s.observe("create", start, err)
	return err
}

// Get is the store's Get, timed as "get".
func (s timedStore) Get(ctx context.Context, id task.ID) (*task.Task, error) {
	start := time.Now()
	t, err := s.Store.Get(ctx, id)
	s.observe("get", start, err)
	return t, err
}

// Update is the store's Update, timed as "update".
func (s timedStore) Update(ctx context.Context, id task.ID, fn func(t *task.Task) error) (*task.Task, error) {
	start := time.Now()
	var fnErr error
	t, err := s.Store.Update(ctx, id, func(t *task.Task) error {
		fnErr = fn(t)
		return fnErr
	})
	if err != nil && errors.Is(err, fnErr) {
		s.observe("update", start, nil) // the function's own refusal
	} else {
		s.observe("update", start, err)
	}
	return t, err
}

// List is the store's List, timed as "list".
func (s timedStore) List(ctx context.Context, owner task.Owner, cursor string, limit int) ([]*task.Task, string, error) {
	start := time.Now()
	ts, next, err := s.Store.List(ctx, owner, cursor, limit)
	if errors.Is(err, store.ErrBadCursor) {
		s.observe("list", start, nil)
	} else {
		s.observe("list", start, err)
	}
	return ts, next, err
}

// Claim is the store's Claim, timed as "claim".
func (s timedStore) Claim(ctx context.Context, req store.ClaimRequest) ([]*task.Task, error) {
	start := time.Now()
	ts, err := s.Store.Claim(ctx, req)
	s.observe("claim", start, err)
	return ts, err
}

// Heartbeat is the store's Heartbeat, timed as "heartbeat".
func (s timedStore) Heartbeat(ctx context.Context, runner string, ids []task.ID, until time.Time) ([]task.ID, error) {
	start := time.Now()
	lost, err := s.Store.Heartbeat(ctx, runner, ids, until)
	s.observe("heartbeat", start, err)
	return lost, err
}

// DeleteExpired is the store's DeleteExpired, timed as "delete_expired".
func (s timedStore) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	start := time.Now()
	n, err := s.Store.DeleteExpired(ctx, now)
	s.observe("delete_expired", start, err)
	return n, err
}

// startQueued is q.StartQueued, in the span mcptask.store.start_queued
// when the engine traces, told to the observer.
func (e *Engine) startQueued(ctx context.Context, q store.Queuer, req store.QueueRequest) ([]*task.Task, error) {
	if e.tracer != nil {
		var span trace.Span
		ctx, span = e.tracer.start(ctx, tracing.SpanStore+"start_queued", "start_queued", "")
		ts, err := e.observedStartQueued(ctx, q, req)
		endStoreSpan(span, storeFailure(err))
		return ts, err
	}
	return e.observedStartQueued(ctx, q, req)
}

// observedStartQueued is q.StartQueued, told to the observer.
func (e *Engine) observedStartQueued(ctx context.Context, q store.Queuer, req store.QueueRequest) ([]*task.Task, error) {
	if e.opts.Observer == nil {
		return q.StartQueued(ctx, req)
	}
	start := time.Now()
	ts, err := q.StartQueued(ctx, req)
	timedStore{e: e}.observe("start_queued", start, err)
	return ts, err
}
