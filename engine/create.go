package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// StartSpec describes a task to create.
type StartSpec struct {
	// Owner binds the task to its requester.
	Owner task.Owner
	// Tool names the tool being run.
	Tool string
	// Wire names the protocol revision of the creating request.
	Wire string
	// TTL is the requested retention; nil asks for the default.
	TTL *time.Duration
	// MaxTTL, if positive, caps the retention of this task below the
	// policy's (e.g. a tool whose results hold sensitive data).
	MaxTTL time.Duration
	// Request is the creating call's params, kept for re-runs.
	Request json.RawMessage
	// IdempotencyKey, if set, makes Start return the requester's existing
	// task with that key instead of starting the work again.
	IdempotencyKey string
	// MaxActive, if positive, refuses the task with ErrTooManyActive when
	// Owner already has that many unfinished (working or input_required)
	// tasks in the store, counted atomically with the creation, across
	// every engine sharing the store.
	MaxActive int
	// Queue, if set, names the concurrency queue the task runs in,
	// declared with [Engine.SetQueue]: when the queue is full, the task is
	// created waiting and its work starts later, built by Hooks.WorkOf
	// (the work given to Start is then not used).
	Queue string
	// AwaitExternalRef, if positive, makes Start return only once the
	// work has recorded its external reference ([Handle.SetExternalRef]),
	// or returned, or this long has passed, or parent is done: the
	// requester's acknowledgement of the task then comes after the
	// reference to the work started elsewhere (an upstream task, a job)
	// is durable, so that a crash after the acknowledgement can always
	// re-attach to it. The task is created (and the work started) as
	// without it; only the answer waits.
	AwaitExternalRef time.Duration
	// Correlation holds the host's correlation keys of the creating call
	// (e.g. "claudecode/toolUseId" → the host's tool-use ID), stored with
	// the task (task.Task.Correlation) and copied to the operations its
	// work records. Nil for none; a map over task.CheckCorrelation's
	// bounds makes Start fail before anything is written.
	Correlation map[string]string
	// Gate, if set (a name starting with GatePrefix), creates the task
	// held: working, with GateMessage as its status message, its work
	// not started (the work given to Start is not used) until
	// [Engine.Release] lets it go (its work then built by Hooks.WorkOf),
	// or [Engine.Resolve] ends it. Held tasks survive restarts and
	// takeovers: no engine holds them meanwhile.
	Gate, GateMessage string
	// Parent, if set, makes the task a child of that task (whose work
	// starts it): stored with it (task.Task.Parent, and Root, the top of
	// the tree, Root or Parent itself), listed among the parent's
	// children, cancelled with it (see [Engine.Cancel]).
	Parent, Root task.ID
}

// existing returns the task an idempotent retry refers to: the same call
// again. The same key for another call is ErrIdempotencyConflict.
func (e *Engine) existing(t *task.Task, spec StartSpec) (*task.Task, error) {
	if t.Tool != spec.Tool || task.CallDigest(t.Tool, t.Request) != task.CallDigest(spec.Tool, spec.Request) {
		return nil, ErrIdempotencyConflict
	}
	if t.Expired(e.now()) {
		return nil, fmt.Errorf("engine: the task with this idempotency key has expired and is about to be deleted; retry with another key")
	}
	e.log.Info("task reused by an idempotent retry", "task", t.ID, "tool", t.Tool, "owner", t.Owner)
	e.opts.Audit.Reused(context.Background(), audit.TaskOf(t))
	return t, nil
}

