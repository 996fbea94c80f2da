package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// GatePrefix starts the names of gates (see StartSpec.Gate): queues no
// queue service starts, and that no concurrency queue may be named.
const GatePrefix = "gate:"

// NotHeldError is returned by [Engine.Release] and [Engine.Resolve] for a
// task that is not held in the gate (any more): Task is the task as it
// is now, e.g. released or resolved by another operator first.
type NotHeldError struct {
	Task *task.Task
}

func (e *NotHeldError) Error() string {
	return fmt.Sprintf("engine: task %s is not held (it is %s)", e.Task.ID, e.Task.Status)
}

// Held reports whether t is held in gate.
func Held(t *task.Task, gate string) bool {
	return t.Queued && t.Queue == gate && !t.Status.Terminal()
}

// startHeld creates t held in spec.Gate: working, with no engine
// holding it and its work not started, until Release or Resolve.
func (e *Engine) startHeld(parent context.Context, t *task.Task, spec StartSpec) (*task.Task, error) {
	defer e.wg.Done()
	t.Queue, t.Queued = spec.Gate, true
	t.Runner, t.LeaseExpiresAt, t.Attempts, t.StartedAt = "", time.Time{}, 0, time.Time{}
	t.StatusMessage = task.CapStatusMessage(spec.GateMessage)
	if err := e.timed.Create(store.WithInstance(parent, e.id), t, store.CreateOptions{MaxActive: spec.MaxActive}); err != nil {
		return e.notCreated(err, spec)
	}
	e.created(parent, t)
	e.log.Info("task held", "task", t.ID, "tool", t.Tool, "gate", spec.Gate, "status", t.StatusMessage)
	return t.Clone(), nil
}

// Release lets the task id held in gate go on, exactly once however many
// release it at once, on any engine sharing the store: into the
// concurrency queue queue (declared with SetQueue), or, queue "", at
// once on this engine, its work built by Hooks.WorkOf. msg is its status
// message meanwhile. A task not held there is a *NotHeldError. Like
// Start, a Release counted before Shutdown began runs its work (which
// Shutdown then stops and resolves by the recovery policy); one after
// is ErrClosed and changes nothing.
func (e *Engine) Release(ctx context.Context, id task.ID, gate, queue, msg string) (*task.Task, error) {
	if queue != "" {
		if _, ok := e.queueCap(queue); !ok {
			return nil, fmt.Errorf("%w: %q", ErrNoQueue, queue)
		}
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	e.wg.Add(1) // Shutdown waits for this release and the work it starts
	e.mu.Unlock()
	counted := true
	defer func() {
		if counted {
			e.wg.Done()
		}
	}()
	now := e.now()
	var notHeld *task.Task
	t, err := e.write(ctx, id, func(t *task.Task) error {
		if !Held(t, gate) {
			notHeld = t.Clone()
			return errNotHeld
		}
		t.StatusMessage = task.CapStatusMessage(msg)
		t.LastUpdatedAt = now
		t.Queue = queue
		if queue != "" {
			return nil
		}
		t.Queued = false
		t.Runner, t.LeaseExpiresAt = e.id, now.Add(e.opts.Lease)
		t.Attempts++
		t.StartedAt = now
		return nil
	})
	if errors.Is(err, errNotHeld) {
		return nil, &NotHeldError{Task: notHeld}
	}
	if err != nil {
		return nil, err
	}
	if queue != "" {
		e.kickQueues()
		return t.Clone(), nil
	}
	var work Work
	if e.hooks.WorkOf != nil {
		work = e.hooks.WorkOf(ctx, t)
	}
	if work == nil {
		e.failUnknown(ctx, t.ID, "The task was released, but the server cannot start its work (its tool is gone, or its call cannot be read back).")
		return t.Clone(), nil
	}
	// A cancel between the release and now found no run to stop:
	// register the run, then look again (as a start from a queue does).
	r, stopOnShutdown := e.register(context.Background(), t)
	cur, err := e.timed.Get(context.WithoutCancel(ctx), t.ID)
	if err == nil && (cur.Status.Terminal() || cur.Runner != e.id) {
		counted = false
		e.unregister(r, stopOnShutdown)
		return t.Clone(), nil
	}
	if err != nil {
		// The task is released to this engine: run it; a cancel this read
		// missed reaches the run at its next heartbeat.
		e.log.Warn("reading a released task again before its work starts", "task", t.ID, "err", err)
	}
	counted = false
	e.start(r, stopOnShutdown, work)
	return t.Clone(), nil
}

// Resolve ends the task id held in gate without running its work: fn
// sets its outcome (t.Complete, t.Fail, t.Cancel). Exactly one of many
// concurrent Resolves and Releases wins; a task not held there is a
// *NotHeldError.
func (e *Engine) Resolve(ctx context.Context, id task.ID, gate string, fn func(t *task.Task, now time.Time) error) (*task.Task, error) {
	now := e.now()
	var notHeld *task.Task
	t, err := e.write(ctx, id, func(t *task.Task) error {
		if !Held(t, gate) {
			notHeld = t.Clone()
			return errNotHeld
		}
		if err := fn(t, now); err != nil {
			return err
		}
		if !t.Status.Terminal() {
			return errors.New("engine: Resolve left the task unfinished")
		}
		t.Queued, t.Queue = false, ""
		return nil
	})
	if errors.Is(err, errNotHeld) {
		return nil, &NotHeldError{Task: notHeld}
	}
	if err != nil {
		return nil, err
	}
	return t.Clone(), nil
}

var errNotHeld = errors.New("engine: the task is not held")

// isGate reports whether queue names a gate.
func isGate(queue string) bool { return strings.HasPrefix(queue, GatePrefix) }
