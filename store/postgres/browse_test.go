package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/storetest"
	"github.com/mcptask/mcptask/task"
)

// loadTasks inserts tasks with one COPY, as Create would store them
// (without their histories), then vacuums and analyzes the table, as
// autovacuum would have by then.
func loadTasks(tb testing.TB, s *Store, tasks []*task.Task) {
	tb.Helper()
	ctx := context.Background()
	if err := s.LoadTasks(ctx, tasks); err != nil {
		tb.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, "VACUUM ANALYZE "+s.quoted+".tasks"); err != nil {
		tb.Fatal(err)
	}
}

// TestBrowsePlans checks that, on 100,000 tasks, the first pages of
// Browse read an index in the order of the listing (no sort of the
// tasks), and the counts of a tool its index only.
func TestBrowsePlans(t *testing.T) {
	s := openTest(t, newSchema(t))
	loadTasks(t, s, storetest.BrowseTasks(100_000))
	plan := func(q store.BrowseQuery, count bool) string {
		t.Helper()
		where, args, err := s.browseWhere(q, !count)
		if err != nil {
			t.Fatal(err)
		}
		query := `SELECT ` + taskColumns + ` FROM ` + s.quoted + `.tasks` + where + ` ORDER BY created_at_ms DESC, id DESC LIMIT 51`
		if count {
			query = `SELECT status, count(*) FROM ` + s.quoted + `.tasks` + where + ` GROUP BY status`
		}
		rows, err := s.pool.Query(t.Context(), "EXPLAIN "+query, args...)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	_, c, err := s.Browse(t.Context(), store.BrowseQuery{Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q     store.BrowseQuery
		count bool
		index string
	}{
		{store.BrowseQuery{}, false, "tasks_created"},
		{store.BrowseQuery{Cursor: c}, false, "tasks_created"},
		{store.BrowseQuery{Tool: "tool-1"}, false, "tasks_tool_created"},
		{store.BrowseQuery{Owner: "user-1"}, false, "tasks_owner_created_status"},
		// The counts of every task read the whole table or an index:
		// the planner's choice.
		{store.BrowseQuery{}, true, "status"},
		{store.BrowseQuery{Tool: "tool-1"}, true, "Index Only Scan using tasks_tool_created"},
	} {
		p := plan(c.q, c.count)
		if !strings.Contains(p, c.index) || (!c.count && strings.Contains(p, "Sort")) {
			t.Errorf("plan of %+v (count %v):\n%s\nwant %s, without sorting the tasks", c.q, c.count, p, c.index)
		}
	}
	// A rare status: a range of tasks_status_created, which the planner
	// may read in order or sort (a few hundred tasks), but no scan of the
	// table.
	if p := plan(store.BrowseQuery{Statuses: []task.Status{task.InputRequired}}, false); !strings.Contains(p, "tasks_status_created") || strings.Contains(p, "Seq Scan") {
		t.Errorf("plan of the input_required tasks:\n%s\nwant a use of tasks_status_created", p)
	}
}

// BenchmarkBrowse100k measures Browse and CountByStatus on 100,000 tasks
// (see storetest.BenchBrowse100k).
func BenchmarkBrowse100k(b *testing.B) {
	s := benchStore(b)
	storetest.BenchBrowse100k(b, s, func(tasks []*task.Task) { loadTasks(b, s, tasks) })
}
