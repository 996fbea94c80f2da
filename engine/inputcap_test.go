package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
)

// TestInputRequestCap: a work that asks more questions at once than a task
// holds (task.MaxPendingInputRequests) gets the one too many refused at
// once, an error wrapping task.ErrTooManyInputRequests, and the stored
// task is unchanged by it; the questions it holds still wait for their
// answers, and one more may be asked once one is answered.
func TestInputRequestCap(t *testing.T) {
	e, _ := newEngine(t, engine.Options{})
	ctx := context.Background()
	extra := make(chan struct{})
	refused := make(chan error, 1)
	answers := make(chan error, task.MaxPendingInputRequests+1)
	tk, err := e.Start(ctx, engine.StartSpec{Tool: "t"}, func(ctx context.Context) (json.RawMessage, error) {
		h := engine.FromContext(ctx)
		for i := range task.MaxPendingInputRequests {
			go func() {
				_, err := h.RequestInput(ctx, json.RawMessage(fmt.Sprintf(`{"method":"elicitation/create","params":{"message":"q%d"}}`, i)))
				answers <- err
			}()
		}
		select {
		case <-extra:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		_, err := h.RequestInput(ctx, json.RawMessage(`{"method":"elicitation/create","params":{"message":"one too many"}}`))
		refused <- err
		for range task.MaxPendingInputRequests {
			if err := <-answers; err != nil {
				return nil, err
			}
		}
		return json.RawMessage(`{"content":[]}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	held := func() *task.Task {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			got, err := e.Get(ctx, "", tk.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.InputRequests) == task.MaxPendingInputRequests {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("the task holds %d input requests, want %d", len(got.InputRequests), task.MaxPendingInputRequests)
			}
			time.Sleep(time.Millisecond)
		}
	}
	before := held()
	close(extra)
	if err := <-refused; !errors.Is(err, task.ErrTooManyInputRequests) {
		t.Fatalf("the input request over the cap: %v, want ErrTooManyInputRequests", err)
	}
	after, err := e.Get(ctx, "", tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.InputSeq != before.InputSeq || !reflect.DeepEqual(after.InputRequests, before.InputRequests) {
		t.Fatalf("the refused request changed the task: seq %d -> %d, requests %d -> %d", before.InputSeq, after.InputSeq, len(before.InputRequests), len(after.InputRequests))
	}
	responses := map[string]json.RawMessage{}
	for k := range after.InputRequests {
		responses[k] = json.RawMessage(`{"action":"accept"}`)
	}
	if _, ignored, err := e.Respond(ctx, "", tk.ID, responses, nil); err != nil || len(ignored) != 0 {
		t.Fatalf("Respond: ignored %v, %v", ignored, err)
	}
	if final := waitTerminal(t, e, tk.ID); final.Status != task.Completed {
		t.Fatalf("final = %+v", final)
	}
}
