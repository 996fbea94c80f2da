package engine

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// Attach returns a context for work of the task with the given ID that runs
// outside the engine's own goroutine (e.g. a re-run that goes through a
// server's full request path): it carries the task's [Handle] and is
// cancelled with the task. ok is false if no work of that task runs here.
func (e *Engine) Attach(ctx context.Context, id task.ID) (_ context.Context, cancel context.CancelFunc, ok bool) {
	e.mu.Lock()
	r := e.runs[id]
	e.mu.Unlock()
	if r == nil {
		return ctx, func() {}, false
	}
	ctx, cc := context.WithCancelCause(ctx)
	stop := context.AfterFunc(r.ctx, func() { cc(context.Cause(r.ctx)) })
	return withHandle(ctx, &Handle{e: e, run: r}), func() { stop(); cc(nil) }, true
}

// visible loads a task the requester may see, or returns a *NotFoundError.
func (e *Engine) visible(ctx context.Context, owner task.Owner, id task.ID) (*task.Task, error) {
	t, err := e.timed.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &NotFoundError{Reason: audit.ReasonUnknown}
	}
	if err != nil {
		return nil, err
	}
	if err := e.denied(t, owner, e.now()); err != nil {
		return nil, err
	}
	return t, nil
}

// denied returns the *NotFoundError that hides t from the requester
// owner, or nil if owner may see t.
func (e *Engine) denied(t *task.Task, owner task.Owner, now time.Time) error {
	switch {
	case !task.MayAccess(t.Owner, owner):
		return &NotFoundError{Reason: audit.ReasonOtherOwner, Owner: t.Owner, Tool: t.Tool}
	case t.Expired(now):
		return &NotFoundError{Reason: audit.ReasonExpired, Owner: t.Owner, Tool: t.Tool}
	}
	return nil
}

// Get returns the task with the given ID if owner may see it.
func (e *Engine) Get(ctx context.Context, owner task.Owner, id task.ID) (*task.Task, error) {
	return e.visible(ctx, owner, id)
}

// update applies fn to a task the requester may see.
func (e *Engine) update(ctx context.Context, owner task.Owner, id task.ID, fn func(*task.Task) error) (*task.Task, error) {
	now := e.now()
	t, err := e.write(ctx, id, func(t *task.Task) error {
		if err := e.denied(t, owner, now); err != nil {
			return err
		}
		return fn(t)
	})
	var nf *NotFoundError
	switch {
	case errors.As(err, &nf): // denied: the reason stands
		return nil, nf
	case errors.Is(err, store.ErrNotFound):
		return nil, &NotFoundError{Reason: audit.ReasonUnknown}
	}
	return t, err
}

// CancelTimeout bounds how long a cancel waits for [Hooks.Cancel].
const CancelTimeout = time.Minute

// askCancel asks Hooks.Cancel about the cancel of task id: nil lets it
// proceed (with the task when its work never started and nobody was
// asked); a refusal is recorded (status message, log, audit trail) and
// returned as a *CancelRefusedError with the task as it stands. A task
// already finished gives a *TerminalError, one the canceller may not see
// a *NotFoundError.
func (e *Engine) askCancel(ctx context.Context, owner task.Owner, id task.ID, operator bool) (*task.Task, error) {
	var (
		t   *task.Task
		err error
	)
	if operator {
		t, err = e.timed.Get(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			err = &NotFoundError{Reason: audit.ReasonUnknown}
		}
	} else {
		t, err = e.visible(ctx, owner, id)
	}
	if err != nil {
		return nil, err
	}
	if t.Status.Terminal() {
		return t, &TerminalError{Status: t.Status}
	}
	if t.Queued && t.Attempts == 0 {
		// Its work never started (a queue or a gate holds it): nothing
		// elsewhere to stop. The task is returned so that the cancel's
		// write can check it still has not started.
		return t, nil
	}
	hctx, cancel := context.WithTimeout(ctx, CancelTimeout)
	herr := e.hooks.Cancel(hctx, t)
	cancel()
	if herr == nil {
		return nil, nil
	}
	reason := herr.Error()
	var refused *CancelRefusedError
	if errors.As(herr, &refused) {
		reason = refused.Reason
	}
	msg := "cancel refused: " + reason
	e.log.Warn("task cancel refused", "task", t.ID, "tool", t.Tool, "operator", operator, "reason", reason)
	e.opts.Audit.CancelRefused(ctx, owner, audit.TaskOf(t), reason)
	lim := e.logLimits()
	if lerr := e.store.AppendLog(context.WithoutCancel(ctx), t.ID, store.LogBatch{
		Lines: []store.LogLine{{Time: e.now(), Stream: "log", Text: msg}}, Limits: lim}); lerr != nil {
		e.log.Warn("writing a refused cancel to the task's log", "task", t.ID, "err", lerr)
	}
	if cur, werr := e.write(context.WithoutCancel(ctx), id, func(t *task.Task) error {
		if t.Status.Terminal() {
			return errTerminal
		}
		t.StatusMessage = msg
		t.LastUpdatedAt = e.now()
		return nil
	}); werr == nil {
		t = cur
	}
	return t, &CancelRefusedError{Reason: reason}
}

