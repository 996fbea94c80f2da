package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// pendingCreate coordinates a run whose work started before its task was
// created (startQuick) with the Start that decides how the task is
// created: with its outcome in one write, when the work ended within the
// window without needing the task in the store; else first as working
// (at the window's end, or when the work needs its task: a status
// message, an input request, a log line, a ledger operation).
type pendingCreate struct {
	want     chan struct{} // closed when the work needs its task stored
	wantOnce sync.Once
	created  chan struct{} // closed once Start created the task (or failed to)
	err      error         // why the task could not be created; set before created is closed
	// outcome receives the work's outcome when it returns (buffered).
	outcome chan quickOutcome
	// decided is closed once Start has decided; inlined then says the
	// outcome went into the task's creation (the run records nothing).
	decided chan struct{}
	inlined bool
}

// decide records Start's decision: the task created (err nil) or not, its
// outcome in the creation (inlined) or to be recorded by the run.
func (p *pendingCreate) decide(err error, inlined bool) {
	p.err, p.inlined = err, inlined
	close(p.created)
	close(p.decided)
}

// quick reports whether Start may start the work of spec before its task
// is created, to create the task with its outcome in one write
// (startQuick): when FinishWithin is on and nothing needs the task stored
// before the work runs (see Options.FinishWithin).
func (e *Engine) quick(spec StartSpec) bool {
	return e.opts.FinishWithin > 0 && spec.Queue == "" && spec.AwaitExternalRef <= 0 && spec.MaxActive <= 0 && spec.IdempotencyKey == ""
}

// settledByStart hands the outcome o of a run whose work started before
// its task was created (p, nil for any other run) to the Start that
// decides how the task is created, and reports whether that settled it:
// the outcome went into the task's creation, or the task could not be
// created. Otherwise (p nil, or the task created first) the run records
// its outcome as any run does.
func (p *pendingCreate) settledByStart(o quickOutcome) bool {
	if p == nil {
		return false
	}
	p.outcome <- o
	<-p.decided
	return p.inlined || p.err != nil
}

// quickOutcome is what a run's work returned.
type quickOutcome struct {
	res         json.RawMessage
	err         error
	interrupted bool
}

// stored reports whether the run's task is in the store (always, but for
// a run whose work started before its task was created).
func (r *run) stored() bool {
	p := r.pending
	if p == nil {
		return true
	}
	select {
	case <-p.created:
		return p.err == nil
	default:
		return false
	}
}

// ensureCreated waits, for a run whose task may not be created yet, until
// it is, asking Start to create it now; it returns why the task could not
// be created. Every write the work makes goes through it first.
func (r *run) ensureCreated(ctx context.Context) error {
	p := r.pending
	if p == nil {
		return nil
	}
	select {
	case <-p.created:
		return p.err
	default:
	}
	p.wantOnce.Do(func() { close(p.want) })
	select {
	case <-p.created:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startQuick starts the work of t at once and creates t when the work
// has ended (with its outcome, in one durable write) or at the end of
// Options.FinishWithin, whichever comes first. The requester is answered
// only after the task is committed, as Start promises; the work starts a
// few milliseconds before its task is durable, as a synchronous call's
// would, and nothing reaches it (cancel, takeover, lease) until then.
func (e *Engine) startQuick(parent context.Context, t *task.Task, work Work) (*task.Task, error) {
	p := &pendingCreate{want: make(chan struct{}), created: make(chan struct{}), outcome: make(chan quickOutcome, 1), decided: make(chan struct{})}
	// Registered at once, so that the work finds its run (Attach: a tool
	// reached through an in-memory session); the lease services skip it
	// until its task is stored.
	r, stopOnShutdown := e.newRun(context.WithoutCancel(parent), t)
	r.pending = p
	e.mu.Lock()
	e.runs[t.ID] = r
	e.mu.Unlock()
	e.start(r, stopOnShutdown, work)

	deadline := time.Now().Add(e.opts.FinishWithin)
	timer := time.NewTimer(e.opts.FinishWithin)
	defer timer.Stop()
	select {
	case o := <-p.outcome:
		if !o.interrupted {
			return e.createFinished(parent, t, r, o)
		}
	case <-timer.C:
	case <-p.want:
	case <-parent.Done():
	}
	// Create it working; the run records its outcome as any run does. The
	// work has started: its task is created even if the requester left.
	// (No idempotency key takes this path: a duplicate cannot be.)
	if err := e.timed.Create(store.WithInstance(context.WithoutCancel(parent), e.id), t, store.CreateOptions{}); err != nil {
		p.decide(err, false)
		r.cancel(errNotCreated)
		return nil, fmt.Errorf("engine: creating task: %w", err)
	}
	p.decide(nil, false)
	e.created(parent, t)
	// The work asked for its task before the window's end: its outcome
	// may still come within it.
	if done := e.awaitOutcome(parent, r, deadline); done != nil {
		return done, nil
	}
	return t.Clone(), nil
}

// errNotCreated stops work whose task could not be created.
var errNotCreated = errors.New("the task could not be created")

// createFinished creates t with the outcome o of its work, which ended
// within the window: one durable write.
func (e *Engine) createFinished(parent context.Context, t *task.Task, r *run, o quickOutcome) (*task.Task, error) {
	p := r.pending
	now := e.now()
	if terr := e.outcomeError(o.res, o.err); terr != nil {
		t.Fail(terr, terr.Message, now)
	} else {
		t.Complete(o.res, now)
	}
	if err := e.timed.Create(store.WithInstance(context.WithoutCancel(parent), e.id), t, store.CreateOptions{}); err != nil {
		p.decide(err, false)
		e.log.Error("the task's work ended but its task could not be created; the requester is told it failed", "tool", t.Tool, "err", err)
		return nil, fmt.Errorf("engine: creating task: %w", err)
	}
	p.decide(nil, true)
	e.created(parent, t)
	if e.opts.Audit.Enabled() {
		var code int64
		if t.Error != nil {
			code = t.Error.Code
		}
		e.opts.Audit.StatusChanged(parent, audit.TaskOf(t), string(task.Working), string(t.Status), code)
	}
	e.observeChange(t, task.Working)
	if t.Status == task.Failed {
		e.log.Info("task failed", "task", t.ID, "tool", t.Tool, "code", t.Error.Code, "message", t.Error.Message)
	} else {
		e.log.Info("task completed", "task", t.ID, "tool", t.Tool, "resultBytes", len(t.Result))
	}
	return t.Clone(), nil
}

// answerWithin returns what Start answers for t, created first (a queue,
// a cap or an awaited reference stood in the way of one write) with its
// work run by r: t terminal when the work ends within FinishWithin, else
// t as created.
func (e *Engine) answerWithin(parent context.Context, r *run, t *task.Task) *task.Task {
	if e.opts.FinishWithin > 0 {
		if done := e.awaitOutcome(parent, r, time.Now().Add(e.opts.FinishWithin)); done != nil {
			return done
		}
	}
	return t.Clone()
}

// awaitOutcome waits, until deadline and not past parent's end, for the
// work of r (whose task is created) to end and its outcome to be
// recorded; it returns the task then, nil if it is still running.
func (e *Engine) awaitOutcome(parent context.Context, r *run, deadline time.Time) *task.Task {
	d := time.Until(deadline)
	if d <= 0 {
		select {
		case <-r.recorded:
			if f := r.final.Load(); f != nil {
				return f.Clone()
			}
		default:
		}
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-r.recorded:
		if f := r.final.Load(); f != nil {
			return f.Clone()
		}
	case <-timer.C:
	case <-parent.Done():
	}
	return nil
}
