package adapter

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/tracing"
	"github.com/mcptask/mcptask/task"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerProvider returns the provider of the adapter's spans.
func (c *Core) TracerProvider() trace.TracerProvider { return c.tp }

// startCreate starts the span of a tools/call becoming a task, parented on
// the trace context of the call's _meta when it has one. Attributes are
// only built when the span records, so that tracing costs next to nothing
// when off.
func (c *Core) startCreate(ctx context.Context, meta map[string]any, tool, version string) (context.Context, trace.Span) {
	ctx, span := c.tracer.Start(tracing.FromMeta(ctx, meta), tracing.SpanCreate, trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrTool, tool), attribute.String(tracing.AttrWire, version))
	}
	return ctx, span
}

// endCreate ends the span of a create with its task or its error.
func endCreate(span trace.Span, t *task.Task, err error) {
	if span.IsRecording() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		} else if t != nil {
			span.SetAttributes(attribute.String(tracing.AttrTaskID, string(t.ID)))
		}
	}
	span.End()
}

// traced wraps a run attempt of a task's work in a span, parented on the
// trace context of the call's _meta (meta: the request's, or the stored
// request's on a re-run, so that a host's trace continues into a task
// re-run hours later); without one, on the span of ctx (the create's, for
// the first run). The span ends with the run's outcome.
//
// attempt gives the number of the attempt; it is only called when the span
// records.
func (c *Core) traced(meta map[string]any, tool string, attempt func(context.Context) int64, work engine.Work) engine.Work {
	return func(ctx context.Context) (json.RawMessage, error) {
		ctx, span := c.tracer.Start(tracing.FromMeta(ctx, meta), tracing.SpanRun)
		defer span.End()
		h := engine.FromContext(ctx)
		if span.IsRecording() {
			span.SetAttributes(attribute.String(tracing.AttrTool, tool), attribute.Int64(tracing.AttrAttempt, attempt(ctx)))
			if h != nil {
				span.SetAttributes(attribute.String(tracing.AttrTaskID, string(h.TaskID())))
			}
		}
		res, err := work(ctx)
		if span.IsRecording() {
			endRun(ctx, span, h, res, err)
		}
		return res, err
	}
}

// endRun records how a run attempt ended on its span.
func endRun(ctx context.Context, span trace.Span, h *engine.Handle, res json.RawMessage, err error) {
	switch {
	case h != nil && h.Cancelled():
		span.SetAttributes(attribute.String(tracing.AttrOutcome, "cancelled"))
	case ctx.Err() != nil:
		span.SetAttributes(attribute.String(tracing.AttrOutcome, "stopped"))
	case err == nil:
		span.SetAttributes(attribute.String(tracing.AttrOutcome, "completed"))
		var r struct {
			IsError bool `json:"isError"`
		}
		if json.Unmarshal(res, &r) == nil && r.IsError {
			span.SetAttributes(attribute.Bool(tracing.AttrToolError, true))
		}
		span.SetStatus(codes.Ok, "")
	default:
		span.SetAttributes(attribute.String(tracing.AttrOutcome, "failed"))
		msg := err.Error()
		var te *task.Error
		if errors.As(err, &te) {
			msg = te.Message
		}
		span.SetStatus(codes.Error, msg)
	}
}

// firstAttempt is the attempt number of a task's first run.
func firstAttempt(context.Context) int64 { return 1 }

// attemptOf returns the attempt number of a re-run of t: the task's
// Attempts as stored once the engine started the run (read back, since a
// recovery counts the attempt after it asked for the work).
func (c *Core) attemptOf(t *task.Task) func(context.Context) int64 {
	return func(ctx context.Context) int64 {
		if cur, err := c.eng.Get(ctx, t.Owner, t.ID); err == nil {
			return cur.Attempts
		}
		return t.Attempts
	}
}
