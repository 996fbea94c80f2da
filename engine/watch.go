package engine

import (
	"context"
	"sync"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/task"
)

// watchers wakes waiters on task changes made by this engine.
type watchers struct {
	mu   sync.Mutex
	chs  map[task.ID]chan struct{}
	subs []func(*task.Task)
}

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
	t, err := e.timed.Update(ctx, id, func(t *task.Task) error {
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

// wakeWatchers closes the Watch channel of a task.
func (e *Engine) wakeWatchers(id task.ID) {
	w := &e.watch
	w.mu.Lock()
	ch := w.chs[id]
	delete(w.chs, id)
	w.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}
