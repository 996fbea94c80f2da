package mcptask

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcptask/mcptask/wire"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/tracing"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Task is the handle a tool handler gets when its call runs as a task.
type Task struct {
	h *engine.Handle
}

// FromContext returns the task of a tool handler running as a task, or nil
// when the call runs synchronously.
func FromContext(ctx context.Context) *Task {
	h := engine.FromContext(ctx)
	if h == nil {
		return nil
	}
	return &Task{h: h}
}

// Emit publishes v, marshalled as JSON, as an intermediate result of the
// task: an output event its requester reads with events/poll,
// events/stream or a webhook subscription (the task's eventSource), in
// order with the task's other events. Like a log line it is written with
// the lines logged around it (one write for both), at the latest before
// the task's outcome is recorded or it asks for input ([Task.FlushLog]
// writes it at once), and never dropped. A tool with an OutputSchema has
// v checked against it first; a value above 192 KiB is refused.
func (t *Task) Emit(ctx context.Context, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("mcptask: Emit: %w", err)
	}
	return t.h.Emit(ctx, data)
}

// ID returns the task's ID.
func (t *Task) ID() string { return string(t.h.TaskID()) }

// SetStatusMessage sets the task's status message, shown to clients that
// poll it (e.g. progress: "processed 40 of 100 files").
func (t *Task) SetStatusMessage(ctx context.Context, msg string) error {
	return t.h.SetStatusMessage(ctx, msg)
}

// SetExternalRef records durably what the handler needs to find its work
// again in another system (an upstream task ID, a job ID), before it
// returns: after a crash, a tool's recovery (ToolOptions.Reattach) gets it
// back and may re-attach to that work instead of failing the task
// "outcome unknown". Record it as soon as the other system has answered.
func (t *Task) SetExternalRef(ctx context.Context, ref string) error {
	return t.h.SetExternalRef(ctx, ref)
}

// SetProvisionalExternalRef records durably what the handler is about to
// start elsewhere, before the other system has answered (e.g. the
// idempotency key of a start request, before it is sent): after a crash,
// a Reattach tool's re-run finds it and knows a start may have been sent.
// A create waiting for the reference (ToolOptions.AwaitExternalRef) goes
// on waiting for SetExternalRef.
func (t *Task) SetProvisionalExternalRef(ctx context.Context, ref string) error {
	return t.h.SetProvisionalExternalRef(ctx, ref)
}

// ExternalRef returns the external reference recorded for the task (by
// this run or an earlier one), "" if none.
func (t *Task) ExternalRef(ctx context.Context) (string, error) {
	return t.h.ExternalRef(ctx)
}

// Cancelled reports whether the handler's context was cancelled because
// the task was cancelled (by its requester), as opposed to a shutdown of
// the server or a takeover by another instance: a handler that started
// work elsewhere (an upstream task, a job) cancels that work only then,
// and leaves it running otherwise for the next run to re-attach to (see
// ToolOptions.Reattach).
func (t *Task) Cancelled() bool { return t.h.Cancelled() }

