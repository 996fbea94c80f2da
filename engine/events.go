package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// MaxEmitBytes caps one value a task emits: a webhook delivery carries
// it whole, and the Events design keeps deliveries within 256 KiB.
const MaxEmitBytes = 192 << 10

// Emit appends data, a JSON value, as an output event of the task (an
// intermediate result: see store.Events), in order with the lines the
// work logs: like them it waits in memory and is written with them (one
// write for both), at the latest before the task's outcome is recorded or
// it asks for input; FlushLog writes it at once. A write that fails is
// tried again: an emitted value is never dropped. The task's requester
// reads it with events/poll, events/stream or a webhook subscription.
func (h *Handle) Emit(ctx context.Context, data json.RawMessage) error {
	if !json.Valid(data) {
		return errors.New("engine: Emit of a value that is not JSON")
	}
	if len(data) > MaxEmitBytes {
		return fmt.Errorf("engine: Emit of %d bytes, more than %d: emit a summary, and keep the rest in the result", len(data), MaxEmitBytes)
	}
	if check := h.e.hooks.CheckEmit; check != nil {
		if err := check(h.run.tool, data); err != nil {
			return err
		}
	}
	ev := store.OutputEvent{Time: h.e.now(), Stream: "emit", Data: data}
	if b := h.run.logs; b != nil {
		b.addEvent(ev)
		return nil
	}
	if err := h.run.ensureCreated(ctx); err != nil {
		return err
	}
	err := h.e.store.AppendEvents(ctx, h.run.id, []store.OutputEvent{ev})
	if err == nil {
		h.e.wakeWatchers(h.run.id)
	}
	return err
}

// ReadEvents returns a page of owner's events that q selects (q.Owner is
// set to owner). A task ID of another owner, or an unknown one, selects
// nothing, as an unknown task does.
func (e *Engine) ReadEvents(ctx context.Context, owner task.Owner, q store.EventQuery) (*store.EventPage, error) {
	q.Owner = owner
	return e.store.ReadEvents(ctx, q)
}

// EventHead returns the position after which the events committed from
// now on are read.
func (e *Engine) EventHead(ctx context.Context) (store.EventPos, error) {
	return e.store.EventHead(ctx)
}

// Events returns the store's event log and webhook outbox, for the
// events service of the server.
func (e *Engine) Events() store.Events { return e.store }

// CheckVisible reports whether owner may see the task id: nil, or a
// *NotFoundError (audited by the caller as a denied lookup).
func (e *Engine) CheckVisible(ctx context.Context, owner task.Owner, id task.ID) error {
	_, err := e.visible(ctx, owner, id)
	return err
}
