package engine

import (
	"context"
	"math/rand/v2"
	"time"
)

// A failed lease renewal is tried again after these pauses (doubling),
// within the round's HeartbeatTimeout.
const (
	heartbeatRetryMin = 50 * time.Millisecond
	heartbeatRetryMax = time.Second
)

// A service is one of the engine's periodic background services (lease
// renewal, takeover of expired leases, sweeping): step runs every
// interval, on a goroutine of the service's own, each call under a
// timeout of its own, so that a store call that hangs in one service
// delays no other (a hung Claim cannot stall the renewal of leases).
type service struct {
	interval time.Duration
	timeout  time.Duration
	// jitter starts the service at a random point of its first interval,
	// so that engines started together do not call the store in step.
	jitter bool
	step   func(ctx context.Context)
}

// startService runs sv until shutdown, unless Shutdown has already
// stopped the background services.
func (e *Engine) startService(sv service) {
	e.goBackground(func() { sv.run(e.base) })
}

// run calls sv.step every sv.interval until base is done.
func (sv service) run(base context.Context) {
	if sv.jitter {
		select {
		case <-base.Done():
			return
		case <-time.After(rand.N(sv.interval)):
		}
	}
	tick := time.NewTicker(sv.interval)
	defer tick.Stop()
	for {
		select {
		case <-base.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(base, sv.timeout)
		sv.step(ctx)
		cancel()
	}
}

// goBackground runs fn on a goroutine that Shutdown waits for, and
// reports whether it does: once Shutdown has stopped the background
// services (and waits for them), nothing more is started.
func (e *Engine) goBackground(fn func()) bool {
	e.mu.Lock()
	if e.bgStopped {
		e.mu.Unlock()
		return false
	}
	e.bg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.bg.Done()
		fn()
	}()
	return true
}

// stopBackground stops the background services and every goroutine of
// goBackground, and waits for them to return.
func (e *Engine) stopBackground() {
	e.stop()
	e.mu.Lock()
	e.bgStopped = true
	e.mu.Unlock()
	e.bg.Wait()
}
