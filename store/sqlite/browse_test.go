package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/storetest"
	"github.com/mcptask/mcptask/task"
)

// loadTasks inserts tasks in one write transaction, as Create would
// store them (without their histories).
func loadTasks(tb testing.TB, s *Store, tasks []*task.Task) {
	tb.Helper()
	if err := s.LoadTasks(context.Background(), tasks); err != nil {
		tb.Fatal(err)
	}
}

// TestBrowsePlans checks that the queries of Browse and CountByStatus
// read an index in the order of the listing (no sort of the tasks) and
// that the counts under a tool, or none, read an index only.
func TestBrowsePlans(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "tasks.db"))
	loadTasks(t, s, storetest.BrowseTasks(2000))
	plan := func(q store.BrowseQuery, count bool) string {
		t.Helper()
		where, args, err := s.browseWhere(q, !count)
		if err != nil {
			t.Fatal(err)
		}
		query := `SELECT ` + taskColumns + ` FROM tasks` + where + ` ORDER BY created_at_ms DESC, id DESC LIMIT ?`
		if count {
			if where == "" {
				where = " WHERE " + everyStatus
			}
			query = `SELECT status, count(*) FROM tasks` + where + ` GROUP BY status`
		} else {
			args = append(args, 51)
		}
		return queryPlan(t, s, query, args...)
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
		{store.BrowseQuery{Tool: "tool-1", Cursor: c}, false, "tasks_tool_created"},
		{store.BrowseQuery{Owner: "user-1"}, false, "tasks_owner_created"},
		{store.BrowseQuery{Statuses: []task.Status{task.Working}}, false, "tasks_status_created"},
		{store.BrowseQuery{Statuses: []task.Status{task.Failed}, Cursor: c}, false, "tasks_status_created"},
		{store.BrowseQuery{Statuses: []task.Status{task.Working, task.InputRequired}}, false, "tasks_active"},
		{store.BrowseQuery{Statuses: []task.Status{task.Failed, task.Cancelled}}, false, "tasks_finished"},
		{store.BrowseQuery{}, true, "COVERING INDEX tasks_status_created"},
		{store.BrowseQuery{CreatedAfter: now}, true, "COVERING INDEX tasks_created"},
		{store.BrowseQuery{Tool: "tool-1"}, true, "COVERING INDEX tasks_tool_created"},
		{store.BrowseQuery{Owner: "user-1"}, true, "tasks_owner_created"},
	} {
		p := plan(c.q, c.count)
		if !strings.Contains(p, c.index) || (!c.count && strings.Contains(p, "TEMP B-TREE")) {
			t.Errorf("plan of %+v (count %v) = %q; want %s, without sorting the tasks", c.q, c.count, p, c.index)
		}
	}
}

// BenchmarkBrowse100k measures Browse and CountByStatus on 100,000 tasks
// (see storetest.BenchBrowse100k).
func BenchmarkBrowse100k(b *testing.B) {
	s := benchStore(b)
	storetest.BenchBrowse100k(b, s, func(tasks []*task.Task) { loadTasks(b, s, tasks) })
}

// TestToolErrorPlans: the listing of the tool errors and their count
// (under a tool, an owner, or none) read the partial index
// tasks_tool_errors, the count without touching the table, and the
// listing in its order (no sort of the tasks).
func TestToolErrorPlans(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "tasks.db"))
	loadTasks(t, s, storetest.BrowseTasks(2000))
	explain := func(query string, args ...any) string { t.Helper(); return queryPlan(t, s, query, args...) }
	for _, q := range []store.BrowseQuery{{}, {Tool: "tool-1"}, {Owner: "user-1"}} {
		where, args, err := s.browseWhere(q, false)
		if err != nil {
			t.Fatal(err)
		}
		if where == "" {
			where = " WHERE " + toolErrorCond
		} else {
			where += " AND " + toolErrorCond
		}
		if p := explain(`SELECT count(*) FROM tasks INDEXED BY tasks_tool_errors`+where, args...); !strings.Contains(p, "COVERING INDEX tasks_tool_errors") {
			t.Errorf("count of the tool errors under %+v: plan %q; want the covering index tasks_tool_errors", q, p)
		}
		bq := q
		bq.Outcomes = []task.Outcome{task.OutcomeToolError}
		where, args, err = s.browseWhere(bq, true)
		if err != nil {
			t.Fatal(err)
		}
		p := explain(`SELECT `+taskColumns+` FROM tasks`+browseIndex(bq)+where+` ORDER BY created_at_ms DESC, id DESC LIMIT ?`, append(args, 51)...)
		if !strings.Contains(p, "tasks_tool_errors") || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("listing of the tool errors under %+v: plan %q; want tasks_tool_errors, without sorting", q, p)
		}
	}
}

// queryPlan returns SQLite's plan of query with args, its steps joined by
// "; ".
func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.rdb.Query("EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "; ")
}
