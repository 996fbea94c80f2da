package engine

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcptask/mcptask/task"
	"go.opentelemetry.io/otel/trace"
)

// Hooks are the engine's calls into the layer that owns its tools (package
// mcptask installs them when it takes the engine, in mcptask.New): how to
// run again, or start late, the work of a stored task, what the system of
// record says of an unsettled operation, which queues are held, and where
// the store spans go. They have one way in, [Engine.SetHooks], and none
// in [Options]: the owner of the tools is handed an engine built already,
// and an engine whose hooks could come from both would have to say which
// wins. A nil field means the engine goes without (see each).
type Hooks struct {
	// Recover decides the fate of a task found non-terminal at start-up
	// (left behind by a process that died). It returns the work to re-run
	// the task, or nil to fail it with an "outcome unknown" error. A nil
	// Recover fails every such task: a tool with side effects is never
	// silently run twice.
	Recover func(ctx context.Context, t *task.Task) Work
	// WorkOf returns the work of a stored task whose work starts after
	// the request that created it has ended: a task that waited in its
	// concurrency queue (see [Engine.SetQueue]), started by whichever
	// engine sharing the store finds a free slot. It returns nil when it
	// cannot (the task then fails, saying so).
	WorkOf func(ctx context.Context, t *task.Task) Work
	// Hold, if set, reports whether the waiting tasks of a queue must not
	// start on this engine now (e.g. the operator drained its tools):
	// they stay waiting, in order, until Hold says otherwise (call
	// [Engine.KickQueues] then) or another engine starts them.
	Hold func(queue string) bool
	// Reconcile, if set, asks the system of record about an operation a
	// task found unfinished (after a crash, a restart or a takeover)
	// recorded on the ledger and left unsettled, before the recovery
	// policy: confirmed completes the task (its result says it was
	// reconciled), rejected runs it again (by Recover, or WorkOf for a
	// tool not declared re-runnable), anything else fails it "outcome
	// unknown" and leaves the operation unknown for an operator. Tasks
	// without unsettled operations keep the recovery policy.
	Reconcile ReconcileFunc
	// Cancel, if set, is asked before a cancel (its owner's or an
	// operator's) marks an unfinished task cancelled: it tells the
	// system doing the task's work to stop (e.g. a job API's cancel
	// request), from the stored task alone, so that any engine sharing
	// the store may ask it. A nil error (the system confirmed the cancel,
	// or the tool has nothing to tell) lets the cancel proceed; any other
	// error refuses it: the task is not cancelled and goes on, its
	// status message and log say why, the audit trail records the
	// refusal, and the canceller gets a *[CancelRefusedError]. It runs
	// within [CancelTimeout].
	Cancel func(ctx context.Context, t *task.Task) error
	// Spawn, if set, starts a child of the task parent, as spec says
	// (see [Handle.Spawn]): the call of spec.Tool made a task with
	// StartSpec.Parent set, under the owner's limits, or the child a
	// former run of parent started for spec.Step. A nil Spawn makes
	// Handle.Spawn fail.
	Spawn func(ctx context.Context, parent *task.Task, spec SpawnSpec) (*task.Task, error)
	// PublishLog, if set, names the streams of a tool's task logs whose
	// lines are published as output events too (see store.Events), in
	// the transaction that writes them; "*" names every stream.
	PublishLog func(tool string) []string
	// CheckEmit, if set, checks a value a task of tool emits
	// ([Handle.Emit]): an error refuses it.
	CheckEmit func(tool string, data json.RawMessage) error
	// TracerProvider, if set, receives an OpenTelemetry span for the
	// engine's store operations (mcptask.store.<op>, see
	// docs/tracing.md): those made for a request or a task's work when
	// the caller's context is in a trace, as children of the caller's
	// span, and the background ones (claim, heartbeat, delete_expired,
	// start_queued) as roots. Nil makes none, at no cost: the store is
	// then called directly. mcptask.New sets it from the server's
	// Options.TracerProvider.
	TracerProvider trace.TracerProvider
}

// SetHooks installs the engine's hooks. It may be called once, and
// before [Engine.Run], whose start-up recovery already needs them: a
// second call, or one after Run, is an error and changes nothing, so that
// an engine's recovery policy is set once and never silently replaced
// (e.g. by a second server on the same engine).
func (e *Engine) SetHooks(h Hooks) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.started:
		return errors.New("engine: SetHooks after Run: the recovery policy must be set before the engine starts")
	case e.hooked:
		return errors.New("engine: the engine already has its hooks and recovery policy (another server on this engine?)")
	}
	e.hooks, e.hooked = h, true
	e.wrapStore()
	return nil
}
