package engine

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/task"
)

// Handle is what task work knows of its task: its ID, a way to set the
// status message, and a way to ask the client for input. Work finds it
// with [FromContext].
type Handle struct {
	e   *Engine
	run *run
}

type handleKey struct{}

func withHandle(ctx context.Context, h *Handle) context.Context {
	return context.WithValue(ctx, handleKey{}, h)
}

// FromContext returns the task handle of the work running under ctx, or nil
// when ctx does not belong to task work (e.g. a plain synchronous call).
func FromContext(ctx context.Context) *Handle {
	h, _ := ctx.Value(handleKey{}).(*Handle)
	return h
}

// TaskID returns the ID of the handle's task.
func (h *Handle) TaskID() task.ID { return h.run.id }

// SetStatusMessage records a human-readable status message on the task,
// visible to the next tasks/get.
func (h *Handle) SetStatusMessage(ctx context.Context, msg string) error {
	_, err := h.e.writeForWork(ctx, h.run, "status message", func(t *task.Task) error {
		if t.Runner != h.e.id && !t.Status.Terminal() {
			return errLost
		}
		return t.SetStatusMessage(msg, h.e.now())
	})
	h.stopIfLost(err)
	return err
}

// SetExternalRef records durably, before it returns, what the work needs to
// find its work again in another system: the upstream task of a gateway
// tool, the job of a job API. After a crash, the recovery policy sees it
// in task.Task.ExternalRef and may re-attach to that work instead of
// failing the task with an "outcome unknown" error. Record it as soon as
// the other system has answered. A task that ended meanwhile keeps its
// status, and the reference is recorded all the same: the evidence of
// what was started is never dropped.
func (h *Handle) SetExternalRef(ctx context.Context, ref string) error {
	return h.setExternalRef(ctx, ref, true)
}

// SetProvisionalExternalRef records ref durably as SetExternalRef does,
// but as a provisional reference: what the work is about to start
// elsewhere, before the other system has answered (e.g. the idempotency
// key of a start request, recorded before the request is sent). A
// requester waiting for the reference (StartSpec.AwaitExternalRef) goes
// on waiting for the final one. After a crash, the recovery policy sees
// the reference and the re-run knows from it that a start may have been
// sent, with what key.
func (h *Handle) SetProvisionalExternalRef(ctx context.Context, ref string) error {
	return h.setExternalRef(ctx, ref, false)
}

func (h *Handle) setExternalRef(ctx context.Context, ref string, final bool) error {
	_, err := h.e.writeForWork(ctx, h.run, "external reference", func(t *task.Task) error {
		if t.Runner != h.e.id && !t.Status.Terminal() {
			return errLost
		}
		t.ExternalRef = ref
		return nil
	})
	h.stopIfLost(err)
	if err == nil && final {
		h.run.refSettled()
	}
	return err
}

// ExternalRef returns the task's external reference as stored (see
// [Handle.SetExternalRef]): set by an earlier run of the work, for a
// re-run that re-attaches.
func (h *Handle) ExternalRef(ctx context.Context) (string, error) {
	if err := h.run.ensureCreated(ctx); err != nil {
		return "", err
	}
	t, err := h.e.timed.Get(ctx, h.run.id)
	if err != nil {
		return "", err
	}
	return t.ExternalRef, nil
}

// Cancelled reports whether the work's context was cancelled because the
// task was cancelled (by its requester, through this engine or another),
// as opposed to a shutdown or a takeover by another engine. Work that
// started something elsewhere (an upstream task, a job) cancels it then,
// and only then: after a shutdown or a takeover the next run re-attaches
// to it.
func (h *Handle) Cancelled() bool {
	return h.run.ctx.Err() != nil && context.Cause(h.run.ctx) == context.Canceled
}

// stopIfLost stops the work at once when a write found that another
// engine holds the task: nothing it does from now on counts.
func (h *Handle) stopIfLost(err error) {
	if errors.Is(err, errLost) {
		h.e.log.Warn("stopping work of a task this engine lost", "task", h.run.id, "tool", h.run.tool)
		h.run.cancel(errLost)
	}
}

