// Package push follows tasks for the clients that asked to be told of their
// changes instead of polling, on either wire: [Follow] turns the engine's
// change signal (its own changes and, on PostgreSQL, the change feed of
// every instance) into a coalesced sequence of task states, and [Splice]
// lets those states be written as server-sent events into a stream served
// by the go-sdk's own Streamable HTTP handler.
//
//	err := push.Follow(ctx, eng, owner, id, push.Options{MinInterval: 50 * time.Millisecond},
//		func(t *task.Task) error { return stream.Event(notification(t)) })
package push

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
)

// Defaults of [Options].
const (
	// DefaultMinInterval is the least time between two notifications of
	// one task to one client: changes closer together are coalesced into
	// the last of them.
	DefaultMinInterval = 50 * time.Millisecond
	// DefaultRecheckInterval is how often a followed task is read again
	// without a change signal: changes made by another process on a store
	// without a change feed in effect are seen within it.
	DefaultRecheckInterval = 5 * time.Second
	// announcedRecheckInterval is how often a followed task is read again
	// while the store's change feed is in effect (every change wakes the
	// follower, and its restart too): a safety net only. At 10,000
	// streams, re-reading every 5 s took 13 % of a core of an idle server
	// (bench/README.md).
	announcedRecheckInterval = time.Minute
	// DefaultMaxStreams is the default cap on the notification streams
	// (subscriptions/listen) one requester may hold open at once.
	DefaultMaxStreams = 16
	// DefaultMaxTasksPerStream is the default cap on the task IDs one
	// subscriptions/listen stream may follow.
	DefaultMaxTasksPerStream = 256
)

// Options configures task notifications. The zero value uses the defaults.
type Options struct {
	// MinInterval coalesces notifications: after one is sent, the next one
	// for the same task and client waits until MinInterval has passed and
	// then carries the task as it is then. Zero means DefaultMinInterval;
	// negative sends every change observed.
	MinInterval time.Duration
	// KeepAlive, when positive, sends the current state again after
	// KeepAlive without a change while the task is not terminal, for
	// clients that drop a task they have not heard of for a while. Zero
	// (the default) sends nothing without a change.
	KeepAlive time.Duration
	// RecheckInterval bounds the time a change made elsewhere without a
	// change signal goes unnoticed. Zero means DefaultRecheckInterval.
	RecheckInterval time.Duration
	// MaxStreams caps the subscriptions/listen streams with task IDs one
	// requester holds open at once; a request beyond it is refused. Zero
	// means DefaultMaxStreams; negative sets no cap.
	MaxStreams int
	// MaxTasksPerStream caps the task IDs one stream follows: those beyond
	// it are not agreed. Zero means DefaultMaxTasksPerStream.
	MaxTasksPerStream int
}

// WithDefaults returns o with its zero fields set to the defaults. It is
// idempotent: a negative MinInterval (every change) stays negative.
func (o Options) WithDefaults() Options {
	if o.MinInterval == 0 {
		o.MinInterval = DefaultMinInterval
	}
	if o.RecheckInterval <= 0 {
		o.RecheckInterval = DefaultRecheckInterval
	}
	if o.MaxStreams == 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	if o.MaxTasksPerStream <= 0 {
		o.MaxTasksPerStream = DefaultMaxTasksPerStream
	}
	return o
}

// ErrGone is returned by [Follow] when the task can no longer be read by
// its follower (expired, deleted, or never the follower's).
var ErrGone = errors.New("push: the task is gone")

// Follow calls send with the task each time what a client sees of it
// changes (status, status message, pending input requests), coalesced under
// opts.MinInterval (but the terminal state, sent at once) and, with
// opts.KeepAlive, repeated while nothing
// changes. The first call carries the state at the time of the call when
// sendFirst is true; otherwise the first change after since (the state the
// client already has, nil for none). It returns nil once a terminal state
// was sent, ctx.Err() when ctx is done, [ErrGone] when the task cannot be
// read as owner any more, or the error of send.
func Follow(ctx context.Context, eng *engine.Engine, owner task.Owner, id task.ID, opts Options, since *task.Task, send func(*task.Task) error) error {
	opts = opts.WithDefaults()
	var last string
	if since != nil {
		last = signature(since)
	}
	var sentAt time.Time
	sent := since != nil
	for {
		// Watch before reading: a change between the read and the wait
		// is not missed.
		changed := eng.Watch(id)
		t, err := eng.Get(ctx, owner, id)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var nf *engine.NotFoundError
			if errors.As(err, &nf) || errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrClosed) {
				return ErrGone
			}
			// A passing store error: try again at the next signal.
		} else if sig := signature(t); !sent || sig != last ||
			opts.KeepAlive > 0 && !t.Status.Terminal() && time.Since(sentAt) >= opts.KeepAlive {
			// Coalesce: a change within MinInterval of the last
			// notification is sent at its end, as the state then. A
			// terminal state goes at once: it is the last notification,
			// and the client waits for it.
			if d := max(opts.MinInterval, 0) - time.Since(sentAt); sent && d > 0 && !t.Status.Terminal() {
				if err := sleep(ctx, d); err != nil {
					return err
				}
				continue
			}
			if err := send(t); err != nil {
				return err
			}
			last, sent, sentAt = sig, true, time.Now()
			if t.Status.Terminal() {
				return nil
			}
		} else if t.Status.Terminal() {
			return nil // the client has the terminal state already
		}
		wait := opts.RecheckInterval
		if eng.ChangesAnnounced() {
			wait = max(wait, announcedRecheckInterval)
		}
		if opts.KeepAlive > 0 {
			if d := opts.KeepAlive - time.Since(sentAt); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// signature is what a client sees of t: a notification is due when it
// changes.
func signature(t *task.Task) string {
	keys := slices.Sorted(maps.Keys(t.InputRequests))
	s := string(t.Status) + "\x00" + t.StatusMessage
	for _, k := range keys {
		s += "\x00" + k
	}
	return s
}
