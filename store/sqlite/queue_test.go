package sqlite

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// TestQueueHeadPlan: StartQueued's turn-ordered head reads the queue's
// waiting tasks through tasks_queue_owner, by owner, and never scans the
// tasks table.
func TestQueueHeadPlan(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "tasks.db"))
	ctx := t.Context()
	for i := range 300 {
		tk := newTask(task.Owner(fmt.Sprintf("owner-%d", i%7)), now.Add(time.Duration(i)*time.Millisecond))
		tk.Queue, tk.Runner, tk.LeaseExpiresAt, tk.Attempts = "deploys", "engine-a", now.Add(time.Minute), 1
		if err := s.Create(ctx, tk, store.CreateOptions{MaxConcurrent: 2}); err != nil {
			t.Fatal(err)
		}
	}
	p := queryPlan(t, s, queueHeadSQL, "deploys", 5)
	if strings.Contains(p, "SCAN tasks") || strings.Contains(p, "SCAN t ") || strings.Contains(p, "SCAN u") || !strings.Contains(p, "tasks_queue_owner") {
		t.Errorf("the queue head's plan scans tasks or misses tasks_queue_owner:\n%s", p)
	}
}
