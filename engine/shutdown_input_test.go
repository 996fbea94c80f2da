package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
)

// TestShutdownDoesNotWaitForInput: work waiting for the client's input
// cannot finish within a shutdown grace, so Shutdown stops it at once
// (it waited the whole grace, then failed every such task "outcome
// unknown"): a re-runnable task is handed back, any other fails with a
// message that says the shutdown, not the tool, ended it.
func TestShutdownDoesNotWaitForInput(t *testing.T) {
	for _, rerunnable := range []bool{false, true} {
		var recover func(context.Context, *task.Task) engine.Work
		if rerunnable {
			recover = func(context.Context, *task.Task) engine.Work {
				return func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }
			}
		}
		e, st := newEngine(t, engine.Options{Recover: recover})
		ctx := context.Background()
		asked := make(chan struct{})
		tk, err := e.Start(ctx, engine.StartSpec{Tool: "deploy"}, func(ctx context.Context) (json.RawMessage, error) {
			h := engine.FromContext(ctx)
			go func() {
				for {
					if cur, err := st.Get(ctx, h.TaskID()); err == nil && cur.Status == task.InputRequired {
						close(asked)
						return
					}
					select {
					case <-ctx.Done():
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			}()
			return h.RequestInput(ctx, json.RawMessage(`{"method":"elicitation/create","params":{"message":"Deploy?"}}`))
		})
		if err != nil {
			t.Fatal(err)
		}
		<-asked
		done := make(chan error, 1)
		go func() { done <- e.Shutdown(context.Background()) }() // no deadline: only the waiting work could hold it
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("rerunnable=%v: Shutdown (without a deadline) waited for a task that waits for input", rerunnable)
		}
		got, err := st.Get(ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rerunnable {
			if got.Status.Terminal() || got.Runner != "" {
				t.Errorf("re-runnable task after shutdown: %s, runner %q; want it handed back", got.Status, got.Runner)
			}
			continue
		}
		if got.Status != task.Failed || !strings.Contains(got.StatusMessage, "shut down") || !strings.Contains(got.StatusMessage, "not the tool") {
			t.Errorf("task after shutdown: %s %q; want failed, saying the shutdown ended it", got.Status, got.StatusMessage)
		}
	}
}
