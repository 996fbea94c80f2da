package mcptask

import (
	"context"
	"github.com/google/jsonschema-go/jsonschema"
	"time"

	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TaskSupport says whether calls of a tool may or must run as tasks.
type TaskSupport string

// The task support levels of a tool.
const (
	// Forbidden tools always answer synchronously (the default).
	Forbidden TaskSupport = "forbidden"
	// Optional tools run as a task when the request declares task support,
	// and synchronously otherwise.
	Optional TaskSupport = "optional"
	// Required tools only run as tasks; a request that does not declare
	// task support is rejected before the handler runs.
	Required TaskSupport = "required"
)

// ToolOptions sets how a tool runs as a task.
type ToolOptions struct {
	// Support is the tool's task support; empty means Forbidden.
	Support TaskSupport
	// Fallback is what the tool's task-augmented calls get when the
	// fleet's switches (drain, canary, rollback: see [Server.SetDrain],
	// [Server.SetCanary], [Server.Rollback]) do not serve them as tasks:
	// its verified path back. Empty means the drain switch's fallback,
	// else DrainRefuse.
	Fallback DrainFallback
	// Approval, if set, holds every new task of the tool until an
	// approver approves it: its work starts only once the approval is
	// durable (see [Approval]). It makes the tool's task support
	// Required, whatever Support says (a plain call, or a synchronous
	// fallback, would run it unapproved).
	Approval *Approval
	// Rerunnable declares the tool safe to run again: a task of it left
	// unfinished by a crash or shutdown is run again at the next start.
	// Otherwise such a task fails with an "outcome unknown" error; a tool
	// with side effects is never silently run twice.
	Rerunnable bool
	// Reattach declares that the handler can resume its work from the
	// external reference it recorded ([Task.SetExternalRef]) instead of
	// doing it again: a task of the tool left unfinished by a crash,
	// shutdown or takeover, with an external reference recorded, is run
	// again (as a Rerunnable one is), and the handler, finding the
	// reference with [Task.ExternalRef], re-attaches to the work it
	// started elsewhere (an upstream task, a job). A task without a
	// reference (the crash came before the other system answered) is
	// resolved as the tool's other options say.
	Reattach bool
	// Reconcile, if set, asks the tool's system of record about an
	// operation its handler recorded on the ledger ([Task.RecordOperation])
	// that was left neither confirmed nor rejected by a crash, a restart
	// or a takeover. It runs before the recovery policy, bounded by the
	// engine's ReconcileTimeout: task.OpConfirmed completes the task (its
	// result says it was reconciled, with the operation and receipt);
	// task.OpRejected (not applied) runs the tool again, even if it is
	// not Rerunnable (the re-run records a new attempt of the operation);
	// anything else, or an error, fails the task "outcome unknown" and
	// leaves the operation unknown for an operator; [ErrNoReconcile]
	// leaves the task to the recovery policy. Without it, or for a task
	// that recorded no operation, the recovery policy decides.
	Reconcile func(ctx context.Context, op task.Operation) (state task.OpState, detail string, err error)
	// Cancel, if set, tells the system doing a task's work to stop when
	// the task is cancelled (by its owner, or an operator), before the
	// task is marked cancelled: it gets the stored task (its call in
	// Request, its external reference in ExternalRef) and may run on any
	// server sharing the task store, not only the one running the
	// handler. nil means the system confirmed the cancel (or there was
	// nothing to stop): the task is cancelled and its handler's context
	// ends. An error refuses the cancel: the task goes on, its status
	// message and log say why, the audit trail records the refusal and
	// the canceller is answered with the reason (JSON-RPC error
	// wire.CodeCancelRefused). It runs within engine.CancelTimeout.
	// Without it a cancel is carried out at once, as the handler's
	// context ending.
	Cancel func(ctx context.Context, t *task.Task) error
	// Links, if set, gives links about a task of the tool (e.g. the page
	// of its job in the job system), computed from the stored task each
	// time tasks/get reads it, on any server sharing the store: shown on
	// both wires under wire.MetaLinks, by 'mcptask status' and on the
	// dashboard. Names are short; values must be http(s) URLs (others are
	// dropped). It must be quick: it runs in every tasks/get of the tool.
	Links func(t *task.Task) map[string]string
	// AwaitExternalRef, if positive, delays the answer to a call that
	// creates a task until the handler has recorded its external
	// reference, or returned, or this long has passed: the client is
	// acknowledged only once the work started elsewhere can be found
	// again after a crash. The task itself is created, and the handler
	// started, at once.
	AwaitExternalRef time.Duration
	// Synchronous, if set, reports whether this call must be answered
	// synchronously even though the client declared task support: e.g. a
	// multi round-trip round in which the handler gathers input before the
	// long work starts as a task on a later round.
	Synchronous func(req *mcp.CallToolRequest) bool
	// MaxConcurrent, if positive, caps how many tasks of the tool run at
	// once, across every server sharing the task store: a task beyond the
	// cap is created and acknowledged at once, shows working with a status
	// message such as "queued: 3 ahead", and starts in creation order when
	// a slot frees; the queue survives restarts. A task started by the
	// server that created it runs in the creating request's context (its
	// values, not its cancellation); one started by another server (or
	// after a restart) runs from its stored call, as a re-run does (its
	// handler's request carries the call's arguments and _meta, not the
	// values of the original HTTP request). A tool's AwaitExternalRef does
	// not delay the acknowledgement of a task that waits. Calls answered
	// synchronously do not count. Zero means no cap.
	MaxConcurrent int
	// Queue names the queue that MaxConcurrent caps, to share one cap
	// among several tools (e.g. every tool of one upstream server);
	// empty means a queue of the tool's own, named after it. Tools
	// sharing a queue must give it the same MaxConcurrent.
	Queue string
	// OutputSchema, if set, describes the intermediate results the
	// tool's handler emits with [Task.Emit]: Emit refuses a value that
	// does not conform, and the tool gets an event type of its own,
	// "<tool>.output" (wire/events.ToolOutputType), whose events carry
	// values of this schema (see docs/events.md).
	OutputSchema *jsonschema.Schema
	// PublishLog names the streams of the tool's task logs ("stdout",
	// "stderr", "job", "log", ...; "*" for all) whose lines are also
	// published as output events, for the hosts that follow a task's
	// events (events/poll, events/stream, webhooks).
	PublishLog []string
	// MaxTTL, if positive, caps the retention of the tool's tasks below
	// the server's maximum (e.g. a tool whose results hold sensitive
	// data): a client asking for more gets MaxTTL.
	MaxTTL time.Duration
}

// queue returns the name of the tool's queue, "" when it has no cap.
func (o ToolOptions) queue(tool string) string {
	switch {
	case o.MaxConcurrent <= 0:
		return ""
	case o.Queue != "":
		return o.Queue
	}
	return tool
}
