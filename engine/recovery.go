package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// Messages recorded on tasks resolved by the recovery policy.
const (
	// msgOutcomeUnknown fails a task an exclusive engine finds unfinished
	// at start-up: the process that ran it is gone.
	msgOutcomeUnknown = "The server stopped while this task was running; its outcome is unknown, and it was not re-run because the tool is not declared safe to re-run."
	// msgLeaseLapsed fails a task taken over from another engine whose
	// lease lapsed: that engine stopped, stalled or lost the store; this
	// one cannot tell which.
	msgLeaseLapsed = "The server running this task stopped renewing its hold on it (it stopped, stalled, or lost the task store); its outcome is unknown, and it was not re-run because the tool is not declared safe to re-run."
	// msgOutcomeLost fails a task of an exclusive engine found with its
	// lease lapsed and no work running for it: the work ended, or its
	// re-run started, and the store failed to record it.
	msgOutcomeLost = "The server's work on this task ended without its outcome being recorded (the task store failed meanwhile); its outcome is unknown, and it was not re-run because the tool is not declared safe to re-run."
	msgRerun       = "The server restarted while this task was running; the task is being run again."
	// msgRerunTaken re-runs a task taken over from an engine whose lease
	// lapsed, or, on an exclusive engine, one left with no work running.
	msgRerunTaken = "The server running this task stopped renewing its hold on it, or lost track of its work; the task is being run again."
	msgHandedBack = "The server is shutting down; this task will run again on the next server that takes it over."
	// msgShutdownWaiting fails a task that is not safe to re-run and was
	// waiting for the client's input when the server shut down.
	msgShutdownWaiting = "The server shut down (a restart or a stop, not the tool) while this task waited for input; it was stopped there and is not re-run because the tool is not declared safe to re-run. Call the tool again to start over."
)

// CodeOutcomeUnknown is the JSON-RPC error code of a task failed by the
// recovery policy (an internal error: the outcome is unknown).
const CodeOutcomeUnknown = task.CodeInternalError

// claimExpired is the step of the takeover service: it takes over the
// tasks whose lease expired.
func (e *Engine) claimExpired(ctx context.Context) {
	if e.isClosed() {
		// Shutting down: a task handed back now is for the next engine,
		// not to be claimed and handed back again (each time counting a
		// start) while Shutdown waits for other work.
		return
	}
	if err := e.claimOrphans(ctx, false); err != nil && e.base.Err() == nil {
		e.log.Error("taking over tasks with expired leases", "err", err)
	}
}

// claimOrphans takes over the tasks no live engine holds and resolves them
// by the recovery policy. At start-up of an exclusive engine that is every
// unfinished task (the process that ran them is gone); otherwise, the tasks
// whose lease expired (their engine died or lost the store).
func (e *Engine) claimOrphans(ctx context.Context, startup bool) error {
	claimed, err := e.timed.Claim(ctx, store.ClaimRequest{
		Runner:       e.id,
		Now:          e.now(),
		Lease:        e.opts.Lease,
		IgnoreLeases: startup && e.opts.Exclusive,
	})
	if err != nil {
		return fmt.Errorf("engine: claiming unfinished tasks: %w", err)
	}
	msg, rerun := msgLeaseLapsed, msgRerunTaken
	switch {
	case startup && e.opts.Exclusive:
		msg, rerun = msgOutcomeUnknown, msgRerun
	case e.opts.Exclusive:
		msg = msgOutcomeLost
	}
	for _, t := range claimed {
		e.takeOver(ctx, t, msg, rerun)
	}
	return nil
}

// takeOver resolves one claimed task by the recovery policy: re-run it
// (its status message then says rerun), or fail it with the "outcome
// unknown" error unknown.
func (e *Engine) takeOver(ctx context.Context, t *task.Task, unknown, rerun string) {
	e.mu.Lock()
	_, running := e.runs[t.ID]
	e.mu.Unlock()
	if running {
		// Our own lease lapsed (e.g. a slow heartbeat) and the claim just
		// renewed it: the work goes on.
		return
	}
	var work Work
	if e.hooks.Recover != nil {
		work = e.hooks.Recover(ctx, t)
	}
	// Reconciliation before the recovery policy: what the system of
	// record says of the operations the work recorded.
	v, unsettled := e.reconcile(ctx, t, unknown)
	switch v {
	case resolved:
		e.Observer().TaskTakenOver(t.Tool, "reconciled")
		return
	case runAgain:
		if work == nil && e.hooks.WorkOf != nil {
			work = e.hooks.WorkOf(ctx, t)
		}
		rerun = msgReconciledRerun
	}
	if work == nil {
		e.Observer().TaskTakenOver(t.Tool, "failed_unknown")
		e.failUnknown(ctx, t.ID, unknown)
		e.markUnknown(ctx, unsettled, "the task was failed \"outcome unknown\" after its server stopped; reconcile before retrying")
		return
	}
	if t.Attempts >= e.opts.MaxAttempts {
		e.Observer().TaskTakenOver(t.Tool, "failed_attempts")
		e.failUnknown(ctx, t.ID, fmt.Sprintf("The task's work was started %d times and never finished (the server stopped each time); it is not run again.", t.Attempts))
		return
	}
	now := e.now()
	nt, err := e.write(ctx, t.ID, func(t *task.Task) error {
		if t.Status.Terminal() {
			return &TerminalError{Status: t.Status}
		}
		if t.Runner != e.id {
			return errLost
		}
		if t.Status == task.InputRequired {
			if err := t.Transition(task.Working, now); err != nil {
				return err
			}
		}
		t.InputRequests, t.InputResponses = nil, nil
		t.StatusMessage = rerun
		t.LastUpdatedAt = now.UTC()
		t.Attempts++
		return nil
	})
	if err != nil {
		e.Observer().TaskTakenOver(t.Tool, "not_rerun")
		e.log.Error("re-running task after restart", "task", t.ID, "err", err)
		return
	}
	e.Observer().TaskTakenOver(t.Tool, "rerun")
	e.log.Info("task re-run after restart", "task", nt.ID, "tool", nt.Tool, "attempt", nt.Attempts)
	e.mu.Lock()
	closed := e.closed
	if !closed {
		e.wg.Add(1)
	}
	e.mu.Unlock()
	if closed {
		e.resolveInterrupted(&run{id: nt.ID, tool: nt.Tool}, false)
		return
	}
	e.launch(context.Background(), nt, work)
}

