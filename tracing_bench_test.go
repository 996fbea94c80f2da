package mcptask_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// discardExporter drops the spans the batch span processor hands it, so
// that the benchmark measures what recording and exporting costs the
// server, not a collector.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// countSpans counts the spans that end, for the benchmark's spans/op.
type countSpans struct{ n atomic.Int64 }

func (c *countSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *countSpans) OnEnd(sdktrace.ReadOnlySpan)                     { c.n.Add(1) }
func (c *countSpans) Shutdown(context.Context) error                  { return nil }
func (c *countSpans) ForceFlush(context.Context) error                { return nil }

// BenchmarkTracing measures task creation (a tools/call with a
// traceparent becoming a task, over loopback HTTP, on SQLite) and
// tasks/get (with a traceparent too) with tracing off (no TracerProvider:
// the default) and on (an SDK provider recording every span, the store
// operations' included, batched to an exporter that drops them), in the
// same run. Compare the off and on ns/op of each; spans/op counts the
// spans that ended per operation (on a create, those of its task's run in
// the background too).
func BenchmarkTracing(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		var opts mcptask.Options
		count := &countSpans{}
		if mode == "on" {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}), sdktrace.WithSpanProcessor(count))
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
			start := count.n.Load()
			for b.Loop() {
				call(b)
			}
			b.ReportMetric(float64(count.n.Load()-start)/float64(b.N), "spans/op")
		})
		id := call(b)
		b.Run("get/"+mode, func(b *testing.B) {
			start := count.n.Load()
			for b.Loop() {
				meta := c.Meta()
				meta["traceparent"] = hostTraceparnt
				if err := c.Result(context.Background(), "tasks/get", map[string]any{"taskId": id, "_meta": meta}, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(count.n.Load()-start)/float64(b.N), "spans/op")
		})
		s.close()
	}
}
