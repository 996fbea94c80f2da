package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// ErrNoQueue is returned by Start for a StartSpec.Queue that was not
// declared with [Engine.SetQueue].
var ErrNoQueue = errors.New("engine: unknown queue (declare it with SetQueue)")

// SetQueue declares the concurrency queue name with a cap of max running
// tasks (max > 0), across every engine sharing the store; each engine
// declares the queues whose tasks it may start, with the same cap. A task
// started with StartSpec.Queue = name beyond the cap is created at once,
// waiting (working, with a status message saying how many tasks are ahead
// of it), and starts when a slot frees, in turns between the owners of
// the waiting tasks (see [store.Queuer.StartQueued]), on whichever
// engine sharing the store sees it first. The engine builds the work of a
// waiting task from its stored call (see Hooks.WorkOf). SetQueue must be
// called before Run.
func (e *Engine) SetQueue(name string, max int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.started:
		return errors.New("engine: SetQueue after Run")
	case name == "":
		return errors.New("engine: SetQueue with an empty name")
	case max <= 0:
		return fmt.Errorf("engine: queue %q: the cap must be positive, not %d", name, max)
	case isGate(name):
		return fmt.Errorf("engine: queue %q: names starting with %q are the gates'", name, GatePrefix)
	}
	if e.queues == nil {
		e.queues = map[string]int{}
	}
	e.queues[name] = max
	return nil
}

// KickQueues asks the engine to look now for waiting tasks that can
// start, e.g. once Hooks.Hold no longer holds a queue.
func (e *Engine) KickQueues() { e.kickQueues() }

// queueCap returns the cap of a declared queue.
func (e *Engine) queueCap(name string) (int, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	max, ok := e.queues[name]
	return max, ok
}

// hasQueues reports whether any queue is declared.
func (e *Engine) hasQueues() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.queues) > 0
}

// kickQueues asks the queue service for a round now: a slot may have
// freed. Kicks coalesce.
func (e *Engine) kickQueues() {
	select {
	case e.queueKick <- struct{}{}:
	default:
	}
}

// queueService is the queue service: a round every QueueInterval, and
// one whenever kicked, until shutdown.
func (e *Engine) queueService() {
	tick := time.NewTicker(e.opts.QueueInterval)
	defer tick.Stop()
	for {
		select {
		case <-e.base.Done():
			return
		case <-tick.C:
		case <-e.queueKick:
		}
		ctx, cancel := context.WithTimeout(e.base, e.opts.QueueTimeout)
		e.startWaiting(ctx)
		cancel()
	}
}

// startWaiting starts, in every declared queue, the waiting tasks that
// fit under its cap, and runs their work here.
func (e *Engine) startWaiting(ctx context.Context) {
	q := e.store
	e.mu.Lock()
	queues := maps.Clone(e.queues)
	e.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(queues)) {
		if e.isClosed() || ctx.Err() != nil {
			return
		}
		if e.hooks.Hold != nil && e.hooks.Hold(name) {
			continue
		}
		started, err := e.startQueued(ctx, q, store.QueueRequest{
			Runner: e.id, Queue: name, Max: queues[name], Now: e.now(), Lease: e.opts.Lease,
		})
		if err != nil {
			if e.base.Err() == nil {
				e.log.Warn("starting waiting tasks", "queue", name, "err", err)
			}
			continue
		}
		for _, t := range started {
			e.launchWaiting(ctx, t)
		}
	}
}

