package engine

import (
	"context"
	"errors"
	"time"

	"github.com/mcptask/mcptask/task"
)

// A write of running work that failed transiently is tried again after
// these pauses (doubling), for up to the lease period.
const (
	transientRetryMin = 50 * time.Millisecond
	transientRetryMax = time.Second
)

// Transient reports whether err, returned by one of the engine's methods,
// comes from a transient failure of the store (see
// [store.ErrorClassifier]): the same request may succeed a moment later.
func (e *Engine) Transient(err error) bool { return e.transient(err) }

// transient reports whether a store error is transient (see
// [store.ErrorClassifier]).
func (e *Engine) transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return e.store.Transient(err)
}

// writeForWork is write for the writes the work of a running task makes
// through its handle (status messages, input requests): one that fails
// transiently (the database restarting, a dropped connection, a
// serialization failure) is tried again, backing off, for up to the lease
// period, in which no other engine may take the task over, instead of
// failing the work on a store outage that nothing else noticed. fn may
// run more than once and must give the same result when a previous
// attempt did land.
func (e *Engine) writeForWork(ctx context.Context, r *run, what string, fn func(*task.Task) error) (*task.Task, error) {
	if err := r.ensureCreated(ctx); err != nil {
		return nil, err
	}
	giveUp := time.Now().Add(e.opts.Lease)
	wait := transientRetryMin
	for attempt := 1; ; attempt++ {
		var fnErr error
		t, err := e.write(ctx, r.id, func(t *task.Task) error {
			fnErr = fn(t)
			return fnErr
		})
		if err == nil && attempt > 1 {
			e.log.Info("task write succeeded after retries", "task", r.id, "tool", r.tool, "write", what, "attempts", attempt)
		}
		if err == nil || fnErr != nil || !e.transient(err) || time.Now().Add(wait).After(giveUp) {
			return t, err
		}
		if attempt == 1 {
			e.log.Warn("task write failed on a transient store error; trying again within the lease", "task", r.id, "tool", r.tool, "write", what, "err", err)
		}
		select {
		case <-ctx.Done():
			return t, err
		case <-e.base.Done():
			return t, err
		case <-time.After(wait):
		}
		wait = min(2*wait, transientRetryMax)
	}
}
