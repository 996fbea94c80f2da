package store

import (
	"context"
	"time"

	"github.com/mcptask/mcptask/task"
)

// Browser is the facet of [Store] by which stores let an operator look across every
// owner's tasks (an admin dashboard, say): filtered, newest first, paged,
// with counts per status. It bypasses owner binding: only operator
// surfaces behind their own authorization may call it.
type Browser interface {
	// Browse returns a page of the tasks q selects, newest first (ties
	// broken by ID, descending), and the cursor of the next page (""
	// when there is none). A cursor it did not issue gives ErrBadCursor.
	// A cursor stays valid when the task it points after is deleted.
	Browse(ctx context.Context, q BrowseQuery) (tasks []*task.Task, next string, err error)

	// CountByStatus returns how many tasks q selects, per status, and
	// how many of the completed ones are tool errors, leaving out
	// q.Statuses, q.Outcomes, q.Cursor and q.Limit (so that a page can
	// show every status's count under the other filters). Statuses with
	// no task are left out. Each count stops at q.CountLimit: a count
	// of CountLimit means that many or more, so that counting costs the
	// same in a store of any size.
	CountByStatus(ctx context.Context, q BrowseQuery) (Counts, error)
}

// Counts is what [Browser.CountByStatus] counts.
type Counts struct {
	// ByStatus holds the number of tasks in each status that has some.
	ByStatus map[task.Status]int64
	// ToolErrors is how many of the completed tasks are tool errors
	// (task.OutcomeToolError); they are counted in ByStatus too.
	ToolErrors int64
}

// BrowseQuery selects tasks for [Browser]. Zero fields select everything.
type BrowseQuery struct {
	// Statuses and Outcomes, when either is not empty, select the tasks
	// in one of Statuses or with one of Outcomes (see
	// [task.Task.Outcome]): Statuses {working} with Outcomes {failed,
	// tool_error} selects the running tasks and the failures of either
	// kind. A status or outcome that is not a defined one selects nothing.
	Statuses []task.Status
	Outcomes []task.Outcome
	// Tool, if set, selects the tasks of that tool (exact name).
	Tool string
	// Owner, if set, selects the tasks of that owner (exact).
	Owner task.Owner
	// Waiting, if set, selects the unfinished tasks waiting in that queue
	// (Queued).
	Waiting string
	// Parent, if set, selects the children of that task (task.Task.Parent).
	Parent task.ID
	// Root, if set, selects the descendants of that task: every task of
	// the tree under it, but itself (task.Task.Root; the top of a tree
	// may name itself its Root).
	Root task.ID
	// TopLevel, if set, selects only tasks with no parent (a list that
	// hides children).
	TopLevel bool
	// CreatedAfter and CreatedBefore, if not zero, select tasks created
	// at or after, and before, these times.
	CreatedAfter, CreatedBefore time.Time
	// Cursor continues a listing ("" for the first page).
	Cursor string
	// Limit caps the page; <= 0 means DefaultBrowseLimit, and it is
	// lowered to MaxBrowseLimit.
	Limit int
	// CountLimit caps each count of [Browser.CountByStatus]; <= 0 means
	// DefaultCountLimit.
	CountLimit int64
}

// DefaultCountLimit is where the counts of [Browser.CountByStatus] stop
// by default: beyond it, "10,000 or more" tells an operator as much as
// the exact figure, which costs a read of every matching task.
const DefaultCountLimit = 10_000

// CountLimitOf returns the cap of q's counts: q.CountLimit, or
// DefaultCountLimit.
func CountLimitOf(q BrowseQuery) int64 {
	if q.CountLimit <= 0 {
		return DefaultCountLimit
	}
	return q.CountLimit
}

// The page sizes of [Browser.Browse].
const (
	DefaultBrowseLimit = 50
	MaxBrowseLimit     = 500
)

// Historian is the facet of [Store] by which stores keep each task's history (see
// [task.Event]): a creation, every status change and every start of its
// work, recorded in the same durable write as the change (by Create,
// Update and StartQueued; by Claim too if a claim changed a task's
// status or run count, which the claims of both backends never do: the
// engine counts the run in its next Update), with the events that
// [task.EventsOf] gives, and the engine instance named by the write's
// context ([WithInstance]), or by StartQueued's Runner. An event's time
// is the task's LastUpdatedAt when the write set it, else the store's
// clock; stores keep it at millisecond precision. A task's history is
// deleted with it (Delete, DeleteExpired).
type Historian interface {
	// History returns the events of the task with id, oldest first: the
	// newest MaxHistory of them when there are more; ErrNotFound if the
	// store holds no such task.
	History(ctx context.Context, id task.ID) ([]task.Event, error)
}

// MaxHistory bounds the events [Historian.History] returns.
const MaxHistory = 1000

type instanceKey struct{}

// WithInstance returns ctx naming instance as the engine instance that
// makes the writes done with it; a [Historian] records it in the events.
func WithInstance(ctx context.Context, instance string) context.Context {
	return context.WithValue(ctx, instanceKey{}, instance)
}

// InstanceOf returns the instance ctx names (see [WithInstance]), or "".
func InstanceOf(ctx context.Context) string {
	s, _ := ctx.Value(instanceKey{}).(string)
	return s
}