// failUnknown fails a task whose outcome cannot be known.
func (e *Engine) failUnknown(ctx context.Context, id task.ID, msg string) {
	now := e.now()
	// Not cut short by the caller's cancellation (a shutdown must still
	// record the failure), but bounded: a hung store must not hold the
	// takeover service, or Shutdown, for ever.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.ClaimTimeout)
	defer cancel()
	t, err := e.write(ctx, id, func(t *task.Task) error {
		if t.Runner != e.id && !t.Status.Terminal() {
			return errLost // another engine holds it now
		}
		return t.Fail(&task.Error{Code: CodeOutcomeUnknown, Message: msg}, msg, now)
	})
	var te *task.TransitionError
	switch {
	case errors.As(err, &te), errors.Is(err, errLost):
	case err != nil:
		e.log.Error("failing task with unknown outcome", "task", id, "err", err)
	default:
		e.log.Info("task failed", "task", t.ID, "tool", t.Tool, "code", CodeOutcomeUnknown, "message", msg)
	}
}

// resolveInterrupted resolves a task whose work was stopped by shutdown:
// re-runnable work is handed back for the next start, other work fails.
func (e *Engine) resolveInterrupted(r *run, waitingForInput bool) {
	ctx := context.Background()
	t, err := e.timed.Get(ctx, r.id)
	if err != nil || t.Status.Terminal() {
		return
	}
	if e.hooks.Recover != nil && e.hooks.Recover(ctx, t) != nil {
		now := e.now()
		_, err := e.write(ctx, r.id, func(t *task.Task) error {
			if t.Status.Terminal() {
				return &TerminalError{Status: t.Status}
			}
			if t.Runner != e.id {
				return errLost
			}
			// Handed back at once: no lease, so another engine (or this
			// one, restarted) claims it without waiting.
			t.Runner = ""
			t.LeaseExpiresAt = time.Time{}
			return t.SetStatusMessage(msgHandedBack, now)
		})
		if err == nil {
			e.log.Info("task handed back at shutdown", "task", r.id, "tool", r.tool)
		}
		return
	}
	msg := "The server shut down while this task was running; its outcome is unknown."
	if waitingForInput {
		msg = msgShutdownWaiting
	}
	// Not re-runnable: what the system of record says of its operations
	// may still settle it.
	v, unsettled := e.reconcile(ctx, t, msg)
	switch v {
	case resolved:
		return
	case runAgain:
		e.failUnknown(ctx, r.id, "The server shut down while this task was running; the system of record says its operation was not applied. Call the tool again.")
		return
	}
	e.failUnknown(ctx, r.id, msg)
	e.markUnknown(ctx, unsettled, "the task was failed \"outcome unknown\" at shutdown; reconcile before retrying")
}

// lateResult logs and audits the dropped outcome of work whose task had
// ended or been taken over meanwhile.
func (e *Engine) lateResult(ctx context.Context, r *run, terr *task.Error) {
	outcome := string(task.Completed)
	if terr != nil {
		outcome = string(task.Failed)
	}
	ctx = context.WithoutCancel(ctx)
	gctx, cancel := context.WithTimeout(ctx, e.opts.FeedCheckTimeout)
	defer cancel()
	t, err := e.timed.Get(gctx, r.id)
	status, runner := "", ""
	at := audit.Task{ID: string(r.id), Tool: r.tool}
	if err == nil {
		status, runner, at = string(t.Status), t.Runner, audit.TaskOf(t)
	}
	switch {
	case t != nil && t.Status == task.Cancelled:
		// The usual case: cancelled while it ran; the requester asked for
		// it and was told (the cancellation is in the trail).
		e.log.Debug("late result of a cancelled task dropped", "task", r.id, "tool", r.tool, "outcome", outcome)
		return
	case t == nil || t.Status.Terminal():
		// Ended elsewhere, e.g. failed "outcome unknown" by the engine
		// that took it over while this one was paused.
		e.log.Warn("late result dropped: the task had been ended by another engine", "task", r.id, "tool", r.tool, "outcome", outcome, "status", status)
	default:
		e.log.Warn("late result dropped: another engine had taken the task over", "task", r.id, "tool", r.tool, "outcome", outcome, "runner", runner)
	}
	e.opts.Audit.LateResultDropped(ctx, at, outcome, status)
}

// sweep deletes expired tasks now and returns how many it deleted.
func (e *Engine) sweep(ctx context.Context) int {
	n, err := e.timed.DeleteExpired(ctx, e.now())
	if err != nil {
		if !errors.Is(ctx.Err(), context.Canceled) { // a failure, or a timeout
			e.log.Error("sweeping expired tasks", "err", err)
		}
		return 0
	}
	if n > 0 {
		e.log.Info("swept expired tasks", "count", n)
	}
	return n
}
