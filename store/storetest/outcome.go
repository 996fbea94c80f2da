package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// OutcomeBeforeMigration writes, into st (at the latest schema), the
// tasks that [OutcomeMigrated] checks once a backend's test has taken the
// schema back to before the tool-error and start columns and opened it
// again: a success, a tool error, one whose result only mentions
// "isError": true in its content, and a task waiting in a queue.
func OutcomeBeforeMigration(t *testing.T, st store.Store) []task.ID {
	t.Helper()
	ctx := context.Background()
	var ids []task.ID
	for _, result := range []string{
		`{"content":[{"type":"text","text":"ok"}]}`,
		`{"content":[{"type":"text","text":"2 tests failed"}],"isError":true}`,
		`{"content":[{"type":"text","text":"{\"isError\": true}"}],"isError":false}`,
	} {
		tk := newTask("alice", base)
		tk.StartedAt = base
		mustCreate(t, st, tk)
		if _, err := st.Update(ctx, tk.ID, func(cur *task.Task) error {
			return cur.Complete(json.RawMessage(result), base.Add(time.Minute))
		}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tk.ID)
	}
	running := queueTask("deploys", base, "engine-a")
	waiting := queueTask("deploys", base.Add(time.Second), "engine-a")
	mustCreateCapped(t, st, 1, running, waiting)
	return append(ids, waiting.ID)
}

// OutcomeMigrated checks the tasks of [OutcomeBeforeMigration] after the
// migration that adds the tool-error and start columns: the tool error is
// found by reading its result (the mention in the content is not one),
// the tasks that did not wait in a queue started at their creation, and
// the waiting task has not started.
func OutcomeMigrated(t *testing.T, st store.Store, ids []task.ID) {
	t.Helper()
	for i, wantErr := range []bool{false, true, false} {
		got := mustGet(t, st, ids[i])
		if got.ToolError != wantErr || !got.StartedAt.Equal(ms(base)) {
			t.Errorf("completed task %d after the migration: ToolError %v, StartedAt %v; want %v and %v",
				i, got.ToolError, got.StartedAt, wantErr, ms(base))
		}
	}
	if got := mustGet(t, st, ids[3]); !got.Queued || !got.StartedAt.IsZero() {
		t.Errorf("waiting task after the migration: Queued %v, StartedAt %v; want waiting, not started", got.Queued, got.StartedAt)
	}
	counts, err := st.CountByStatus(context.Background(), store.BrowseQuery{})
	if err != nil || counts.ToolErrors != 1 {
		t.Errorf("CountByStatus after the migration: %+v, %v; want 1 tool error", counts, err)
	}
}