// startUndeclared starts, at Run of an exclusive engine (the only one on
// its store), the waiting tasks of queues it does not declare: their cap
// was removed from the configuration, so nothing holds them back any
// more, and without this they would wait for ever. Engines sharing a
// store only say so: another engine may still declare the queue (a
// rolling change of the configuration), and starting them all here would
// break its cap.
func (e *Engine) startUndeclared(ctx context.Context) {
	waiting, err := e.store.WaitingQueues(ctx)
	if err != nil {
		e.log.Warn("looking for tasks waiting in queues", "err", err)
		return
	}
	for _, name := range slices.Sorted(maps.Keys(waiting)) {
		if _, declared := e.queueCap(name); declared || isGate(name) {
			continue
		}
		if !e.opts.Exclusive {
			e.log.Warn("tasks wait in a queue this server does not declare: another server sharing the store must declare it (with the same cap), or they wait for ever", "queue", name, "waiting", waiting[name])
			continue
		}
		if e.hooks.Hold != nil && e.hooks.Hold(name) {
			continue
		}
		e.log.Warn("tasks wait in a queue that is no longer declared (its cap was removed): they start now", "queue", name, "waiting", waiting[name])
		started, err := e.startQueued(ctx, e.store, store.QueueRequest{Runner: e.id, Queue: name, Max: math.MaxInt32, Now: e.now(), Lease: e.opts.Lease})
		if err != nil {
			e.log.Error("starting the tasks of an undeclared queue", "queue", name, "err", err)
			continue
		}
		for _, t := range started {
			e.launchWaiting(ctx, t)
		}
	}
}

// launchWaiting runs the work of a task that StartQueued just started
// for this engine.
func (e *Engine) launchWaiting(ctx context.Context, t *task.Task) {
	e.changed(t)
	if t.Queue != "" {
		e.Observer().QueueWaited(t.Queue, e.now().Sub(t.CreatedAt))
	}
	e.mu.Lock()
	w, local := e.waitingWork[t.ID]
	delete(e.waitingWork, t.ID)
	e.mu.Unlock()
	work, parent := w.work, w.ctx
	if !local {
		parent = context.Background()
		if e.hooks.WorkOf != nil {
			work = e.hooks.WorkOf(ctx, t)
		}
	}
	if work == nil {
		e.failUnknown(ctx, t.ID, "The task waited in its queue, but the server cannot start its work (its tool is gone, or its call cannot be read back).")
		return
	}
	e.mu.Lock()
	closed := e.closed
	if !closed {
		e.wg.Add(1)
	}
	e.mu.Unlock()
	if closed {
		// Started as Shutdown began: back to the head of the queue, for
		// the next engine.
		e.requeue(ctx, t.ID)
		return
	}
	// A cancel made between the start and now (through this engine or
	// another) found no run to stop: register the run, then look again,
	// so that either the cancel finds the run or this read finds the
	// cancel, and cancelled work never starts.
	r, stopOnShutdown := e.register(parent, t)
	if cur, err := e.timed.Get(ctx, t.ID); err != nil || cur.Status.Terminal() || cur.Runner != e.id {
		e.unregister(r, stopOnShutdown)
		if err == nil && !cur.Status.Terminal() {
			return // another engine holds it (a takeover): its business
		}
		e.log.Info("task ended (or could not be read) as it left its queue: its work does not start", "task", t.ID, "tool", t.Tool, "err", err)
		if err != nil {
			e.requeue(ctx, t.ID)
		}
		e.kickQueues() // its slot is free again
		return
	}
	e.log.Info("task started from its queue", "task", t.ID, "tool", t.Tool, "queue", t.Queue,
		"waited", t.LastUpdatedAt.Sub(t.CreatedAt).Round(time.Millisecond))
	e.start(r, stopOnShutdown, work)
}

// requeue puts a task this engine started from its queue, but did not
// run, back to waiting: its place is its creation time, so it is first
// again.
func (e *Engine) requeue(ctx context.Context, id task.ID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.ClaimTimeout)
	defer cancel()
	_, err := e.write(ctx, id, func(t *task.Task) error {
		if t.Status.Terminal() || t.Runner != e.id {
			return errLost
		}
		t.Queued, t.Runner, t.LeaseExpiresAt, t.StartedAt = true, "", time.Time{}, time.Time{}
		t.Attempts = max(t.Attempts-1, 0)
		t.StatusMessage = task.QueuedMessage(0)
		return nil
	})
	if err != nil && !errors.Is(err, errLost) {
		e.log.Error("putting a task back in its queue at shutdown", "task", id, "err", err)
	}
}
