package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcptask/mcptask/store/internal/rowcodec"

	"github.com/jackc/pgx/v5"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/cursor"
	"github.com/mcptask/mcptask/task"
)

var (
	_ store.Browser   = (*Store)(nil)
	_ store.Historian = (*Store)(nil)
)

// eventColumns are the columns of an event after its task ID and seq, in
// the order of the arrays that eventArrays binds.
const eventColumns = `kind, at_ms, from_status, to_status, instance, attempt, message`

// eventArrayTypes are the types of the arrays that eventArrays binds,
// from the first placeholder given.
func eventArrayTypes(first int) string {
	types := []string{"text", "bigint", "text", "text", "text", "bigint", "text"}
	var b strings.Builder
	for i, t := range types {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d::%s[]", first+i, t)
	}
	return b.String()
}

// createSQL is insertSQL that also records the new task's first events
// (the arrays after the insert's parameters, see eventArrays), numbered from 1, in the same
// statement: nothing when the insert found a conflict.
var createSQL = `WITH ins AS (` + insertSQL + `), ev AS (
	INSERT INTO %[1]s.task_events (task_id, seq, ` + eventColumns + `)
	SELECT ins.id, e.ord, e.kind, e.at_ms, e.from_status, e.to_status, e.instance, e.attempt, e.message
	FROM ins CROSS JOIN unnest(` + eventArrayTypes(len(loadColumns)+1) + `)
		WITH ORDINALITY AS e(kind, at_ms, from_status, to_status, instance, attempt, message, ord)
)
SELECT id FROM ins`

// eventsSQL appends events to the histories of tasks: $1 holds the task
// IDs, the other arrays the events (see eventArrays), numbered after each
// task's last event. The caller holds the tasks' rows locked, so no other
// write numbers events of the same task at once.
var eventsSQL = `INSERT INTO %[1]s.task_events (task_id, seq, ` + eventColumns + `)
SELECT e.task_id,
	coalesce((SELECT max(x.seq) FROM %[1]s.task_events AS x WHERE x.task_id = e.task_id), 0)
		+ row_number() OVER (PARTITION BY e.task_id ORDER BY e.ord),
	e.kind, e.at_ms, e.from_status, e.to_status, e.instance, e.attempt, e.message
FROM unnest($1::text[], ` + eventArrayTypes(2) + `)
	WITH ORDINALITY AS e(task_id, kind, at_ms, from_status, to_status, instance, attempt, message, ord)`

// historySQL reads the newest events of a task ($1), up to $2, newest
// first.
const historySQL = `SELECT seq, ` + eventColumns + ` FROM %[1]s.task_events
	WHERE task_id = $1 ORDER BY seq DESC LIMIT $2`

// eventArrays binds evs as the arrays of createSQL and eventsSQL (after
// eventsSQL's task IDs). An instance name is made valid text.
func eventArrays(evs []task.Event) []any {
	n := len(evs)
	kinds, from, to, inst, msgs := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	at, attempts := make([]int64, n), make([]int64, n)
	for i, e := range evs {
		kinds[i], from[i], to[i], msgs[i] = string(e.Kind), string(e.From), string(e.To), e.Message
		inst[i] = e.Instance
		if checkText(e.Instance) != nil {
			inst[i] = strings.ToValidUTF8(strings.ReplaceAll(e.Instance, "\x00", ""), "\uFFFD")
		}
		at[i], attempts[i] = e.At.UnixMilli(), e.Attempt
	}
	return []any{kinds, at, from, to, inst, attempts, msgs}
}

// taskEvents binds the events of several tasks for eventsSQL.
type taskEvents struct {
	ids []string
	evs []task.Event
}

// add appends the events of the task with id.
func (te *taskEvents) add(id string, evs []task.Event) {
	for range evs {
		te.ids = append(te.ids, id)
	}
	te.evs = append(te.evs, evs...)
}

// args are the parameters of eventsSQL.
func (te *taskEvents) args() []any {
	return append([]any{te.ids}, eventArrays(te.evs)...)
}

// storeNow is the store's clock, for the events of writes that do not set
// the task's LastUpdatedAt.
var storeNow = time.Now