// Elicit asks the client for input and waits for the answer. The task shows
// input_required with the request until the client answers.
func (t *Task) Elicit(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if params != nil && params.Mode == "" {
		p := *params
		p.Mode = "form"
		if p.URL != "" {
			p.Mode = "url"
		}
		params = &p
	}
	var res mcp.ElicitResult
	if err := t.request(ctx, wire.MethodElicit, params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// CreateMessage asks the client to sample its language model and waits for
// the answer.
func (t *Task) CreateMessage(ctx context.Context, params *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	var res mcp.CreateMessageResult
	if err := t.request(ctx, wire.MethodSample, params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func (t *Task) request(ctx context.Context, method string, params, result any) error {
	req, err := json.Marshal(struct {
		Method string `json:"method"`
		Params any    `json:"params"`
	}{method, params})
	if err != nil {
		return fmt.Errorf("mcptask: encoding %s request: %w", method, err)
	}
	answer, err := t.awaitInput(ctx, method, req)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(answer, result); err != nil {
		return fmt.Errorf("mcptask: the client's answer to %s is not valid: %w", method, err)
	}
	return nil
}

// Operation is what a handler says of a domain operation it is about to do
// downstream (a deployment, a payment, a publish), for the ledger: see
// [Task.RecordOperation].
type Operation struct {
	// Key identifies the operation, stable across re-runs. Empty means a
	// key derived from the task's idempotency key (or its ID), its tool,
	// Object and Effect.
	Key string
	// Object and ObjectVersion name what the effect acts on, if known
	// (e.g. "service/api", "v42").
	Object, ObjectVersion string
	// Effect is a short description of the effect, never a payload (e.g.
	// "deploy api to production").
	Effect string
}

// Op is an operation recorded on the ledger: record the downstream
// system's receipt (Submitted), its confirmation (Confirmed) or refusal
// (Rejected) on it. Its State tells a re-run what an earlier run got
// (task.OpConfirmed: done already, do not do it again).
type Op = engine.Op

// RecordOperation records durably, before it returns, a domain operation
// the handler is about to do, in state intended: call it BEFORE the side
// effect starts. The operation's actor and tenant are the task's owner's.
// After a crash, the tool's ToolOptions.Reconcile is asked about an
// operation left unsettled before the recovery policy runs; mcptask
// shows the task's latest operation apart from its status on tasks/get.
func (t *Task) RecordOperation(ctx context.Context, op Operation) (*Op, error) {
	return t.h.RecordOperation(ctx, engine.OperationSpec{Key: op.Key, Object: op.Object, ObjectVersion: op.ObjectVersion, Effect: op.Effect})
}

// ErrNoReconcile is what a ToolOptions.Reconcile returns to leave a task
// to the recovery policy, as if it had recorded no operation: e.g. a
// Reattach tool whose re-run follows the work it started to its end, and
// records its outcome on the operation then.
var ErrNoReconcile = engine.ErrNoReconcile

// Log appends line to the task's log (stream "log"), which the task's
// owner reads while the task runs and after (resources/read of the
// task's log resource, linked from tasks/get under io.mcptask/log, and
// `mcptask logs`). A line with newlines is several lines. Log never
// blocks on the store: lines are written together, within
// engine.Options.LogFlushInterval, and before the task's outcome is
// recorded; the log is capped (engine.Options.LogLimits), its oldest
// lines dropped first. It does nothing when the server's store keeps no
// task logs.
func (t *Task) Log(line string) { t.h.Log(LogStreamLog, line) }

// Logf is Log with fmt.Sprintf's formatting.
func (t *Task) Logf(format string, args ...any) { t.h.Log(LogStreamLog, fmt.Sprintf(format, args...)) }

// FlushLog writes the lines logged that still wait in memory, before it
// returns: e.g. before the work records, with SetExternalRef, how far it
// read a source of lines, so that a crash cannot lose lines it will not
// read again. (Lines are otherwise written within a short interval, and
// when the handler returns.)
func (t *Task) FlushLog() { t.h.FlushLog() }

// LogStream is Log with the name of where the line came from (e.g.
// LogStreamStdout for a program's standard output).
func (t *Task) LogStream(stream, line string) { t.h.Log(stream, line) }

// LogBytes appends one line (without its line ending, and without
// newlines) to the task's log under stream, as LogStream does, without
// allocating for it: line may be reused once LogBytes returns (e.g. a
// program's output read line by line).
func (t *Task) LogBytes(stream string, line []byte) { t.h.LogLine(stream, line) }

// The stream names of the task log's lines that mcptask writes.
const (
	// LogStreamLog names the lines a handler logs itself (Task.Log).
	LogStreamLog = "log"
	// LogStreamStdout names a program's standard output.
	LogStreamStdout = "stdout"
	// LogStreamStderr names a program's standard error.
	LogStreamStderr = "stderr"
)

// awaitInput asks the client and waits for its answer, in an
// mcptask.input span, a child of the run attempt's span (made by the
// provider of the span in ctx, so none when tracing is off).
func (t *Task) awaitInput(ctx context.Context, method string, req json.RawMessage) (json.RawMessage, error) {
	ctx, span := trace.SpanFromContext(ctx).TracerProvider().Tracer(tracing.TracerName).Start(ctx, tracing.SpanInput)
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrInputMethod, method), attribute.String(tracing.AttrTaskID, t.ID()))
	}
	answer, err := t.h.RequestInput(ctx, req)
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return answer, err
}

// WorkCancelled returns the error a tool handler returns to end its task
// cancelled rather than failed: the system doing the work cancelled it
// (e.g. a job cancelled in its job system, or on the task's cancel; see
// ToolOptions.Cancel). msg is the task's status message; a call answered
// without a task gets it as an error.
func WorkCancelled(msg string) error { return &engine.CancelledError{Message: msg} }