// Start creates a task durably and starts its work in the background. It
// returns once the task is committed, so a following Get finds it. The
// work's context keeps parent's values but not its cancellation: the
// request that starts a task may end long before the work does.
func (e *Engine) Start(parent context.Context, spec StartSpec, work Work) (*task.Task, error) {
	if err := task.CheckCorrelation(spec.Correlation); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	t := task.New(e.policy, spec.Owner, spec.Tool, spec.TTL, e.now())
	t.Wire = spec.Wire
	t.Correlation = task.CloneCorrelation(spec.Correlation)
	if spec.MaxTTL > 0 && t.TTL > spec.MaxTTL {
		t.TTL = spec.MaxTTL
	}
	t.Request = spec.Request
	t.Runner = e.id
	t.LeaseExpiresAt = t.CreatedAt.Add(e.opts.Lease)
	t.Attempts = 1
	t.StartedAt = t.CreatedAt
	t.IdempotencyKey = spec.IdempotencyKey
	if spec.Parent != "" {
		t.Parent, t.Root = spec.Parent, spec.Root
		if t.Root == "" {
			t.Root = spec.Parent
		}
	}
	// Count the work before creating the task, so that Shutdown, once it
	// has marked the engine closed, waits for every task it let through.
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	e.wg.Add(1)
	e.mu.Unlock()
	if spec.Gate != "" {
		return e.startHeld(parent, t, spec)
	}
	if e.quick(spec) {
		return e.startQuick(parent, t, work)
	}
	opts := store.CreateOptions{MaxActive: spec.MaxActive}
	if spec.Queue != "" {
		max, ok := e.queueCap(spec.Queue)
		if !ok {
			e.wg.Done()
			return nil, fmt.Errorf("%w: %q", ErrNoQueue, spec.Queue)
		}
		t.Queue, opts.MaxConcurrent = spec.Queue, max
	}
	if err := e.timed.Create(store.WithInstance(parent, e.id), t, opts); err != nil {
		e.wg.Done()
		return e.notCreated(err, spec)
	}
	e.created(parent, t)
	if t.Queued {
		e.mu.Lock()
		if len(e.waitingWork) < maxWaitingWork {
			if e.waitingWork == nil {
				e.waitingWork = map[task.ID]waitingRun{}
			}
			e.waitingWork[t.ID] = waitingRun{work: work, ctx: context.WithoutCancel(parent)}
		}
		e.mu.Unlock()
		e.wg.Done()
		e.log.Info("task waits in its queue", "task", t.ID, "tool", t.Tool, "queue", t.Queue, "status", t.StatusMessage)
		return t.Clone(), nil
	}
	r := e.launch(context.WithoutCancel(parent), t, work)
	if spec.AwaitExternalRef > 0 {
		e.awaitRef(parent, r, spec.AwaitExternalRef)
	}
	return e.answerWithin(parent, r, t), nil
}

// notCreated answers a Start whose Create failed with err: the task an
// idempotent retry refers to, ErrTooManyActive, or the store's error.
func (e *Engine) notCreated(err error, spec StartSpec) (*task.Task, error) {
	var dup *store.DuplicateError
	if errors.As(err, &dup) {
		return e.existing(dup.Task, spec)
	}
	if errors.Is(err, store.ErrTooManyActive) {
		return nil, ErrTooManyActive
	}
	return nil, fmt.Errorf("engine: creating task: %w", err)
}

// awaitRef waits until r's work recorded its external reference or
// returned, at most d, and not past parent's end.
func (e *Engine) awaitRef(parent context.Context, r *run, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-r.refDone:
	case <-timer.C:
		e.log.Warn("the task is acknowledged before its work recorded its external reference", "task", r.id, "tool", r.tool, "waited", d)
	case <-parent.Done():
	}
}

// launch runs work for t in a new goroutine and returns its run. The
// caller has already counted it in e.wg.
func (e *Engine) launch(parent context.Context, t *task.Task, work Work) *run {
	r, stopOnShutdown := e.register(parent, t)
	e.start(r, stopOnShutdown, work)
	return r
}

// register registers a run of t, so that a cancel, an answer or a feed
// announcement reaches it from now on; start runs its work.
func (e *Engine) register(parent context.Context, t *task.Task) (r *run, stopOnShutdown func() bool) {
	r, stopOnShutdown = e.newRun(parent, t)
	e.mu.Lock()
	e.runs[t.ID] = r
	e.mu.Unlock()
	return r, stopOnShutdown
}

// newRun returns a run of t that nothing reaches yet (see register).
func (e *Engine) newRun(parent context.Context, t *task.Task) (r *run, stopOnShutdown func() bool) {
	ctx, cancel := context.WithCancelCause(parent)
	r = &run{id: t.ID, tool: t.Tool, ctx: ctx, cancel: cancel, wake: make(chan struct{}), refDone: make(chan struct{}), logs: e.newLogBuffer(t.ID, t.Tool), recorded: make(chan struct{})}
	if r.logs != nil {
		r.logs.run = r
	}
	stopOnShutdown = context.AfterFunc(e.base, func() { cancel(errShutdown) })
	return r, stopOnShutdown
}

// unregister drops a registered run whose work will not start, and its
// count in e.wg.
func (e *Engine) unregister(r *run, stopOnShutdown func() bool) {
	stopOnShutdown()
	r.cancel(nil)
	e.mu.Lock()
	delete(e.runs, r.id)
	e.mu.Unlock()
	e.wg.Done()
}