// Cancel moves a task to cancelled and cancels its work's context. The task
// is cancelled in the store before Cancel returns. Cancelling a terminal
// task returns a *TerminalError and the task unchanged.
func (e *Engine) Cancel(ctx context.Context, owner task.Owner, id task.ID) (*task.Task, error) {
	return e.cancel(ctx, owner, id, false)
}

// CancelAsOperator cancels the task with id whoever owns it, as Cancel
// does for its owner, on behalf of the operator by (an admin of an
// operator surface such as the dashboard, who authorized the request
// itself). The audit trail names by as the requester; the task's status
// message says an operator cancelled it. An unknown task gives a
// *NotFoundError, a terminal one a *TerminalError and the task unchanged.
func (e *Engine) CancelAsOperator(ctx context.Context, by task.Owner, id task.ID) (*task.Task, error) {
	return e.cancel(ctx, by, id, true)
}

// The status messages of a cancelled task.
const (
	msgCancelled         = "The task was cancelled by request."
	msgCancelledOperator = "The task was cancelled by an operator."
)

func (e *Engine) cancel(ctx context.Context, owner task.Owner, id task.ID, operator bool) (*task.Task, error) {
	for range 3 {
		t, err := e.cancelOnce(ctx, owner, id, operator)
		if !errors.Is(err, errStartedMeanwhile) {
			return t, err
		}
	}
	return nil, errors.New("engine: the task kept starting while it was cancelled: try again")
}

// errStartedMeanwhile: a task whose work had not started when its cancel
// asked nobody (see askCancel) started before the cancel's write.
var errStartedMeanwhile = errors.New("engine: the task started meanwhile")

// cancelOnce is one attempt of cancel.
func (e *Engine) cancelOnce(ctx context.Context, owner task.Owner, id task.ID, operator bool) (*task.Task, error) {
	asked := e.hooks.Cancel != nil
	unstarted := false // asked nobody: its work had not started
	if asked {
		t, err := e.askCancel(ctx, owner, id, operator)
		var te *TerminalError
		if errors.As(err, &te) && t != nil {
			e.cancelChildren(ctx, owner, t, operator) // see below
		}
		if err != nil {
			return t, err
		}
		unstarted = t != nil
	}
	var terminal task.Status
	fn := func(t *task.Task) error {
		if t.Status.Terminal() {
			terminal = t.Status
			return errTerminal
		}
		if unstarted && t.Attempts > 0 {
			return errStartedMeanwhile // ask the system doing it now
		}
		msg := msgCancelled
		if operator {
			msg = msgCancelledOperator
		}
		return t.Cancel(msg, e.now())
	}
	var (
		t   *task.Task
		err error
	)
	if operator {
		t, err = e.write(ctx, id, fn)
		if errors.Is(err, store.ErrNotFound) {
			err = &NotFoundError{Reason: audit.ReasonUnknown}
		}
	} else {
		t, err = e.update(ctx, owner, id, fn)
	}
	if errors.Is(err, errTerminal) {
		var (
			cur  *task.Task
			gerr error
		)
		if operator {
			cur, gerr = e.timed.Get(ctx, id)
		} else {
			cur, gerr = e.visible(ctx, owner, id)
		}
		if gerr != nil {
			return nil, gerr
		}
		// The cancel of a task that ended stops the children it left
		// running (a parent that failed, or a cascade a crash
		// interrupted).
		e.cancelChildren(ctx, owner, cur, operator)
		if asked && terminal == task.Cancelled {
			// The system doing the work confirmed this cancel, and the
			// work saw it first and ended the task cancelled.
			return cur, nil
		}
		return cur, &TerminalError{Status: terminal}
	}
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	r := e.runs[id]
	delete(e.waitingWork, id)
	e.mu.Unlock()
	if r != nil {
		r.cancel(context.Canceled)
	}
	e.log.Info("task cancelled", "task", t.ID, "tool", t.Tool, "operator", operator)
	e.opts.Audit.Cancelled(ctx, owner, audit.TaskOf(t))
	e.cancelChildren(ctx, owner, t, operator)
	return t, nil
}

