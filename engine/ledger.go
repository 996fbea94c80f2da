package engine

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// ErrNoReconcile is what a ReconcileFunc returns for a task whose tool has
// no way to ask its system of record: the recovery policy decides, as for
// a task without unsettled operations.
var ErrNoReconcile = errors.New("engine: the tool has no reconcile function")

// ErrOperationKeyTaken is returned by Handle.RecordOperation for an
// explicit key that another owner's operation holds.
var ErrOperationKeyTaken = errors.New("engine: the operation key is taken by another owner's operation")

// ReconcileFunc asks the system of record about an operation that a task
// found unfinished (after a crash, a restart or a takeover) recorded but
// that was not confirmed or rejected. It returns what the system says:
// task.OpConfirmed (the effect happened), task.OpRejected (it did not:
// the task may run again), or anything else (or an error) when it cannot
// tell.
type ReconcileFunc func(ctx context.Context, t *task.Task, op task.Operation) (state task.OpState, detail string, err error)

// OperationSpec is what a handler says of an operation it is about to do.
type OperationSpec struct {
	// Key identifies the operation, stable across re-runs. Empty means a
	// key derived from the task's idempotency key (or, without one, its
	// ID), its tool, Object and Effect.
	Key string
	// Object and ObjectVersion name what the effect acts on, if known.
	Object, ObjectVersion string
	// Effect is a short description of the effect, never a payload.
	Effect string
}

// Op is an operation a task's work recorded on the ledger (see
// [Handle.RecordOperation]): its handle to record what the downstream
// system says. Its methods write to the ledger whatever happened to the
// task meanwhile (ended, taken over by another engine): the evidence of
// what was done downstream is never dropped.
type Op struct {
	e  *Engine
	op task.Operation
}

// Key returns the operation's key.
func (o *Op) Key() string { return o.op.Key }

// State returns the operation's state as last written by this handle: a
// re-run of a task finds an operation confirmed by an earlier run in
// state task.OpConfirmed, and does not do it again.
func (o *Op) State() task.OpState { return o.op.State }

// Submitted records the downstream system's receipt (a job ID, a payment
// intent, a commit SHA): the operation is submitted.
func (o *Op) Submitted(ctx context.Context, receipt string) error {
	return o.move(ctx, task.OpSubmitted, receipt, "")
}

// Confirmed records that the downstream system confirmed the effect.
func (o *Op) Confirmed(ctx context.Context, detail string) error {
	return o.move(ctx, task.OpConfirmed, "", detail)
}

// Rejected records that the downstream system refused the effect, or did
// not apply it, and why.
func (o *Op) Rejected(ctx context.Context, reason string) error {
	return o.move(ctx, task.OpRejected, "", reason)
}

// Unknown records that the effect's outcome is not known (e.g. a cancel
// the downstream system refused or never answered: the effect may still
// happen), and why; reconciliation may settle it later.
func (o *Op) Unknown(ctx context.Context, reason string) error {
	return o.move(ctx, task.OpUnknown, "", reason)
}

// move writes a state change. A change the states forbid (e.g. a late
// receipt of an operation reconciliation settled meanwhile) still records
// the receipt if the operation has none, and returns the *task.OpError.
func (o *Op) move(ctx context.Context, to task.OpState, receipt, detail string) error {
	l := o.e.store
	var moveErr error
	// Not cut short by the work's cancellation (the evidence is kept
	// whatever happened to the task), but bounded.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.e.opts.ClaimTimeout)
	defer cancel()
	got, err := l.UpdateOperation(wctx, o.op.Key, func(op *task.Operation) error {
		moveErr = op.Move(to, detail, o.e.now())
		if moveErr != nil {
			if receipt != "" && op.Receipt == "" {
				op.Receipt = receipt
				op.Detail = fmt.Sprintf("late receipt, recorded after the operation was %s", op.State)
				op.UpdatedAt = o.e.now().UTC()
				return nil
			}
			return moveErr
		}
		if receipt != "" {
			op.Receipt = receipt
		}
		return nil
	})
	if err != nil {
		return err
	}
	o.op = *got
	if moveErr != nil {
		o.e.log.Warn("ledger: late change of a settled operation", "operation", o.op.Key, "task", o.op.TaskID, "err", moveErr)
	}
	return moveErr
}