// start runs the work of the registered run r in a new goroutine.
func (e *Engine) start(r *run, stopOnShutdown func() bool, work Work) {
	ctx := r.ctx
	go func() {
		defer e.wg.Done()
		defer stopOnShutdown()
		defer r.cancel(nil)
		h := &Handle{e: e, run: r}
		res, err := e.invoke(withHandle(ctx, h), work)
		if r.logs != nil {
			r.logs.end() // the log is complete before the outcome is (a pending task is created for it first)
		}
		r.returned.Store(true)
		r.refSettled()
		// Decide at once whether shutdown cut the work short, before a
		// shutdown deadline passing later could make a finished run look
		// interrupted.
		interrupted := context.Cause(ctx) == errShutdown || context.Cause(ctx) == errShutdownWaiting
		// The run stays registered until its outcome is recorded: its
		// lease is renewed meanwhile, and no takeover starts the work
		// again while a failing write is retried.
		if !r.pending.settledByStart(quickOutcome{res: res, err: err, interrupted: interrupted}) {
			e.finish(ctx, r, interrupted, res, err)
		}
		e.mu.Lock()
		delete(e.runs, r.id)
		e.mu.Unlock()
		close(r.recorded)
	}()
}

var errShutdown = errors.New("engine shut down")

// errShutdownWaiting stops, at shutdown, work that waits for client input.
var errShutdownWaiting = errors.New("engine shut down while the task waited for input")

// invoke calls work, turning a panic into an internal error.
func (e *Engine) invoke(ctx context.Context, work Work) (res json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			e.log.Error("task work panicked", "panic", p, "stack", string(debug.Stack()))
			res, err = nil, &task.Error{Code: task.CodeInternalError, Message: fmt.Sprintf("internal error: the tool panicked: %v", p)}
		}
	}()
	return work(ctx)
}

// finish records the outcome of a task's work.
func (e *Engine) finish(ctx context.Context, r *run, interrupted bool, res json.RawMessage, err error) {
	if interrupted {
		// Stopped by shutdown: whatever the work returned (often an
		// error result made of ctx.Err()) says nothing about its outcome.
		e.resolveInterrupted(r, context.Cause(ctx) == errShutdownWaiting)
		return
	}
	terr := e.outcomeError(res, err)
	var cancelled *CancelledError
	errors.As(err, &cancelled)
	now := e.now()
	t, uerr := e.recordOutcome(ctx, r, func(t *task.Task) error {
		if t.Runner != e.id && !t.Status.Terminal() {
			return errLost // another engine took the task over
		}
		if cancelled != nil {
			return t.Cancel(cancelled.Message, now)
		}
		if terr != nil {
			return t.Fail(terr, terr.Message, now)
		}
		return t.Complete(res, now)
	})
	var te *task.TransitionError
	switch {
	case errors.As(uerr, &te) && cancelled != nil && te.From == task.Cancelled:
		return // cancelled meanwhile by its owner: the same outcome
	case errors.As(uerr, &te), errors.Is(uerr, errLost):
		// Cancelled (or otherwise ended, or taken over) while the work
		// ran: the stored state stands, the late result is dropped, and
		// said (the work may have had effects the status does not show).
		e.lateResult(ctx, r, terr)
		return
	case uerr != nil:
		e.log.Error("recording task outcome", "task", r.id, "err", uerr)
		return
	case t.Status == task.Cancelled:
		r.final.Store(t)
		e.log.Info("task cancelled by its work", "task", t.ID, "tool", t.Tool, "message", t.StatusMessage)
	case t.Status == task.Failed:
		r.final.Store(t)
		e.log.Info("task failed", "task", t.ID, "tool", t.Tool, "code", t.Error.Code, "message", t.Error.Message)
	default:
		r.final.Store(t)
		e.log.Info("task completed", "task", t.ID, "tool", t.Tool, "resultBytes", len(res))
	}
}

// created tells the watchers, the log, the audit trail and the observer
// that t was created.
func (e *Engine) created(parent context.Context, t *task.Task) {
	e.changed(t)
	e.log.Info("task created", "task", t.ID, "tool", t.Tool, "owner", t.Owner, "wire", t.Wire, "ttl", t.TTL)
	e.opts.Audit.Created(parent, audit.TaskOf(t), t.Wire, t.TTL)
	e.Observer().TaskCreated(t.Tool)
}

// outcomeError returns the task error of a work's outcome, nil for a
// result to complete the task with.
func (e *Engine) outcomeError(res json.RawMessage, err error) *task.Error {
	if err == nil && len(res) > e.opts.MaxResultBytes {
		err = &task.Error{Code: task.CodeInternalError, Message: fmt.Sprintf(
			"the tool's result of %d bytes exceeds the server's limit of %d bytes", len(res), e.opts.MaxResultBytes)}
	}
	if err == nil {
		return nil
	}
	var terr *task.Error
	if !errors.As(err, &terr) {
		terr = &task.Error{Code: task.CodeInternalError, Message: err.Error()}
	}
	return terr
}
