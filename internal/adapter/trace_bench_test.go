package adapter

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcptask/mcptask/task"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkTraceOverhead measures what tracing adds to one task, apart
// from the server: the create span and a run attempt's span around a work
// that does nothing, for a call whose _meta carries a traceparent. "off"
// is the default (no TracerProvider: the global no-op), "on" an SDK
// provider recording every span.
func BenchmarkTraceOverhead(b *testing.B) {
	meta := map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	work := func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{"content":[]}`), nil }
	t := &task.Task{ID: "t1"}
	for _, mode := range []string{"off", "on"} {
		cfg := Config{}
		if mode == "on" {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			cfg.TracerProvider = tp
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			// The recorder keeps every span: drop them between rounds.
			defer rec.Reset()
		}
		c := NewCore(cfg)
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx, span := c.startCreate(context.Background(), meta, "tool", "2026-07-28")
				w := c.traced(meta, "tool", firstAttempt, work)
				endCreate(span, t, nil)
				if _, err := w(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