// History returns the history of the task with id, oldest first (the
// newest store.MaxHistory events when there are more); it implements
// [store.Historian]. Create, Update and StartQueued record the events in
// the transaction of the change (Create and Update with no extra round
// trip to the server); Claim changes neither the status nor the run
// count, so it records none. Event times have millisecond precision. A
// task created before the schema kept histories has an empty one. An
// unknown task gives [store.ErrNotFound].
func (s *Store) History(ctx context.Context, id task.ID) ([]task.Event, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	rows, err := s.pool.Query(ctx, s.historySQL, string(id), store.MaxHistory)
	if err != nil {
		return nil, fmt.Errorf("postgres store: history of task %s: %w", id, err)
	}
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (task.Event, error) {
		var (
			e              task.Event
			kind, from, to string
			atMS           int64
		)
		err := row.Scan(&e.Seq, &kind, &atMS, &from, &to, &e.Instance, &e.Attempt, &e.Message)
		e.Kind, e.From, e.To, e.At = task.EventKind(kind), task.Status(from), task.Status(to), rowcodec.MSTime(atMS)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres store: history of task %s: %w", id, err)
	}
	if len(evs) == 0 {
		var one int
		err := s.pool.QueryRow(ctx, s.existsSQL, string(id)).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, store.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("postgres store: history of task %s: %w", id, err)
		}
		return []task.Event{}, nil
	}
	slices.Reverse(evs)
	return evs, nil
}

// browseCursors signs the cursors of Browse.
func (s *Store) browseCursors() cursor.Signer {
	return cursor.Signer{Key: s.cursorKey, Domain: "mcptask/postgres browse cursor"}
}

// browseWhere returns the conditions of q (with its status and cursor
// conditions if paging is set) and their arguments, or ErrBadCursor.
func (s *Store) browseWhere(q store.BrowseQuery, paging bool) (string, []any, error) {
	conds, args, err := rowcodec.BrowseFilter(q, s.browseCursors(), paging)
	if err != nil {
		return "", nil, err
	}
	if paging && (len(q.Statuses) > 0 || len(q.Outcomes) > 0) {
		var c string
		if len(q.Statuses) > 0 {
			st := make([]string, len(q.Statuses))
			for i, x := range q.Statuses {
				st[i] = string(x)
			}
			if len(st) == 1 {
				// A range of tasks_status_created, in the listing's order.
				c, args = "status = ?", append(args, st[0])
			} else {
				c, args = "status = ANY(?::text[])", append(args, st)
			}
		}
		if len(q.Outcomes) > 0 {
			oc := rowcodec.OutcomeCond(q.Outcomes, "tool_error") // no placeholders
			if c == "" {
				c = oc
			} else {
				c = "(" + c + " OR " + oc + ")"
			}
		}
		conds = append(conds, c)
	}
	for _, v := range []string{q.Tool, string(q.Owner)} {
		if checkText(v) != nil {
			// No task can hold such a text: the condition selects none.
			conds = append(conds, "false")
		}
	}
	if len(conds) == 0 {
		return "", args, nil
	}
	return " WHERE " + strings.Join(rowcodec.Numbered(conds, 1), " AND "), args, nil
}

// Browse returns a page of the tasks q selects, every owner's, newest
// first; it implements [store.Browser]. Cursors are signed with the
// schema's key: one this schema did not issue gives [store.ErrBadCursor].
// A cursor holds a position only (creation time and ID), so it stays
// valid when that task is deleted, across restarts and on every instance
// sharing the schema. Expired tasks not deleted yet are browsed like the
// others.
func (s *Store) Browse(ctx context.Context, q store.BrowseQuery) ([]*task.Task, string, error) {
	if s.closed() {
		return nil, "", ErrClosed
	}
	where, args, err := s.browseWhere(q, true)
	if err != nil {
		return nil, "", err
	}
	args = append(args, rowcodec.BrowseLimit(q.Limit)+1)
	query := `SELECT ` + taskColumns + ` FROM ` + s.quoted + `.tasks` + where +
		` ORDER BY created_at_ms DESC, id DESC LIMIT $` + strconv.Itoa(len(args))
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, "", fmt.Errorf("postgres store: browse: %w", err)
	}
	tasks, err := scanAll(rows)
	if err != nil {
		return nil, "", fmt.Errorf("postgres store: browse: %w", err)
	}
	tasks, next := rowcodec.BrowsePage(q, s.browseCursors(), tasks)
	return tasks, next, nil
}

