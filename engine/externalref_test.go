package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
)

// TestAwaitExternalRef: with StartSpec.AwaitExternalRef, Start returns
// once the work recorded its external reference (durable by then), or,
// for work that records none, once the work returned or the bound passed.
func TestAwaitExternalRef(t *testing.T) {
	e, st := newEngine(t, engine.Options{})
	ctx := t.Context()
	release := make(chan struct{})
	defer close(release)

	// The reference is recorded after a pause of the work's: Start waits
	// for it.
	tk, err := e.Start(ctx, engine.StartSpec{Tool: "t", AwaitExternalRef: time.Minute}, func(ctx context.Context) (json.RawMessage, error) {
		time.Sleep(50 * time.Millisecond) // the other system answering
		if err := engine.FromContext(ctx).SetExternalRef(ctx, "job-7"); err != nil {
			return nil, err
		}
		<-release
		return json.RawMessage(`{}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ExternalRef != "job-7" {
		t.Errorf("ExternalRef when Start returned: %q, want job-7", got.ExternalRef)
	}

	// A provisional reference (recorded before the other system answered)
	// does not end the wait; the final one does.
	final := make(chan struct{})
	returned := make(chan *task.Task, 1)
	go func() {
		tk, err := e.Start(ctx, engine.StartSpec{Tool: "t", AwaitExternalRef: time.Minute}, func(ctx context.Context) (json.RawMessage, error) {
			h := engine.FromContext(ctx)
			if err := h.SetProvisionalExternalRef(ctx, "key-9"); err != nil {
				return nil, err
			}
			<-final
			if err := h.SetExternalRef(ctx, "key-9/job-9"); err != nil {
				return nil, err
			}
			<-release
			return json.RawMessage(`{}`), nil
		})
		if err != nil {
			t.Error(err)
		}
		returned <- tk
	}()
	waitFor(t, "the provisional reference", func() bool {
		ts, _ := st.ListActive(ctx)
		for _, x := range ts {
			if x.ExternalRef == "key-9" {
				return true
			}
		}
		return false
	})
	select {
	case <-returned:
		t.Error("Start returned on the provisional reference")
	default:
	}
	close(final)
	if tk := <-returned; tk != nil {
		if got, _ := st.Get(ctx, tk.ID); got == nil || got.ExternalRef != "key-9/job-9" {
			t.Errorf("ExternalRef when Start returned: %+v, want key-9/job-9", got)
		}
	}

	// Work that returns without a reference ends the wait.
	start := time.Now()
	if _, err := e.Start(ctx, engine.StartSpec{Tool: "t", AwaitExternalRef: time.Minute}, func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}); err != nil {
		t.Fatal(err)
	}
	// Work that never records one: the bound ends the wait.
	if _, err := e.Start(ctx, engine.StartSpec{Tool: "t", AwaitExternalRef: 20 * time.Millisecond}, func(ctx context.Context) (json.RawMessage, error) {
		<-release
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Start waited %v", d)
	}
}
