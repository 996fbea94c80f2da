package engine

import (
	"path/filepath"
	"testing"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestStoreUnwrappedWhenOff: without a TracerProvider and an Observer
// the engine calls its store directly; with a provider, through the
// traced store.
func TestStoreUnwrappedWhenOff(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "engine.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e, err := New(Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if e.timed != store.Store(st) || e.tracer != nil {
		t.Errorf("without tracing or an observer the store is wrapped: %T", e.timed)
	}
	if err := e.SetHooks(Hooks{}); err != nil {
		t.Fatal(err)
	}
	if e.timed != store.Store(st) {
		t.Errorf("hooks without a provider, the store is wrapped: %T", e.timed)
	}
	traced, err := New(Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := traced.SetHooks(Hooks{TracerProvider: sdktrace.NewTracerProvider()}); err != nil {
		t.Fatal(err)
	}
	if _, ok := traced.timed.(tracedStore); !ok || traced.tracer == nil || traced.tracer.system != "sqlite" {
		t.Errorf("with a provider the store is %T", traced.timed)
	}
}
