package client_test

import (
	"encoding/json"
	"testing"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/demo"
	"github.com/mcptask/mcptask/internal/testkit/pgtest"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/store/postgres"
	"github.com/mcptask/mcptask/wire/events"
)

// followSteps calls long_computation in 3 steps and follows its
// eventSource with Events until the task ends.
func followSteps(t *testing.T, c *client.Client) []events.OutputData {
	t.Helper()
	ctx := testCtx(t)
	call, err := c.CallTool(ctx, "long_computation", map[string]any{"n": 3000, "steps": 3, "step_delay_ms": 30})
	if err != nil {
		t.Fatal(err)
	}
	if call.Task == nil || call.EventSource == nil {
		t.Fatalf("no task or no eventSource: %+v", call)
	}
	if call.EventSource.Name != "long_computation.output" || call.EventSource.TaskID != call.Task.ID {
		t.Fatalf("eventSource %+v", call.EventSource)
	}
	var got []events.OutputData
	seen := map[string]bool{}
	err = c.Events(ctx, call.EventSource.Query(), func(e client.Event) error {
		if seen[e.ID] {
			return nil // at least once: dedupe on the ID
		}
		seen[e.ID] = true
		var d events.OutputData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return err
		}
		got = append(got, d)
		return nil
	})
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	st, err := c.Get(ctx, call.Task.ID)
	if err != nil || st.Status != "completed" {
		t.Fatalf("Events returned before the task ended: %+v %v", st, err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d outputs, want the 3 steps", len(got))
	}
	for i, d := range got {
		var step struct{ Step, Of int }
		if err := json.Unmarshal(d.Data, &step); err != nil || step.Step != i+1 || step.Of != 3 || d.TaskID != call.Task.ID {
			t.Fatalf("output %d = %+v", i, d)
		}
	}
	return got
}

func TestEventsFollowSource(t *testing.T) {
	s := newServer(t, serverOpts{})
	for _, wire := range []string{client.Wire20260728, client.Wire20251125} {
		t.Run(wire, func(t *testing.T) {
			polls := s.count(events.MethodPoll)
			followSteps(t, dial(t, s.URL, &client.Options{ProtocolVersion: wire}))
			if n := s.count(events.MethodPoll) - polls; n != 0 {
				t.Errorf("%d polls: the push stream was not followed", n)
			}
		})
	}
	t.Run("stdio", func(t *testing.T) {
		followSteps(t, connectStdio(t, nil))
	})
}

// TestEventsPollCursor reads status events by polling: "now" first, then
// what happened after it, the cursor moving on.
func TestEventsPollCursor(t *testing.T) {
	s := newServer(t, serverOpts{})
	c := dial(t, s.URL, nil)
	ctx := testCtx(t)
	now, err := c.PollEvents(ctx, client.EventQuery{Name: events.TypeStatus})
	if err != nil || now.Cursor == "" || len(now.Events) != 0 {
		t.Fatalf("from now: %+v %v", now, err)
	}
	call, err := c.CallTool(ctx, "long_computation", map[string]any{"n": 100, "steps": 1, "step_delay_ms": 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, call.Task.ID, nil); err != nil {
		t.Fatal(err)
	}
	var statuses []string
	q := client.EventQuery{Name: events.TypeStatus, Cursor: now.Cursor}
	waitFor(t, 10e9, "the completion event", func() bool {
		p, err := c.PollEvents(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Events {
			var d events.StatusData
			_ = json.Unmarshal(e.Data, &d)
			statuses = append(statuses, d.Status)
		}
		q.Cursor = p.Cursor
		return len(statuses) > 0 && statuses[len(statuses)-1] == "completed"
	})
	if statuses[0] != "working" {
		t.Fatalf("statuses %v", statuses)
	}
}

// TestEventsFollowSourcePostgres follows a task's eventSource through a
// server on PostgreSQL.
func TestEventsFollowSourcePostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	st, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: pgtest.Schema(t, dsn, "client_events_")})
	if err != nil {
		t.Fatal(err)
	}
	s := servertest.Start(t, servertest.Options{Store: st, Register: func(ts *mcptask.Server) (func(), error) {
		demo.Register(ts)
		return nil, nil
	}})
	for _, wire := range []string{client.Wire20260728, client.Wire20251125} {
		t.Run(wire, func(t *testing.T) {
			followSteps(t, dial(t, s.URL, &client.Options{ProtocolVersion: wire}))
		})
	}
}
