package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/task"
)

// Retrying the write of a task's outcome: the first pause, doubling up
// to the last.
const (
	outcomeRetryMin = 100 * time.Millisecond
	outcomeRetryMax = 5 * time.Second
)

// recordOutcome writes the outcome of r's work (fn) to the store. A write
// that fails (a full disk, a lost database connection) does not lose the
// outcome: it is kept and written again, backing off, until it lands, the
// task turns out ended or lost to another engine, or the engine shuts down
// (the next start then resolves the task by its recovery policy). Meanwhile
// the run stays registered, so its lease is renewed, and [Engine.Health]
// reports the failure.
func (e *Engine) recordOutcome(ctx context.Context, r *run, fn func(*task.Task) error) (*task.Task, error) {
	wctx := context.WithoutCancel(ctx)
	t, err := e.write(wctx, r.id, fn)
	wait := outcomeRetryMin
	for failing := false; err != nil && !settled(err); {
		if !failing {
			failing = true
			e.log.Error("recording task outcome failed; retrying until it lands", "task", r.id, "tool", r.tool, "err", err)
			defer e.outcomeRecorded(r.id)
		}
		e.outcomeFailing(r.id, err)
		select {
		case <-e.base.Done():
			e.log.Error("shutting down with a task outcome not recorded; the next start resolves the task", "task", r.id, "tool", r.tool, "err", err)
			return nil, err
		case <-time.After(wait):
		}
		if context.Cause(r.ctx) == errLost {
			return nil, errLost // another engine has the task now
		}
		wait = min(2*wait, outcomeRetryMax)
		if t, err = e.write(wctx, r.id, fn); err == nil {
			e.log.Info("task outcome recorded after retries", "task", r.id, "tool", r.tool)
		}
	}
	return t, err
}

// settled reports whether a failed outcome write must not be retried: the
// task ended meanwhile, or another engine holds it.
func settled(err error) bool {
	var te *task.TransitionError
	var term *TerminalError
	return errors.As(err, &te) || errors.As(err, &term) || errors.Is(err, errLost) || errors.Is(err, ErrNotFound)
}

func (e *Engine) outcomeFailing(id task.ID, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failing == nil {
		e.failing = map[task.ID]error{}
	}
	e.failing[id] = err
	e.lastWriteErr = err
}

func (e *Engine) outcomeRecorded(id task.ID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.failing, id)
}

// Health reports whether the engine can record what its tasks do: an
// error while the outcome of some task's finished work cannot be written
// to the store (it is being retried), nil otherwise. A health endpoint
// answers unhealthy with it.
func (e *Engine) Health() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := len(e.failing); n > 0 {
		return fmt.Errorf("recording the outcome of %d finished task(s) fails (retrying): %v", n, e.lastWriteErr)
	}
	return nil
}
