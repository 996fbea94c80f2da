package engine

import (
	"context"
	"errors"
	"time"

	"github.com/mcptask/mcptask/internal/tracing"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// storeTracer makes the spans of the engine's store operations.
type storeTracer struct {
	tracer trace.Tracer
	system string // the store's db.system.name, "" if it names none
}

// newStoreTracer returns the store tracer of tp for st, nil if tp is nil.
func newStoreTracer(tp trace.TracerProvider, st store.Store) *storeTracer {
	if tp == nil {
		return nil
	}
	return &storeTracer{tracer: tp.Tracer(tracing.TracerName), system: st.DBSystem()}
}

// start starts the span name of the store operation op, a child of the
// span of ctx, on the task with the given ID ("" for none). Its attributes
// are only built when it records.
func (t *storeTracer) start(ctx context.Context, name, op string, id task.ID) (context.Context, trace.Span) {
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 3)
		if t.system != "" {
			attrs = append(attrs, attribute.String(tracing.AttrDBSystem, t.system))
		}
		attrs = append(attrs, attribute.String(tracing.AttrDBOperation, op))
		if id != "" {
			attrs = append(attrs, attribute.String(tracing.AttrTaskID, string(id)))
		}
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

// endStoreSpan ends span, recording failure (a failure of the store, see
// storeFailure) as its error status.
func endStoreSpan(span trace.Span, failure error) {
	if failure != nil && span.IsRecording() {
		span.RecordError(failure)
		span.SetStatus(codes.Error, failure.Error())
	}
	span.End()
}

// traced reports whether ctx carries a span context (a caller's span, or
// the trace context of a request's _meta): the operations made for a
// request or a task's work (create, get, update, list, delete) are only
// traced then, so that an untraced poll makes no one-span trace of its
// own.
func traced(ctx context.Context) bool { return trace.SpanContextFromContext(ctx).IsValid() }

// tracedStore forwards the calls of the Store interface to the store, in
// spans of their own (mcptask.store.<op>), children of the caller's: the
// operations for a request or a task's work when the caller is in a trace
// (see traced), the engine's background operations (claim, heartbeat,
// delete_expired) always, as roots. The engine uses it only when it has a
// TracerProvider: without one the store is called directly.
type tracedStore struct {
	store.Store
	t *storeTracer
}

// Create is the store's Create, in the span mcptask.store.create.
func (s tracedStore) Create(ctx context.Context, t *task.Task, opts store.CreateOptions) error {
	if !traced(ctx) {
		return s.Store.Create(ctx, t, opts)
	}
	ctx, span := s.t.start(ctx, tracing.SpanStore+"create", "create", t.ID)
	err := s.Store.Create(ctx, t, opts)
	endStoreSpan(span, storeFailure(err))
	return err
}

// Get is the store's Get, in the span mcptask.store.get.
func (s tracedStore) Get(ctx context.Context, id task.ID) (*task.Task, error) {
	if !traced(ctx) {
		return s.Store.Get(ctx, id)
	}
	ctx, span := s.t.start(ctx, tracing.SpanStore+"get", "get", id)
	t, err := s.Store.Get(ctx, id)
	endStoreSpan(span, storeFailure(err))
	return t, err
}

// Update is the store's Update, in the span mcptask.store.update. An
// error of the update function (its refusal) is no failure of the store.
func (s tracedStore) Update(ctx context.Context, id task.ID, fn func(t *task.Task) error) (*task.Task, error) {
	if !traced(ctx) {
		return s.Store.Update(ctx, id, fn)
	}
	ctx, span := s.t.start(ctx, tracing.SpanStore+"update", "update", id)
	var fnErr error
	t, err := s.Store.Update(ctx, id, func(t *task.Task) error {
		fnErr = fn(t)
		return fnErr
	})
	if err != nil && fnErr != nil && errors.Is(err, fnErr) {
		endStoreSpan(span, nil)
	} else {
		endStoreSpan(span, storeFailure(err))
	}
	return t, err
}

// List is the store's List, in the span mcptask.store.list. A cursor the
// store did not issue is no failure of the store.
func (s tracedStore) List(ctx context.Context, owner task.Owner, cursor string, limit int) ([]*task.Task, string, error) {
	if !traced(ctx) {
		return s.Store.List(ctx, owner, cursor, limit)
	}
	ctx, span := s.t.start(ctx, tracing.SpanStore+"list", "list", "")
	ts, next, err := s.Store.List(ctx, owner, cursor, limit)
	if errors.Is(err, store.ErrBadCursor) {
		endStoreSpan(span, nil)
	} else {
		endStoreSpan(span, storeFailure(err))
	}
	return ts, next, err
}

// Claim is the store's Claim, in the span mcptask.store.claim.
func (s tracedStore) Claim(ctx context.Context, req store.ClaimRequest) ([]*task.Task, error) {
	ctx, span := s.t.start(ctx, tracing.SpanStore+"claim", "claim", "")
	ts, err := s.Store.Claim(ctx, req)
	endStoreSpan(span, storeFailure(err))
	return ts, err
}

// Heartbeat is the store's Heartbeat, in the span mcptask.store.heartbeat.
func (s tracedStore) Heartbeat(ctx context.Context, runner string, ids []task.ID, until time.Time) ([]task.ID, error) {
	ctx, span := s.t.start(ctx, tracing.SpanStore+"heartbeat", "heartbeat", "")
	lost, err := s.Store.Heartbeat(ctx, runner, ids, until)
	endStoreSpan(span, storeFailure(err))
	return lost, err
}

// DeleteExpired is the store's DeleteExpired, in the span
// mcptask.store.delete_expired.
func (s tracedStore) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	ctx, span := s.t.start(ctx, tracing.SpanStore+"delete_expired", "delete_expired", "")
	n, err := s.Store.DeleteExpired(ctx, now)
	endStoreSpan(span, storeFailure(err))
	return n, err
}

// deleteTask is d.Delete, in the span mcptask.store.delete when the
// engine traces.
func (e *Engine) deleteTask(ctx context.Context, d store.Deleter, id task.ID) error {
	if e.tracer == nil || !traced(ctx) {
		return d.Delete(ctx, id)
	}
	ctx, span := e.tracer.start(ctx, tracing.SpanStore+"delete", "delete", id)
	err := d.Delete(ctx, id)
	endStoreSpan(span, storeFailure(err))
	return err
}

// wrapStore sets e.timed: the store, its calls traced when the engine has
// a TracerProvider and told to the observer when it has one. Without
// either the store is called directly.
func (e *Engine) wrapStore() {
	var s store.Store = e.store
	if e.opts.Observer != nil {
		// Without an observer the store is called directly: no clock
		// reads or closures on every call.
		s = timedStore{Store: s, e: e}
	}
	e.tracer = newStoreTracer(e.hooks.TracerProvider, e.store)
	if e.tracer != nil {
		// Outermost, so that the observer's timing is inside the span.
		s = tracedStore{Store: s, t: e.tracer}
	}
	e.timed = s
}