// RequestInput asks the client for input: it records request (a JSON object
// {"method":..., "params":...}) as an outstanding input request, which moves
// the task to input_required, and blocks until the client's answer arrives,
// the task ends, or ctx is done. It returns the client's answer (the JSON
// result of the request). Several RequestInput calls may wait at once; each
// gets its own key. The lines the work logged (Log) are written first.
func (h *Handle) RequestInput(ctx context.Context, request json.RawMessage) (json.RawMessage, error) {
	return h.requestInput(ctx, request, false)
}

// requestInput is RequestInput; with withdraw, a wait that ctx ends
// withdraws the request from the task (the question no longer needs an
// answer), unless the task's work is stopping.
func (h *Handle) requestInput(ctx context.Context, request json.RawMessage, withdraw bool) (json.RawMessage, error) {
	// What the work logged before it asks is in the log when the
	// requester sees the question.
	h.FlushLog()
	var key string
	var from task.Status // the status the landed attempt changed
	_, err := h.e.writeForWork(ctx, h.run, "input request", func(t *task.Task) error {
		if t.Runner != h.e.id && !t.Status.Terminal() {
			return errLost
		}
		if key != "" && t.HasInputKey(key) {
			// An earlier attempt landed, though its answer was lost.
			return errLanded
		}
		from = t.Status
		k, err := t.AddInputRequest(request, h.e.now())
		key = k
		return err
	})
	if errors.Is(err, errLanded) {
		err = nil
		h.announceLanded(ctx, from)
	}
	if err != nil {
		h.stopIfLost(err)
		return nil, err
	}
	h.e.log.Info("task input required", "task", h.run.id, "tool", h.run.tool, "key", key)
	h.run.waiting.Add(1)
	defer h.run.waiting.Add(-1)
	if h.e.isClosed() {
		// Shutting down: nobody will answer within the grace.
		h.run.cancel(errShutdownWaiting)
	}
	poll := time.NewTicker(h.e.opts.InputPollInterval)
	defer poll.Stop()
	if withdraw {
		defer func() {
			if ctx.Err() != nil && h.run.ctx.Err() == nil {
				_, _ = h.e.write(context.WithoutCancel(ctx), h.run.id, func(t *task.Task) error {
					if !t.WithdrawInput(key, h.e.now()) {
						return errNoAnswer // nothing to write
					}
					return nil
				})
			}
		}()
	}
	outage := false // reading the answer fails transiently
	for {
		wake := h.run.waitChan()
		var answer json.RawMessage
		var found bool
		_, err := h.e.write(ctx, h.run.id, func(t *task.Task) error {
			if t.Status.Terminal() {
				return &TerminalError{Status: t.Status}
			}
			answer, found = t.TakeResponse(key)
			if !found {
				return errNoAnswer
			}
			return nil
		})
		switch {
		case err == nil:
			if outage {
				h.e.log.Info("task store reachable again; the task waits for its input", "task", h.run.id, "tool", h.run.tool)
			}
			return answer, nil
		case errors.Is(err, errNoAnswer):
			if outage {
				outage = false
				h.e.log.Info("task store reachable again; the task waits for its input", "task", h.run.id, "tool", h.run.tool)
			}
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case h.e.transient(err):
			// The store is briefly out of reach: the answer, if one comes,
			// waits in the store. Keep waiting; the lease, renewed
			// meanwhile or not, decides who runs the task.
			if !outage {
				outage = true
				h.e.log.Warn("reading a task's input failed on a transient store error; still waiting", "task", h.run.id, "tool", h.run.tool, "err", err)
			}
		default:
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-wake:
		case <-poll.C:
		}
	}
}

// announceLanded tells the watchers and the audit trail of a write whose
// answer was lost though it landed (a retried write found it done), as
// the write would have: the task moved from from to its status now.
func (h *Handle) announceLanded(ctx context.Context, from task.Status) {
	t, err := h.e.timed.Get(ctx, h.run.id)
	if err != nil {
		return // the next poll of the task shows the change anyway
	}
	h.e.changed(t)
	if t.Status != from {
		h.e.opts.Audit.StatusChanged(ctx, audit.TaskOf(t), string(from), string(t.Status), 0)
		h.e.observeChange(t, from)
	}
}

var (
	errNoAnswer = errors.New("no answer yet")
	errLanded   = errors.New("the input request is already recorded")
)