// cancelChildren cancels the unfinished children of the cancelled task
// t, each as its own cancel (asking the system doing its work, and
// cascading to its children), as owner or operator asked for t's. A
// child whose cancel fails is logged and left: repeating the parent's
// cancel tries it again.
func (e *Engine) cancelChildren(ctx context.Context, owner task.Owner, t *task.Task, operator bool) {
	if t.Root == "" {
		return // in no tree: no child
	}
	ctx = context.WithoutCancel(ctx)
	var children []*task.Task
	q := store.BrowseQuery{Parent: t.ID, Statuses: []task.Status{task.Working, task.InputRequired}, Limit: store.MaxBrowseLimit}
	for {
		page, next, err := e.store.Browse(ctx, q)
		if err != nil {
			e.log.Warn("listing the children of a cancelled task", "task", t.ID, "err", err)
			return
		}
		children = append(children, page...)
		if next == "" {
			break
		}
		q.Cursor = next
	}
	for _, c := range children {
		if _, err := e.cancel(ctx, owner, c.ID, operator); err != nil {
			var te *TerminalError
			if !errors.As(err, &te) {
				e.log.Warn("cancelling the child of a cancelled task", "task", t.ID, "child", c.ID, "err", err)
			}
		}
	}
}

var errTerminal = errors.New("terminal")

// Delete deletes a finished task of owner and everything it holds (result,
// error, input requests and answers), and returns the task as it was. A
// task that has not ended is refused with a *NotTerminalError (deletion
// never stops work: the owner cancels first, then deletes); a task owner
// may not see is answered with a *NotFoundError, as by Get. The deletion
// is durable and announced on the store's change feed before Delete
// returns, so that whoever waits for the task, here or on another engine,
// finds it gone. It deletes the task only, never the store's ledger of
// domain operations. It is audited (task.deleted), never with payloads.
func (e *Engine) Delete(ctx context.Context, owner task.Owner, id task.ID) (*task.Task, error) {
	d := e.store
	t, err := e.visible(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if !t.Status.Terminal() {
		return nil, &NotTerminalError{Status: t.Status}
	}
	if t.Parent != "" {
		p, err := e.timed.Get(ctx, t.Parent)
		switch {
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return nil, err
		case err == nil && !p.Status.Terminal():
			return nil, &NotTerminalError{Status: p.Status, Parent: p.ID}
		}
	}
	// A terminal task never changes status again: deleting what was read
	// is safe. A deletion in between makes this one unknown.
	if err := e.deleteTask(ctx, d, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, &NotFoundError{Reason: audit.ReasonUnknown}
		}
		return nil, err
	}
	e.wakeWatchers(id) // waiters here find it gone (the feed tells the others)
	e.log.Info("task deleted", "task", t.ID, "tool", t.Tool)
	e.opts.Audit.Deleted(ctx, owner, audit.TaskOf(t), string(t.Status))
	return t, nil
}

// AnswerCheck checks a client's answer to one input request of a task
// (the request as the task holds it) before Respond stores it.
type AnswerCheck func(request, answer json.RawMessage) error

// Respond delivers client answers to a task's outstanding input requests.
// Answers for unknown or already answered keys are ignored and listed in
// ignored. check, if not nil, sees each answer to an outstanding request
// first, in the same transaction: if it refuses one, Respond stores
// nothing and returns an *AnswerError. The task's outstanding requests are
// updated before Respond returns, so the next Get shows them.
func (e *Engine) Respond(ctx context.Context, owner task.Owner, id task.ID, responses map[string]json.RawMessage, check AnswerCheck) (t *task.Task, ignored []string, err error) {
	t, err = e.update(ctx, owner, id, func(t *task.Task) error {
		if check != nil {
			for _, key := range slices.Sorted(maps.Keys(responses)) {
				if req, ok := t.InputRequests[key]; ok {
					if err := check(req, responses[key]); err != nil {
						return &AnswerError{Key: key, Err: err}
					}
				}
			}
		}
		var aerr error
		_, ignored, aerr = t.Answer(responses, e.now())
		var te *task.TransitionError
		if errors.As(aerr, &te) {
			return &TerminalError{Status: t.Status}
		}
		return aerr
	})
	if err != nil {
		return nil, nil, err
	}
	e.mu.Lock()
	r := e.runs[id]
	e.mu.Unlock()
	if r != nil {
		r.signal()
	}
	return t, ignored, nil
}

// List returns a page of owner's tasks, newest first. Listing matches the
// owner exactly: an anonymous requester lists only the tasks created under
// its own anonymous scope (e.g. its session).
func (e *Engine) List(ctx context.Context, owner task.Owner, cursor string, limit int) ([]*task.Task, string, error) {
	ts, next, err := e.timed.List(ctx, owner, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	now := e.now()
	out := ts[:0]
	for _, t := range ts {
		if !t.Expired(now) {
			out = append(out, t)
		}
	}
	return out, next, nil
}
