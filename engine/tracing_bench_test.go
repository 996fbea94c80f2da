package engine

import (
	"context"
	"testing"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// constStore answers every Get with the same task, at no cost: the
// benchmark measures the engine's wrapping of the store, not a database.
type constStore struct {
	store.Store
	t *task.Task
}

func (s constStore) Get(context.Context, task.ID) (*task.Task, error) { return s.t, nil }

// discardSpans drops the spans the batch span processor hands it.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// BenchmarkStoreSpan measures what the engine adds to one store Get (of a
// store that costs nothing): off (no TracerProvider: the store is called
// directly), on outside a trace (the wrapper, no span), and on in a
// sampled trace (a span recorded and batched to an exporter that drops
// it), in the same run.
func BenchmarkStoreSpan(b *testing.B) {
	st := constStore{t: &task.Task{ID: "t1"}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardSpans{}))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	parent, span := tp.Tracer("bench").Start(context.Background(), "caller")
	defer span.End()
	for _, c := range []struct {
		name string
		tp   bool
		ctx  context.Context
	}{{"off", false, parent}, {"on/untraced", true, context.Background()}, {"on/traced", true, parent}} {
		e, err := New(Options{Store: st})
		if err != nil {
			b.Fatal(err)
		}
		if c.tp {
			if err := e.SetHooks(Hooks{TracerProvider: tp}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.timed.Get(c.ctx, "t1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