// RecordOperation records durably, before it returns, an operation the
// work is about to do downstream, in state intended: call it BEFORE the
// side effect starts, then record its receipt, confirmation or rejection
// on the returned Op. The operation's owner (actor and tenant) is the
// task's, and so is its Correlation (the host's correlation keys of the
// call). Recording a key the ledger holds returns the stored operation
// (a re-run finds what the earlier run recorded, perhaps confirmed); one
// a reconciliation found rejected gets a new attempt, its key suffixed
// "#2", "#3"....
func (h *Handle) RecordOperation(ctx context.Context, spec OperationSpec) (*Op, error) {
	l := h.e.store
	if err := h.run.ensureCreated(ctx); err != nil {
		return nil, err
	}
	t, err := h.e.timed.Get(ctx, h.run.id)
	if err != nil {
		return nil, err
	}
	key := spec.Key
	if key == "" {
		key = defaultOperationKey(t, spec.Object, spec.Effect)
	}
	for attempt := 1; attempt <= 100; attempt++ {
		k := key
		if attempt > 1 {
			k = fmt.Sprintf("%s#%d", key, attempt)
		}
		got, err := l.RecordOperation(ctx, &task.Operation{
			Key: k, TaskID: t.ID, Tool: t.Tool, Owner: t.Owner,
			Object: spec.Object, ObjectVersion: spec.ObjectVersion, Effect: spec.Effect,
			State: task.OpIntended, CreatedAt: h.e.now(), UpdatedAt: h.e.now(),
			Correlation: task.CloneCorrelation(t.Correlation),
		})
		if err != nil {
			return nil, err
		}
		if got.Owner != t.Owner {
			return nil, ErrOperationKeyTaken
		}
		if got.State == task.OpRejected && got.TaskID == t.ID {
			continue // a rejected attempt of this task: a new one
		}
		if got.TaskID != t.ID && !got.State.Settled() {
			// An unfinished operation of an earlier task with the same
			// idempotency key: this task answers for it now, so that its
			// recovery reconciles it.
			got, err = l.UpdateOperation(ctx, k, func(op *task.Operation) error {
				op.TaskID = t.ID
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		return &Op{e: h.e, op: *got}, nil
	}
	return nil, fmt.Errorf("engine: operation %q was rejected 100 times", key)
}

// defaultOperationKey is the operation key of t's work for an operation
// on object with effect when the work names none: derived from the key
// scope and idempotency key of t's call (stable across tasks re-created
// with that key) or, without one, from t's ID (stable across re-runs),
// and from t's tool, object and effect.
func defaultOperationKey(t *task.Task, object, effect string) string {
	base := "task\x00" + string(t.ID)
	if t.IdempotencyKey != "" {
		base = "idem\x00" + string(t.Owner.KeyScope()) + "\x00" + t.IdempotencyKey
	}
	sum := sha256.Sum256([]byte(base + "\x00" + t.Tool + "\x00" + object + "\x00" + effect))
	return "op-" + base64.RawURLEncoding.EncodeToString(sum[:18])
}

// Operations returns a page of owner's own operations that q selects,
// newest first, and the cursor of the next page ("" at the end): q.Owner
// is always owner (an empty owner selects nothing);
// store.ErrBadCursor for a cursor the ledger did
// not issue for this selection.
func (e *Engine) Operations(ctx context.Context, owner task.Owner, q store.OperationQuery) ([]*task.Operation, string, error) {
	l := e.store
	if owner == "" {
		return nil, "", nil
	}
	q.Owner = owner
	return l.Operations(ctx, q)
}

// LatestOperation returns the newest operation the task with id recorded,
// or nil if none.
func (e *Engine) LatestOperation(ctx context.Context, id task.ID) (*task.Operation, error) {
	l := e.store
	ops, _, err := l.Operations(ctx, store.OperationQuery{TaskID: id, Limit: 1})
	if err != nil || len(ops) == 0 {
		return nil, err
	}
	return ops[0], nil
}

// unsettledOps returns the operations of t that are neither confirmed nor
// rejected.
func (e *Engine) unsettledOps(ctx context.Context, t *task.Task) ([]*task.Operation, error) {
	l := e.store
	var out []*task.Operation
	q := store.OperationQuery{TaskID: t.ID, Limit: store.MaxOperationLimit}
	for {
		ops, next, err := l.Operations(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, op := range ops {
			if !op.State.Settled() {
				out = append(out, op)
			}
		}
		if next == "" {
			return out, nil
		}
		q.Cursor = next
	}
}

// verdict is what reconciliation decided for a task found unfinished.
type verdict int

const (
	// policy: no unsettled operation (or no Reconcile): the recovery
	// policy decides.
	policy verdict = iota
	// resolved: the task was completed (confirmed) or failed (unknown).
	resolved
	// runAgain: every unsettled operation was rejected: the task runs
	// again, re-runnable or not.
	runAgain
)

// settle asks the system of record (Hooks.Reconcile) about the
// unsettled operations ops of t and records its answers on the ledger;
// asked is false when the tool cannot reconcile (ErrNoReconcile).
func (e *Engine) settle(ctx context.Context, t *task.Task, ops []*task.Operation) (confirmed, rejected, unknown []*task.Operation, asked bool) {
	return e.settleOps(ctx, t, ops, false)
}

// settleOps is settle; with confirmedOnly (work still runs and may yet
// apply what the system of record has not seen), only confirmations are
// recorded, and the other operations are left as they are.
func (e *Engine) settleOps(ctx context.Context, t *task.Task, ops []*task.Operation, confirmedOnly bool) (confirmed, rejected, unknown []*task.Operation, asked bool) {
	l := e.store
	for _, op := range ops {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.ReconcileTimeout)
		state, detail, err := e.hooks.Reconcile(rctx, t, *op)
		cancel()
		if errors.Is(err, ErrNoReconcile) {
			return nil, nil, nil, false
		}
		if err != nil {
			detail = "reconcile failed: " + err.Error()
			state = task.OpUnknown
		}
		if state != task.OpConfirmed && state != task.OpRejected {
			state = task.OpUnknown
			if detail == "" {
				detail = "the system of record could not tell whether the effect happened"
			}
		}
		if confirmedOnly && state != task.OpConfirmed {
			continue
		}
		now := e.now()
		got, uerr := l.UpdateOperation(context.WithoutCancel(ctx), op.Key, func(o *task.Operation) error {
			o.ReconciledAt = now.UTC()
			if o.State == state {
				o.Detail, o.UpdatedAt = detail, now.UTC()
				return nil
			}
			return o.Move(state, detail, now)
		})
		if uerr != nil {
			e.log.Error("recording a reconciliation", "task", t.ID, "operation", op.Key, "err", uerr)
			state = task.OpUnknown
		} else {
			op = got
		}
		e.log.Info("operation reconciled", "task", t.ID, "operation", op.Key, "state", state, "receipt", op.Receipt)
		switch state {
		case task.OpConfirmed:
			confirmed = append(confirmed, op)
		case task.OpRejected:
			rejected = append(rejected, op)
		default:
			unknown = append(unknown, op)
		}
	}
	return confirmed, rejected, unknown, true
}

// ReconcileOperations asks the system of record about every unsettled
// operation of the task t on the ledger (intended, submitted or unknown)
// and records its answers, without changing the task: an operator's
// reconciliation of work in flight (a rollback). While an engine runs
// t's work (the task, read again here, has a runner) the work may still
// apply an operation the system of record has not seen yet, so only
// confirmations are recorded then: the other answers leave the
// operation for the work, or the takeover's reconciliation if its
// engine died, to settle. Without Hooks.Reconcile, or for a tool that
// cannot reconcile, nothing is recorded.
func (e *Engine) ReconcileOperations(ctx context.Context, t *task.Task) error {
	cur, err := e.timed.Get(ctx, t.ID)
	if err != nil {
		return err
	}
	ops, err := e.unsettledOps(ctx, cur)
	if err != nil || len(ops) == 0 || e.hooks.Reconcile == nil {
		return err
	}
	e.settleOps(ctx, cur, ops, Running(cur))
	return nil
}

// Running reports whether an engine runs t's work: it has a runner and
// has not ended (a lapsed lease included: the takeover decides then).
func Running(t *task.Task) bool { return t.Runner != "" && !t.Status.Terminal() }

// reconcile asks the system of record about the unsettled operations of t,
// before the recovery policy, and settles them on the ledger: all
// confirmed → t completes, saying so; any unknown (or an error) → t fails
// "outcome unknown" with unknownMsg and the operation stays unknown; else
// (some rejected) → runAgain. Without unsettled operations, or without a
// Reconcile function, it decides nothing (policy), and ops says what is
// unsettled.
func (e *Engine) reconcile(ctx context.Context, t *task.Task, unknownMsg string) (v verdict, ops []*task.Operation) {
	ops, err := e.unsettledOps(ctx, t)
	if err != nil {
		e.log.Error("reading the task's operations before recovery", "task", t.ID, "err", err)
		return policy, nil
	}
	if len(ops) == 0 || e.hooks.Reconcile == nil {
		return policy, ops
	}
	confirmed, rejected, unknown, asked := e.settle(ctx, t, ops)
	if !asked {
		return policy, ops
	}
	switch {
	case len(unknown) > 0:
		op := unknown[0]
		e.failUnknown(ctx, t.ID, fmt.Sprintf("%s The system of record could not confirm operation %q (%s%s): its outcome is unknown; reconcile before retrying.",
			unknownMsg, op.Key, op.Effect, receiptNote(op)))
		return resolved, nil
	case len(rejected) > 0:
		return runAgain, nil
	}
	e.completeReconciled(ctx, t.ID, confirmed)
	return resolved, nil
}

func receiptNote(op *task.Operation) string {
	if op.Receipt == "" {
		return ""
	}
	return ", receipt " + op.Receipt
}

// msgReconciledRerun is the status message of a task re-run because the
// system of record said its operation was not applied.
const msgReconciledRerun = "The server running this task stopped; the system of record says its operation was not applied, so the task is being run again."

// completeReconciled completes a task whose operations the system of
// record confirmed, with a result that says so.
func (e *Engine) completeReconciled(ctx context.Context, id task.ID, ops []*task.Operation) {
	var b strings.Builder
	b.WriteString("Reconciled after the server running this task stopped: the system of record confirmed ")
	for i, op := range ops {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "operation %q (%s%s)", op.Key, op.Effect, receiptNote(op))
	}
	b.WriteString(".")
	text := b.String()
	result, _ := json.Marshal(map[string]any{
		"content": []map[string]string{{"type": "text", "text": text}},
	})
	now := e.now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.ClaimTimeout)
	defer cancel()
	t, err := e.write(ctx, id, func(t *task.Task) error {
		if t.Runner != e.id && !t.Status.Terminal() {
			return errLost
		}
		if err := t.Complete(result, now); err != nil {
			return err
		}
		t.StatusMessage = task.CapStatusMessage("Reconciled: the system of record confirmed the operation.")
		return nil
	})
	if err != nil {
		e.log.Error("completing a reconciled task", "task", id, "err", err)
		return
	}
	e.log.Info("task completed by reconciliation", "task", t.ID, "tool", t.Tool)
}

// markUnknown sets the unsettled operations of a task that the recovery
// policy failed "outcome unknown" to unknown, for an operator.
func (e *Engine) markUnknown(ctx context.Context, ops []*task.Operation, why string) {
	l := e.store
	for _, op := range ops {
		now := e.now()
		if _, err := l.UpdateOperation(context.WithoutCancel(ctx), op.Key, func(o *task.Operation) error {
			if o.State == task.OpUnknown || o.State.Settled() {
				return nil
			}
			return o.Move(task.OpUnknown, why, now)
		}); err != nil {
			e.log.Error("marking an operation unknown", "operation", op.Key, "err", err)
		}
	}
}

// sweepLedger deletes the operations past the ledger's retention.
func (e *Engine) sweepLedger(ctx context.Context) {
	l := e.store
	if e.opts.LedgerRetention < 0 {
		return
	}
	n, err := l.DeleteOperations(ctx, e.now().Add(-e.opts.LedgerRetention))
	if err != nil {
		if !errors.Is(ctx.Err(), context.Canceled) {
			e.log.Error("sweeping the operation ledger", "err", err)
		}
		return
	}
	if n > 0 {
		e.log.Info("swept operations past the ledger's retention", "count", n)
	}
}

// RecordHandoffOperation records on the ledger the outcome an operator
// recorded by hand for the task t (a handoff): one operation, settled in
// state (confirmed or rejected) by by, with detail. Idempotent per task.
func (e *Engine) RecordHandoffOperation(ctx context.Context, t *task.Task, by string, state task.OpState, detail string) error {
	now := e.now()
	_, err := e.store.RecordOperation(ctx, &task.Operation{
		Key: "handoff-" + string(t.ID), TaskID: t.ID, Tool: t.Tool, Owner: t.Owner,
		Object: t.Tool, Effect: "outcome recorded by hand", State: state, Receipt: "operator:" + by,
		Detail: task.CapStatusMessage(detail), CreatedAt: now, UpdatedAt: now, ReconciledAt: now,
		Correlation: task.CloneCorrelation(t.Correlation),
	})
	return err
}
