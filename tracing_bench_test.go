package mcptask_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/wiretest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// discardExporter drops the spans the batch span processor hands it, so
// that the benchmark measures what recording and exporting costs the
// server, not a collector.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkTracing measures task creation (a tools/call with a
// traceparent becoming a task, over loopback HTTP, on SQLite) and
// tasks/get with tracing off (no TracerProvider: the default) and on (an
// SDK provider recording every span, batched to an exporter that drops
// them), in the same run. Compare the off and on ns/op of each.
func BenchmarkTracing(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		var opts mcptask.Options
		if mode == "on" {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			opts.TracerProvider = tp
		}
		s := startServerOpts(b, filepath.Join(b.TempDir(), "tasks.db"), opts, func(ts *mcptask.Server) { registerTestTools(ts, &gates{}) })
		c := &wiretest.Client{URL: s.url, Tasks: true}
		call := func(b *testing.B) string {
			meta := c.Meta()
			meta["traceparent"] = hostTraceparnt
			var h wiretest.Task
			if err := c.Result(context.Background(), "tools/call", map[string]any{"name": "work", "arguments": map[string]any{"label": "x"}, "_meta": meta}, &h); err != nil || h.TaskID == "" {
				b.Fatalf("create: %+v %v", h, err)
			}
			return h.TaskID
		}
		b.Run("create/"+mode, func(b *testing.B) {
			for b.Loop() {
				call(b)
			}
		})
		id := call(b)
		b.Run("get/"+mode, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.Get(context.Background(), id); err != nil {
					b.Fatal(err)
				}
			}
		})
		s.close()
	}
}
