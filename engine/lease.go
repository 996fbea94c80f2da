package engine

import (
	"context"
	"errors"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// errLost means this engine no longer holds a task: another engine took it
// over after the lease expired, or it was handed back.
var errLost = errors.New("the task is held by another engine")

// heartbeat is the step of the lease renewal service: it renews the
// leases of the running work and stops the work of tasks that ended
// elsewhere or were taken over (the polling fallback of the change feed).
func (e *Engine) heartbeat(ctx context.Context) {
	e.mu.Lock()
	ids := make([]task.ID, 0, len(e.runs))
	for id, r := range e.runs {
		if r.stored() { // not a run whose task is not created yet
			ids = append(ids, id)
		}
	}
	e.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	// A failed renewal (the database restarting, a dropped connection) is
	// tried again at once, backing off, within this round's timeout: a
	// short outage of the store must not let the leases lapse, or another
	// engine takes over work that is still running here.
	var lost []task.ID
	var err error
	for wait := heartbeatRetryMin; ; wait = min(2*wait, heartbeatRetryMax) {
		lost, err = e.timed.Heartbeat(ctx, e.id, ids, e.now().Add(e.opts.Lease))
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			if e.base.Err() == nil { // not shutting down: the store stayed unreachable
				e.log.Error("renewing task leases", "err", err)
			}
			return
		}
		e.log.Warn("renewing task leases failed; trying again", "err", err, "pause", wait)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	for _, id := range lost {
		e.stopLost(ctx, id)
	}
}

// stopLost stops the local work of a task this engine no longer runs: it
// ended (e.g. cancelled through another engine) or was taken over.
func (e *Engine) stopLost(ctx context.Context, id task.ID) {
	e.mu.Lock()
	r := e.runs[id]
	e.mu.Unlock()
	if r == nil || !r.stored() {
		return
	}
	t, err := e.timed.Get(ctx, id)
	switch {
	case err == nil && t.Status.Terminal():
		if r.returned.Load() {
			return // the work has returned: most likely its own outcome
		}
		e.log.Info("stopping work of a task ended elsewhere", "task", id, "status", t.Status)
		r.cancel(context.Canceled)
	case errors.Is(err, store.ErrNotFound) || (err == nil && t.Runner != e.id):
		e.log.Warn("stopping work of a task this engine lost", "task", id)
		r.cancel(errLost)
	}
}

// feedLoop is the change-feed follower: it follows the store's change
// feed, so that changes made by other engines wake this engine's waiters
// and stop work cancelled elsewhere at once, following it again
// FeedRetryInterval after it failed. It closes listening once the feed is
// first in effect. After a reconnection it re-checks every task running
// here, and wakes every waiter of Watch, since the changes made while the
// feed was down were not announced.
func (e *Engine) feedLoop(feed store.ChangeFeed, listening chan<- struct{}) {
	first := true
	ready := func() {
		e.feedLive.Store(true)
		if first {
			first = false
			close(listening)
			return
		}
		e.wakeAllWatchers()
		e.recheckRuns()
	}
	for {
		err := feed.Changes(e.base, ready, e.remoteChange)
		e.feedLive.Store(false)
		if e.base.Err() != nil {
			return
		}
		e.log.Warn("task change feed interrupted; polling covers the gap", "err", err)
		select {
		case <-e.base.Done():
			return
		case <-time.After(e.opts.FeedRetryInterval):
		}
		e.Observer().FeedReconnect()
	}
}

// recheckRuns treats every task running here as changed elsewhere: a
// cancellation or an answer that arrived unannounced is acted on now.
func (e *Engine) recheckRuns() {
	e.mu.Lock()
	ids := make([]task.ID, 0, len(e.runs))
	for id, r := range e.runs {
		if r.stored() { // not a run whose task is not created yet
			ids = append(ids, id)
		}
	}
	e.mu.Unlock()
	for _, id := range ids {
		e.remoteChange(id)
	}
}

// remoteChange reacts to a change announced by the store.
func (e *Engine) remoteChange(id task.ID) {
	e.wakeWatchers(id)
	e.mu.Lock()
	r := e.runs[id]
	queues := len(e.queues) > 0
	_, waitingHere := e.waitingWork[id]
	e.mu.Unlock()
	if r == nil && waitingHere {
		// A task created waiting here changed: if another engine started
		// or ended it, its work will never run here.
		e.goBackground(func() {
			ctx, cancel := context.WithTimeout(e.base, e.opts.FeedCheckTimeout)
			defer cancel()
			if t, err := e.timed.Get(ctx, id); errors.Is(err, store.ErrNotFound) ||
				err == nil && (t.Status.Terminal() || !t.Queued && t.Runner != e.id) {
				e.mu.Lock()
				delete(e.waitingWork, id)
				e.mu.Unlock()
			}
		})
	}
	if r == nil {
		if queues {
			// Perhaps a task of a queue that ended elsewhere: a slot
			// may have freed.
			e.kickQueues()
		}
		return
	}
	r.signal() // input may have arrived
	// Read the task apart from the feed, which must not wait: counted for
	// Shutdown, which waits for it, and bounded by its own timeout.
	e.goBackground(func() {
		ctx, cancel := context.WithTimeout(e.base, e.opts.FeedCheckTimeout)
		defer cancel()
		// Ended elsewhere (e.g. cancelled through another engine), or
		// claimed by another engine: stop the work here at once.
		e.stopLost(ctx, id)
	})
}
