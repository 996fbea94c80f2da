// Package tracing holds what mcptask's OpenTelemetry spans share: the
// instrumentation scope, the span and attribute names, and the W3C trace
// context carried in a request's _meta (traceparent, tracestate).
//
// Nothing here configures an exporter: the spans go to the TracerProvider
// the program gives mcptask (mcptask.Options.TracerProvider), by default
// otel.GetTracerProvider(), which records nothing unless the program
// installed one.
package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of every mcptask span.
const TracerName = "github.com/mcptask/mcptask"

// The names of mcptask's spans.
const (
	// SpanCreate covers a tools/call becoming a task.
	SpanCreate = "mcptask.create"
	// SpanRun covers one run attempt of a task's work.
	SpanRun = "mcptask.run"
	// SpanInput covers a task's wait for the client's answer to an
	// elicitation or a sampling request.
	SpanInput = "mcptask.input"
	// SpanUpstream covers a gateway tool's call of its upstream server.
	SpanUpstream = "mcptask.upstream.call"
	// SpanJob covers one HTTP request of an HTTP job tool to its job API.
	SpanJob = "mcptask.job.http"
	// SpanStore prefixes the spans of the engine's store operations:
	// mcptask.store.create, .get, .update, .list, .claim, .heartbeat,
	// .delete_expired, .start_queued, .delete and .view.
	SpanStore = "mcptask.store."
)

// The attribute keys of mcptask's spans.
const (
	// AttrTool is the task's tool.
	AttrTool = "mcptask.tool"
	// AttrWire is the task wire of the call that created the task.
	AttrWire = "mcptask.wire"
	// AttrTaskID is the task's ID.
	AttrTaskID = "mcptask.task.id"
	// AttrAttempt is the number of a run attempt: 1 for the first run,
	// counting re-runs after a restart or a takeover.
	AttrAttempt = "mcptask.attempt"
	// AttrOutcome is how a run attempt ended: completed, failed,
	// cancelled (by the client), or stopped (the server shut down or
	// lost the task; a Rerunnable task runs again).
	AttrOutcome = "mcptask.outcome"
	// AttrToolError marks a completed run whose tool result is an error
	// result (isError).
	AttrToolError = "mcptask.tool_error"
	// AttrInputMethod is the method of an input request
	// (elicitation/create, sampling/createMessage).
	AttrInputMethod = "mcptask.input.method"
	// AttrUpstream is the name of a gateway's upstream server.
	AttrUpstream = "mcptask.upstream"
	// AttrJobStep says what an HTTP job request does ("starting the
	// job", "reading the job's status", "reading the job's result",
	// "cancelling the job").
	AttrJobStep = "mcptask.job.step"
	// AttrDBSystem is the database system of a store span ("sqlite",
	// "postgresql"), as OpenTelemetry's semantic conventions name it.
	AttrDBSystem = "db.system.name"
	// AttrDBOperation is the store operation of a store span ("get",
	// "update", ...), as OpenTelemetry's semantic conventions name it.
	AttrDBOperation = "db.operation.name"
)

// The _meta keys of the W3C trace context.
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// Propagator reads and writes the W3C trace context.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// MetaCarrier adapts a request's _meta to a propagation.TextMapCarrier.
// Get ignores values that are not strings.
type MetaCarrier map[string]any

// Get returns the string value of key, "" if none.
func (m MetaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

// Set sets key to value.
func (m MetaCarrier) Set(key, value string) { m[key] = value }

// Keys returns the trace context keys present.
func (m MetaCarrier) Keys() []string {
	var keys []string
	for _, k := range []string{MetaTraceparent, MetaTracestate} {
		if _, ok := m[k]; ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// FromMeta returns ctx carrying the remote span context of meta's
// traceparent (and tracestate) as the parent of the spans started from
// it. It returns ctx itself when meta has no traceparent or an invalid
// one.
func FromMeta(ctx context.Context, meta map[string]any) context.Context {
	if _, ok := meta[MetaTraceparent]; !ok {
		return ctx
	}
	out := Propagator.Extract(ctx, MetaCarrier(meta))
	if !trace.SpanContextFromContext(out).IsRemote() {
		return ctx
	}
	return out
}

// ToMeta writes the span context of ctx into meta (traceparent, and
// tracestate when it has one), replacing any there. It writes nothing when
// ctx has no valid span context; meta must not be nil.
func ToMeta(ctx context.Context, meta map[string]any) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	Propagator.Inject(ctx, MetaCarrier(meta))
}

// Parent returns ctx when it carries a valid span context, else ctx with
// the trace context of meta (see [FromMeta]).
func Parent(ctx context.Context, meta map[string]any) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return FromMeta(ctx, meta)
}
