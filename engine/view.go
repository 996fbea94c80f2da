package engine

import (
	"context"
	"errors"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/internal/tracing"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// View returns what a tasks/get answers of the task with the given ID, if
// owner may see it: the task (its payloads loaded as opts says, see
// store.ViewOptions), its newest operation on the ledger (nil if none)
// and its log's position, read in one round trip (traced as
// mcptask.store.view, observed as "view"). Another owner's task, an
// expired or an unknown one is a *NotFoundError, exactly as for Get.
func (e *Engine) View(ctx context.Context, owner task.Owner, id task.ID, opts store.ViewOptions) (*store.View, error) {
	view, err := e.viewTask(ctx, e.store, id, opts)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &NotFoundError{Reason: audit.ReasonUnknown}
	}
	if err != nil {
		return nil, err
	}
	if err := e.denied(view.Task, owner, e.now()); err != nil {
		return nil, err
	}
	return view, nil
}

// viewTask is v.View, in the span mcptask.store.view when the engine
// traces and the caller is in a trace, told to the observer as "view".
func (e *Engine) viewTask(ctx context.Context, v store.Viewer, id task.ID, opts store.ViewOptions) (*store.View, error) {
	if e.tracer == nil || !traced(ctx) {
		return e.observedView(ctx, v, id, opts)
	}
	ctx, span := e.tracer.start(ctx, tracing.SpanStore+"view", "view", id)
	view, err := e.observedView(ctx, v, id, opts)
	endStoreSpan(span, storeFailure(err))
	return view, err
}

// observedView is v.View, told to the observer.
func (e *Engine) observedView(ctx context.Context, v store.Viewer, id task.ID, opts store.ViewOptions) (*store.View, error) {
	if e.opts.Observer == nil {
		return v.View(ctx, id, opts)
	}
	start := time.Now()
	view, err := v.View(ctx, id, opts)
	timedStore{e: e}.observe("view", start, err)
	return view, err
}
