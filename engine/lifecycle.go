package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// New returns an engine on opts.Store.
func New(opts Options) (*Engine, error) {
	if opts.Store == nil {
		return nil, errors.New("engine: Options.Store is required")
	}
	e := &Engine{
		opts:   opts,
		store:  opts.Store,
		log:    opts.Logger,
		now:    opts.Now,
		id:     opts.InstanceID,
		policy: opts.Policy,
		runs:   map[task.ID]*run{},

		queueKick: make(chan struct{}, 1),
	}
	e.wrapStore()
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.id == "" {
		e.id = "engine-" + string(task.NewID())[:12]
	}
	if err := e.opts.withDefaults(); err != nil {
		return nil, err
	}
	e.base, e.stop = context.WithCancel(context.Background())
	return e, nil
}

// InstanceID returns the name this engine records in Task.Runner.
func (e *Engine) InstanceID() string { return e.id }

// Run resolves the tasks a dead process left non-terminal (by
// Hooks.Recover), then starts the background services, each on a goroutine of
// its own with its own interval and per-call timeout (see [Options]): the
// renewal of leases, the takeover of expired leases,
// the sweeper, and on a store with a change feed the follower of the
// feed. It returns once the feed is in effect (or after 10 s, polling
// covering the changes until it is). Call it once, before serving
// requests.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.started {
		e.mu.Unlock()
		return errors.New("engine: Run called twice")
	}
	e.started = true
	e.mu.Unlock()
	if err := e.claimOrphans(ctx, true); err != nil {
		return err
	}
	e.startUndeclared(ctx)
	e.startService(service{
		interval: e.opts.HeartbeatInterval,
		timeout:  e.opts.HeartbeatTimeout,
		jitter:   true,
		step:     e.heartbeat,
	})
	// An exclusive engine runs the takeover service too: a task of its own
	// whose lease lapsed with no work running for it (its outcome, or its
	// re-run, could not be recorded) is resolved instead of staying
	// unfinished until the next start.
	e.startService(service{
		interval: e.opts.ClaimInterval,
		timeout:  e.opts.ClaimTimeout,
		jitter:   true,
		step:     e.claimExpired,
	})
	if e.opts.SweepInterval > 0 {
		e.startService(service{
			interval: e.opts.SweepInterval,
			timeout:  e.opts.SweepTimeout,
			step: func(ctx context.Context) {
				e.sweep(ctx)
				e.sweepLedger(ctx)
			},
		})
	}
	if e.hasQueues() {
		// Tasks left waiting by earlier processes start now, if there
		// is room.
		e.kickQueues()
		e.goBackground(e.queueService)
	}
	if feed, ok := e.store.(store.ChangeFeed); ok {
		// Wait (a little) for the feed to be in effect, so that changes
		// other engines make once Run has returned are announced, not
		// left to the heartbeat's polling.
		listening := make(chan struct{})
		if e.goBackground(func() { e.feedLoop(feed, listening) }) {
			select {
			case <-listening:
			case <-ctx.Done():
			case <-time.After(feedStartWait):
				e.log.Warn("the task change feed is not listening yet; until it is, polling covers changes made elsewhere", "waited", feedStartWait)
			}
		}
	}
	return nil
}

// isClosed reports whether Shutdown has begun.
func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// Audit returns the engine's audit trail (see Options.Audit); it may be
// nil, which writes nothing.
func (e *Engine) Audit() *audit.Logger { return e.opts.Audit }

// Now returns the engine's clock's time (Options.Now).
func (e *Engine) Now() time.Time { return e.now() }

// Shutdown stops accepting tasks, waits for running work until ctx is done,
// then cancels what still runs and resolves it by its recovery policy:
// re-runnable work is handed back (left working with no runner, re-run at the
// next start), other work fails with an "outcome unknown" error. It then
// stops the background services. Shutdown returns when every task's work
// has returned, and every store call the engine made in the background
// (each bounded by its per-call timeout, see [Options]) too: once it has
// returned, the caller may close the store.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	waiting := make([]*run, 0, len(e.runs))
	for _, r := range e.runs {
		waiting = append(waiting, r)
	}
	e.mu.Unlock()
	// Work waiting for the client cannot finish within the grace: stop it
	// now (RequestInput stops work that starts waiting later).
	for _, r := range waiting {
		if r.waiting.Load() > 0 {
			r.cancel(errShutdownWaiting)
		}
	}
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		e.stop() // cancels every running work with errShutdown
		select {
		case <-done:
		case <-time.After(shutdownGrace):
			// Work that ignores its context must not leave its task
			// dangling: resolve it now; its late outcome is dropped.
			e.mu.Lock()
			left := make([]*run, 0, len(e.runs))
			for _, r := range e.runs {
				left = append(left, r)
			}
			e.mu.Unlock()
			for _, r := range left {
				e.resolveInterrupted(r, false)
			}
		}
	}
	e.stopBackground()
	return nil
}

// shutdownGrace is how long Shutdown waits for cancelled work to return.
const shutdownGrace = 5 * time.Second

// feedStartWait bounds how long Run waits for the store's change feed to
// be in effect.
const feedStartWait = 10 * time.Second

// Store returns the store the engine runs on (for the operator surfaces
// and the fleet's switches; tasks are changed through the engine).
func (e *Engine) Store() store.Store { return e.store }