// CountByStatus counts the tasks q selects per status, and the tool
// errors among them, leaving out q.Statuses, q.Outcomes, q.Cursor and
// q.Limit, each up to the query's count limit; it implements
// [store.Browser]. Each status is counted reading at most the limit of
// its tasks (one statement for all, a subquery per status); the tool
// errors on their own partial index (tasks_tool_errors), which holds the
// filters.
func (s *Store) CountByStatus(ctx context.Context, q store.BrowseQuery) (store.Counts, error) {
	if s.closed() {
		return store.Counts{}, ErrClosed
	}
	where, args, err := s.browseWhere(q, false)
	if err != nil {
		return store.Counts{}, err
	}
	and := " WHERE "
	if where != "" {
		and = where + " AND "
	}
	limit := store.CountLimitOf(q)
	args = append(args[:len(args):len(args)], limit)
	lim := fmt.Sprintf("$%d", len(args))
	parts := make([]string, len(countedStatuses))
	for i, st := range countedStatuses {
		parts[i] = `(SELECT count(*) FROM (SELECT 1 FROM ` + s.quoted + `.tasks` + and + `status = '` + string(st) + `' LIMIT ` + lim + `) c)`
	}
	ns := make([]int64, len(countedStatuses))
	dst := make([]any, len(ns))
	for i := range ns {
		dst[i] = &ns[i]
	}
	if err := s.pool.QueryRow(ctx, `SELECT `+strings.Join(parts, ", "), args...).Scan(dst...); err != nil {
		return store.Counts{}, fmt.Errorf("postgres store: count by status: %w", err)
	}
	out := store.Counts{ByStatus: map[task.Status]int64{}}
	for i, st := range countedStatuses {
		if ns[i] > 0 {
			out.ByStatus[st] = ns[i]
		}
	}
	if out.ByStatus[task.Completed] == 0 {
		return out, nil
	}
	err = s.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM `+s.quoted+`.tasks`+and+`tool_error LIMIT `+lim+`) c`, args...).Scan(&out.ToolErrors)
	if err != nil {
		return store.Counts{}, fmt.Errorf("postgres store: count tool errors: %w", err)
	}
	return out, nil
}

// countedStatuses are the statuses CountByStatus counts.
var countedStatuses = []task.Status{task.Working, task.InputRequired, task.Completed, task.Failed, task.Cancelled}

// loadColumns are the columns of the tasks table, in the order of
// row.insertArgs.
var loadColumns = []string{"id", "owner", "tool", "wire", "status", "status_message", "created_at_ms", "updated_at_ms",
	"ttl_ns", "poll_ns", "expires_at_ns", "request", "result", "error", "input_requests", "input_responses", "input_seq",
	"runner", "attempts", "lease_expires_at_ms", "idempotency_key", "key_owner", "queue", "queued", "external_ref",
	"correlation", "tool_error", "started_at_ms", "parent_id", "root_id"}

// LoadTasks inserts tasks with one COPY, encoded as Create encodes them
// but without their histories and without Create's checks (idempotency
// keys, quotas, queues) or change notifications. It is a bulk loader for
// benchmarks that need a store holding many tasks (see
// bench/cmd/mcptask-curves); servers create tasks with Create. An ID
// already taken fails the whole COPY. Run ANALYZE (or wait for autovacuum)
// after a large load, as a store that grew by Create would have been.
func (s *Store) LoadTasks(ctx context.Context, tasks []*task.Task) error {
	rows := make([][]any, len(tasks))
	for i, tk := range tasks {
		r, err := encodeTask(tk)
		if err != nil {
			return err
		}
		rows[i] = r.InsertArgs()
	}
	if _, err := s.pool.CopyFrom(ctx, pgx.Identifier{s.schema, "tasks"}, loadColumns, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("postgres store: load %d tasks: %w", len(tasks), err)
	}
	return nil
}

// Analyze runs VACUUM (ANALYZE) on the tasks table, so that after a
// [Store.LoadTasks] the planner knows its size and an index-only scan
// need not visit the table, as autovacuum arranges for a store that grew
// by Create; for benchmarks.
func (s *Store) Analyze(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, "VACUUM (ANALYZE) "+s.quoted+".tasks")
	return err
}
