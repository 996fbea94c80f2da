package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// watchers wakes waiters on task changes made by this engine.
type watchers struct {
	mu   sync.Mutex
	chs  map[task.ID]chan struct{}
	subs []func(*task.Task)
	// all holds the Subscribe callbacks; nil when there is none, so that
	// a wake-up without subscribers costs one atomic load.
	all atomic.Pointer[[]*subscriber]
}

// subscriber is one Subscribe callback.
type subscriber struct{ fn func(task.ID) }

// Watch returns a channel that is closed at the next change to the task
// with the given ID (status, status message, input requests, outcome, and
// lines written to its log) made by this engine, or announced by the
// store's change feed when it has one (log lines are not announced).
// Without a feed, changes made by other processes are not seen: waiters
// must also poll.
func (e *Engine) Watch(id task.ID) <-chan struct{} {
	w := &e.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.chs == nil {
		w.chs = map[task.ID]chan struct{}{}
	}
	ch, ok := w.chs[id]
	if !ok {
		ch = make(chan struct{})
		w.chs[id] = ch
	}
	return ch
}

// OnChange registers fn to be called with a copy of a task after each change
// this engine makes to it. fn runs on the changing goroutine: it must be
// quick and must not block.
func (e *Engine) OnChange(fn func(t *task.Task)) {
	w := &e.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subs = append(w.subs, fn)
}

// write updates a task in the store and, when it changed, tells the
// watchers. Every change the engine makes goes through it.
func (e *Engine) write(ctx context.Context, id task.ID, fn func(*task.Task) error) (*task.Task, error) {
	var from task.Status
	t, err := e.timed.Update(store.WithInstance(ctx, e.id), id, func(t *task.Task) error {
		from = t.Status
		return fn(t)
	})
	if err == nil {
		e.changed(t)
		if t.Queue != "" && t.Status.Terminal() && !from.Terminal() {
			e.kickQueues() // a slot may have freed
		}
		if t.Status != from {
			var code int64
			if t.Error != nil {
				code = t.Error.Code
			}
			e.opts.Audit.StatusChanged(ctx, audit.TaskOf(t), string(from), string(t.Status), code)
			e.observeChange(t, from)
		}
	}
	return t, err
}

// changed wakes the watchers of t and calls the OnChange hooks.
func (e *Engine) changed(t *task.Task) {
	if t == nil {
		return
	}
	e.wakeWatchers(t.ID)
	w := &e.watch
	w.mu.Lock()
	subs := w.subs
	w.mu.Unlock()
	for _, fn := range subs {
		fn(t.Clone())
	}
}

// wakeWatchers closes the Watch channel of a task and calls the
// Subscribe callbacks.
func (e *Engine) wakeWatchers(id task.ID) {
	w := &e.watch
	w.mu.Lock()
	ch := w.chs[id]
	delete(w.chs, id)
	w.mu.Unlock()
	if ch != nil {
		close(ch)
	}
	if subs := w.all.Load(); subs != nil {
		for _, s := range *subs {
			s.fn(id)
		}
	}
}

// wakeAllWatchers wakes every waiter of Watch, as after a change of each
// task: the change feed (re)started, and what changed while it was down
// was announced to nobody.
func (e *Engine) wakeAllWatchers() {
	w := &e.watch
	w.mu.Lock()
	chs := w.chs
	w.chs = nil
	w.mu.Unlock()
	for _, ch := range chs {
		close(ch)
	}
}

// ChangesAnnounced reports whether every change to a task now wakes
// Watch, whoever makes it: the store's change feed is in effect (an
// engine with a store without one sees only its own changes, and
// reports false). When the feed (re)starts after a failure, every
// waiter of Watch is woken once, since what changed while it was down
// was not announced; a waiter may then wait for Watch alone, re-reading
// on a timer only as a safety net.
func (e *Engine) ChangesAnnounced() bool { return e.feedLive.Load() }

// Subscribe registers fn to be called with the ID of every task that
// changes, as Watch would wake its waiters: changes made by this engine,
// lines written to a task's log here, and changes announced by the
// store's change feed (by other engines sharing the store). A deleted
// task is announced too. fn runs on the changing goroutine: it must be
// quick and must not block (an operator view coalesces the IDs and reads
// the tasks later). The returned function ends the subscription.
func (e *Engine) Subscribe(fn func(id task.ID)) (cancel func()) {
	w := &e.watch
	s := &subscriber{fn: fn}
	w.mu.Lock()
	defer w.mu.Unlock()
	var cur []*subscriber
	if p := w.all.Load(); p != nil {
		cur = *p
	}
	next := append(slices.Clip(cur), s)
	w.all.Store(&next)
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		p := w.all.Load()
		if p == nil {
			return
		}
		rest := slices.DeleteFunc(slices.Clone(*p), func(x *subscriber) bool { return x == s })
		if len(rest) == 0 {
			w.all.Store(nil)
			return
		}
		w.all.Store(&rest)
	}
}
