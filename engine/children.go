package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/task"
)

// SpawnSpec describes a child task that a task's work starts (see
// [Handle.Spawn]).
type SpawnSpec struct {
	// Step names the child among its parent's children, stable across
	// re-runs of the parent: a re-run that spawns the same step finds
	// the child it started before instead of starting another.
	Step string
	// Tool is the child's tool, Arguments its arguments (a JSON object).
	Tool      string
	Arguments json.RawMessage
	// Meta is the _meta of the child's stored call (nil for none).
	Meta map[string]any
	// Gate and GateMessage, if set, create the child held in that gate
	// (see StartSpec.Gate).
	Gate, GateMessage string
}

// ChildPollInterval is how often [Handle.AwaitChild] reads a child it
// waits for even when no change wakes it (a change made by another
// process of a store without a change feed).
const ChildPollInterval = time.Second

// Spawn starts a child of the handle's task, built by Hooks.Spawn (the
// owner of the tools decides how a call of spec.Tool becomes a task, and
// the limits), or returns the child a former run of the task started
// for the same step. It fails when the engine has no Hooks.Spawn.
func (h *Handle) Spawn(ctx context.Context, spec SpawnSpec) (*task.Task, error) {
	if h.e.hooks.Spawn == nil {
		return nil, errors.New("engine: this server starts no child tasks")
	}
	// A child names a parent that is stored (a quick run's task is
	// created now).
	if err := h.run.ensureCreated(ctx); err != nil {
		return nil, err
	}
	parent, err := h.e.timed.Get(ctx, h.run.id)
	if err != nil {
		return nil, err
	}
	if parent.Status.Terminal() {
		return nil, &TerminalError{Status: parent.Status}
	}
	if parent.Parent == "" && parent.Root == "" {
		// The top of a new tree names itself its root: tasks/get then
		// knows to list its children, and tasks in no tree cost nothing.
		if parent, err = h.e.write(ctx, h.run.id, func(t *task.Task) error {
			if t.Status.Terminal() {
				return &TerminalError{Status: t.Status}
			}
			t.Root = t.ID
			return nil
		}); err != nil {
			return nil, err
		}
	}
	c, err := h.e.hooks.Spawn(ctx, parent, spec)
	if err != nil {
		return nil, err
	}
	// A cancel of the parent that came meanwhile listed its children
	// before this one existed: it is cancelled here.
	if p, err := h.e.timed.Get(ctx, h.run.id); err == nil && p.Status.Terminal() {
		if !c.Status.Terminal() {
			if _, err := h.e.Cancel(context.WithoutCancel(ctx), c.Owner, c.ID); err != nil {
				h.e.log.Warn("cancelling the child of a parent that ended", "task", h.run.id, "child", c.ID, "err", err)
			}
		}
		return nil, &TerminalError{Status: p.Status}
	}
	return c, nil
}

// Child returns the child id of the handle's task as it is now.
func (h *Handle) Child(ctx context.Context, id task.ID) (*task.Task, error) {
	c, err := h.e.timed.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.Parent != h.run.id {
		return nil, fmt.Errorf("engine: task %s is not a child of task %s", id, h.run.id)
	}
	return c, nil
}

// CancelChild cancels the child id of the handle's task, as its owner
// would (cascading to its own children).
func (h *Handle) CancelChild(ctx context.Context, id task.ID) (*task.Task, error) {
	c, err := h.Child(ctx, id)
	if err != nil {
		return nil, err
	}
	return h.e.Cancel(ctx, c.Owner, id)
}

// Now returns the engine's clock's time.
func (h *Handle) Now() time.Time { return h.e.now() }

// AwaitChild waits until the child id of the handle's task has ended and
// returns it. Meanwhile a question the child asks (input_required) is
// asked of the requester through the handle's task, and the answer is
// delivered to the child; a question the child stops asking (answered
// another way, or the child moved on) is withdrawn from the parent.
// It returns ctx's error when ctx ends first; the child goes on.
func (h *Handle) AwaitChild(ctx context.Context, id task.ID) (*task.Task, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type forward struct {
		cancel context.CancelFunc
		done   chan struct{}
		failed bool // set before done is closed: forward it again
	}
	forwarded := map[string]*forward{}
	defer func() {
		for _, f := range forwarded {
			f.cancel()
			<-f.done
		}
	}()
	poll := time.NewTicker(ChildPollInterval)
	defer poll.Stop()
	for {
		wake := h.e.Watch(id)
		c, err := h.e.timed.Get(ctx, id)
		switch {
		case err != nil && h.e.transient(err):
			// Keep waiting: the next read may succeed.
		case err != nil:
			return nil, err
		case c.Parent != h.run.id:
			return nil, fmt.Errorf("engine: task %s is not a child of task %s", id, h.run.id)
		case c.Status.Terminal():
			return c, nil
		default:
			for key, f := range forwarded {
				select {
				case <-f.done:
					if f.failed {
						delete(forwarded, key) // asked again below
						continue
					}
				default:
				}
				if _, ok := c.InputRequests[key]; !ok {
					f.cancel() // withdrawn from the parent too
					<-f.done
					delete(forwarded, key)
				}
			}
			for key, req := range c.InputRequests {
				if _, ok := forwarded[key]; ok {
					continue
				}
				fctx, fcancel := context.WithCancel(ctx)
				f := &forward{cancel: fcancel, done: make(chan struct{})}
				forwarded[key] = f
				go func() {
					defer close(f.done)
					answer, err := h.requestInput(fctx, req, true)
					if err != nil {
						// E.g. the parent holds as many questions as it
						// may: asked again at the next read of the child.
						f.failed = fctx.Err() == nil
						if f.failed {
							h.e.log.Warn("asking a child task's question through its parent", "task", h.run.id, "child", id, "key", key, "err", err)
						}
						return
					}
					h.deliver(fctx, c.Owner, id, key, answer)
				}()
			}
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-wake:
		case <-poll.C:
		}
	}
}

// deliver hands answer, given to the parent, to the child id's input
// request key, retrying while the store is briefly unavailable: the
// parent's copy of the question is answered already, so the answer must
// not be lost. It gives up when the child no longer asks (answered
// another way, or ended) or ctx's run ends.
func (h *Handle) deliver(ctx context.Context, owner task.Owner, id task.ID, key string, answer json.RawMessage) {
	ctx = context.WithoutCancel(ctx)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		_, _, err := h.e.Respond(ctx, owner, id, map[string]json.RawMessage{key: answer}, nil)
		if err == nil || !h.e.transient(err) {
			if err != nil {
				h.e.log.Warn("delivering an answer to a child task", "task", h.run.id, "child", id, "key", key, "err", err)
			}
			return
		}
		select {
		case <-h.run.ctx.Done():
			h.e.log.Warn("delivering an answer to a child task: the parent's run ended first", "task", h.run.id, "child", id, "key", key, "err", err)
			return
		case <-time.After(wait):
		}
	}
}
