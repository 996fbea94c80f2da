package rowcodec

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/cursor"
	"github.com/mcptask/mcptask/task"
)

// BrowseFilter returns the conditions that select what q asks of the
// tasks table but its statuses (each backend states those so that its
// planner meets its partial indexes), with ? placeholders in the order of
// args. With paging set, the position of q's cursor, signed by sig, is
// included; a cursor sig did not issue gives [store.ErrBadCursor].
func BrowseFilter(q store.BrowseQuery, sig cursor.Signer, paging bool) (conds []string, args []any, err error) {
	if q.Tool != "" {
		conds, args = append(conds, "tool = ?"), append(args, q.Tool)
	}
	if q.Waiting != "" {
		conds, args = append(conds, "queue = ? AND queued AND status IN ('working', 'input_required')"), append(args, q.Waiting)
	}
	if q.Parent != "" {
		// parent_id <> '' first, word for word: SQLite uses a partial
		// index only for a query that states its condition.
		conds, args = append(conds, "parent_id <> '' AND parent_id = ?"), append(args, string(q.Parent))
	}
	if q.Root != "" {
		conds, args = append(conds, "root_id <> '' AND root_id = ? AND parent_id <> ''"), append(args, string(q.Root))
	}
	if q.TopLevel {
		conds = append(conds, "parent_id = ''")
	}
	if q.Owner != "" {
		conds, args = append(conds, "owner = ?"), append(args, string(q.Owner))
	}
	if !q.CreatedAfter.IsZero() {
		conds, args = append(conds, "created_at_ms >= ?"), append(args, CeilMS(q.CreatedAfter))
	}
	if !q.CreatedBefore.IsZero() {
		conds, args = append(conds, "created_at_ms < ?"), append(args, CeilMS(q.CreatedBefore))
	}
	if paging && q.Cursor != "" {
		createdMS, id, err := sig.ParseAt("", q.Cursor)
		if err != nil {
			return nil, nil, err
		}
		if _, err := task.ParseID(id); err != nil {
			return nil, nil, store.ErrBadCursor
		}
		conds, args = append(conds, "(created_at_ms, id) < (?, ?)"), append(args, createdMS, id)
	}
	return conds, args, nil
}

// BrowseLimit is the page size of a BrowseQuery's Limit.
func BrowseLimit(n int) int {
	if n <= 0 {
		n = store.DefaultBrowseLimit
	}
	return min(n, store.MaxBrowseLimit)
}

// BrowsePage cuts tasks, read newest first with a limit of
// BrowseLimit(q.Limit)+1, to a page of q and returns the cursor of the
// next page ("" when none), signed by sig.
func BrowsePage(q store.BrowseQuery, sig cursor.Signer, tasks []*task.Task) ([]*task.Task, string) {
	limit := BrowseLimit(q.Limit)
	if len(tasks) <= limit {
		return tasks, ""
	}
	tasks = tasks[:limit]
	last := tasks[limit-1]
	return tasks, sig.MakeAt("", last.CreatedAt.UnixMilli(), string(last.ID))
}

// Numbered rewrites the ? placeholders of conds, in order, as PostgreSQL's
// $n, numbered from first.
func Numbered(conds []string, first int) []string {
	out := make([]string, len(conds))
	n := first
	for i, c := range conds {
		var b strings.Builder
		for _, part := range strings.SplitAfter(c, "?") {
			if strings.HasSuffix(part, "?") {
				fmt.Fprintf(&b, "%s$%d", part[:len(part)-1], n)
				n++
				continue
			}
			b.WriteString(part)
		}
		out[i] = b.String()
	}
	return out
}

// OutcomeCond is the condition that selects the finished tasks with one
// of outcomes (see [store.BrowseQuery].Outcomes), toolError being the
// backend's condition that a task is a tool error (worded as its partial
// index tasks_tool_errors states it). The outcomes are written in the
// SQL text, not bound: an outcome that is not one of the four adds
// nothing, and none gives a condition no task meets.
func OutcomeCond(outcomes []task.Outcome, toolError string) string {
	var terms []string
	for _, o := range outcomes {
		var c string
		switch o {
		case task.OutcomeOK:
			c = "(status = 'completed' AND NOT (" + toolError + "))"
		case task.OutcomeToolError:
			c = "(" + toolError + ")"
		case task.OutcomeFailed:
			c = "status = 'failed'"
		case task.OutcomeCancelled:
			c = "status = 'cancelled'"
		default:
			continue
		}
		if !slices.Contains(terms, c) {
			terms = append(terms, c)
		}
	}
	if len(terms) == 0 {
		return "1 = 0"
	}
	return "(" + strings.Join(terms, " OR ") + ")"
}
