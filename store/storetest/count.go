package storetest

import (
	"cmp"
	"slices"
	"testing"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runCount checks [store.Counter]: unfinished tasks counted by tool,
// status and queued, finished ones left out.
func (s *suite) runCount(t *testing.T) {
	st := s.store(t)
	c := st
	got, err := c.CountActive(t.Context())
	if err != nil || len(got) != 0 {
		t.Fatalf("CountActive of an empty store = %v, %v; want none", got, err)
	}
	mk := func(tool string, status task.Status, queue string) *task.Task {
		tk := newTask("alice", base)
		tk.Tool, tk.Status = tool, status
		if queue != "" {
			tk = queueTask(queue, base, "")
			tk.Tool = tool
		}
		return tk
	}
	mustCreate(t, st,
		mk("a", task.Working, ""), mk("a", task.Working, ""), mk("a", task.InputRequired, ""),
		mk("b", task.Working, ""), mk("a", task.Completed, ""), mk("b", task.Failed, ""), mk("b", task.Cancelled, ""))
	// Two tasks of queue q, cap 1: the second waits.
	for range 2 {
		if err := st.Create(t.Context(), mk("q", task.Working, "q"), store.CreateOptions{MaxConcurrent: 1}); err != nil {
			t.Fatalf("Create queued: %v", err)
		}
	}
	got, err = c.CountActive(t.Context())
	if err != nil {
		t.Fatalf("CountActive: %v", err)
	}
	slices.SortFunc(got, func(x, y store.ActiveCount) int {
		return cmp.Or(cmp.Compare(x.Tool, y.Tool), cmp.Compare(x.Status, y.Status), cmp.Compare(btoi(x.Queued), btoi(y.Queued)))
	})
	want := []store.ActiveCount{
		{Tool: "a", Status: task.InputRequired, N: 1},
		{Tool: "a", Status: task.Working, N: 2},
		{Tool: "b", Status: task.Working, N: 1},
	}
	want = append(want, store.ActiveCount{Tool: "q", Status: task.Working, N: 1},
		store.ActiveCount{Tool: "q", Status: task.Working, Queued: true, N: 1})

	if !slices.Equal(got, want) {
		t.Fatalf("CountActive = %+v; want %+v", got, want)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
