package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcptask/mcptask/store/internal/rowcodec"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/cursor"
	"github.com/mcptask/mcptask/task"
)

var (
	_ store.Browser   = (*Store)(nil)
	_ store.Historian = (*Store)(nil)
)

// insertEventSQL appends an event to the history of a task (?1), after
// its last one.
const insertEventSQL = `INSERT INTO task_events (task_id, seq, kind, at_ms, from_status, to_status, instance, attempt, message)
	VALUES (?1, (SELECT coalesce(max(seq), 0) + 1 FROM task_events WHERE task_id = ?1), ?2, ?3, ?4, ?5, ?6, ?7, ?8)`

// historySQL reads the newest events of a task (?), up to ?, newest first.
const historySQL = `SELECT seq, kind, at_ms, from_status, to_status, instance, attempt, message
	FROM task_events WHERE task_id = ? ORDER BY seq DESC LIMIT ?`

// insertEvents records evs in the history of the task with id, inside tx
// (the write transaction of the change they record).
func (s *Store) insertEvents(tx *sql.Tx, id string, evs []task.Event) error {
	if len(evs) == 0 {
		return nil
	}
	st := tx.Stmt(s.insertEventStmt)
	for _, e := range evs {
		if _, err := st.Exec(id, string(e.Kind), e.At.UnixMilli(), string(e.From), string(e.To), e.Instance, e.Attempt, e.Message); err != nil {
			return fmt.Errorf("sqlite store: recording the history of task %s: %w", id, err)
		}
	}
	return nil
}

// History returns the history of the task with id, oldest first (the
// newest store.MaxHistory events when there are more); it implements
// [store.Historian]. Create, Update and StartQueued record the events in
// the write transaction of the change; Claim changes neither the status
// nor the run count, so it records none. Event times have millisecond
// precision. A task created before the schema kept histories has an
// empty one. An unknown task gives [store.ErrNotFound].
func (s *Store) History(ctx context.Context, id task.ID) ([]task.Event, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	rows, err := s.historyStmt.QueryContext(ctx, string(id), store.MaxHistory)
	if err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: history of task %s: %w", id, err))
	}
	defer rows.Close()
	var evs []task.Event
	for rows.Next() {
		var (
			e        task.Event
			kind     string
			from, to string
			atMS     int64
		)
		if err := rows.Scan(&e.Seq, &kind, &atMS, &from, &to, &e.Instance, &e.Attempt, &e.Message); err != nil {
			return nil, s.noteCorrupt(fmt.Errorf("sqlite store: history of task %s: %w", id, err))
		}
		e.Kind, e.From, e.To, e.At = task.EventKind(kind), task.Status(from), task.Status(to), rowcodec.MSTime(atMS)
		evs = append(evs, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: history of task %s: %w", id, err))
	}
	if len(evs) == 0 {
		var one int
		err := s.rdb.QueryRowContext(ctx, `SELECT 1 FROM tasks WHERE id = ?`, string(id)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, store.ErrNotFound
		}
		if err != nil {
			return nil, s.noteCorrupt(fmt.Errorf("sqlite store: history of task %s: %w", id, err))
		}
		return []task.Event{}, nil
	}
	slices.Reverse(evs)
	return evs, nil
}

// browseCursors signs the cursors of Browse.
func (s *Store) browseCursors() cursor.Signer {
	return cursor.Signer{Key: s.cursorKey, Domain: "mcptask/sqlite browse cursor"}
}

// browseWhere returns the conditions of q (with its status and cursor
// conditions if paging is set) and their arguments, or ErrBadCursor.
func (s *Store) browseWhere(q store.BrowseQuery, paging bool) (string, []any, error) {
	conds, args, err := rowcodec.BrowseFilter(q, s.browseCursors(), paging)
	if err != nil {
		return "", nil, err
	}
	if paging {
		// No placeholders in either condition.
		switch {
		case len(q.Statuses) > 0 && len(q.Outcomes) > 0:
			conds = append([]string{"(" + statusCond(q.Statuses) + " OR " + rowcodec.OutcomeCond(q.Outcomes, toolErrorCond) + ")"}, conds...)
		case len(q.Statuses) > 0:
			conds = append([]string{statusCond(q.Statuses)}, conds...)
		case len(q.Outcomes) > 0:
			conds = append(conds, rowcodec.OutcomeCond(q.Outcomes, toolErrorCond))
		}
	}
	if len(conds) == 0 {
		return "", nil, nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args, nil
}

// toolErrorCond is the condition of the partial index tasks_tool_errors,
// word for word (see schemaV10).
const toolErrorCond = "tool_error = 1"

// browseIndex names the index a listing of q must read, when the planner
// would choose worse: the tool errors alone (however filtered) are read
// from their own partial index, which holds the filters, in the
// listing's order; without statistics SQLite would read every task of a
// tool or owner to find its few tool errors.
func browseIndex(q store.BrowseQuery) string {
	if len(q.Statuses) > 0 || len(q.Outcomes) == 0 {
		return ""
	}
	for _, o := range q.Outcomes {
		if o != task.OutcomeToolError {
			return ""
		}
	}
	return " INDEXED BY tasks_tool_errors"
}

// everyStatus is the condition of the partial index tasks_status_created,
// word for word: every task meets it, and stating it lets SQLite use the
// index (see schemaV7).
const everyStatus = "status <> ''"

// statusCond is the condition that selects the tasks in one of statuses.
// The statuses are written in the SQL text, not bound, so that SQLite can
// match the condition of a partial index: for one status, the range of
// tasks_status_created; for several, all unfinished or all finished, the
// condition also states the one of tasks_active or tasks_finished, word
// for word, so that SQLite reads the tasks of those statuses only, newest
// first.
func statusCond(statuses []task.Status) string {
	var (
		lits             []string
		active, finished = true, true
	)
	for _, st := range statuses {
		if !st.Valid() {
			continue // no task has it
		}
		lits = append(lits, "'"+string(st)+"'")
		if st.Terminal() {
			active = false
		} else {
			finished = false
		}
	}
	if len(lits) == 0 {
		return "0"
	}
	slices.Sort(lits)
	lits = slices.Compact(lits)
	if len(lits) == 1 {
		// One range of tasks_status_created, in the listing's order.
		return "status = " + lits[0] + " AND " + everyStatus
	}
	c := "status IN (" + strings.Join(lits, ", ") + ")"
	switch {
	case active:
		c += " AND status IN ('working', 'input_required')"
	case finished:
		c += " AND status IN ('completed', 'failed', 'cancelled')"
	}
	return c
}

// readStmt returns the prepared statement of the read pool for query,
// preparing it on first use (the filters of Browse make a few dozen
// variants at most).
func (s *Store) readStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	if st, ok := s.stmts[query]; ok {
		return st, nil
	}
	if s.closed() {
		return nil, ErrClosed
	}
	st, err := s.rdb.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if s.stmts == nil {
		s.stmts = map[string]*sql.Stmt{}
	}
	s.stmts[query] = st
	return st, nil
}

// Browse returns a page of the tasks q selects, every owner's, newest
// first; it implements [store.Browser]. Cursors are signed with the
// database's key: one this database did not issue gives
// [store.ErrBadCursor]. A cursor holds a position only (creation time and
// ID), so it stays valid when that task is deleted, and across restarts.
// Expired tasks not deleted yet are browsed like the others.
func (s *Store) Browse(ctx context.Context, q store.BrowseQuery) ([]*task.Task, string, error) {
	if s.closed() {
		return nil, "", ErrClosed
	}
	where, args, err := s.browseWhere(q, true)
	if err != nil {
		return nil, "", err
	}
	st, err := s.readStmt(ctx, `SELECT `+taskColumns+` FROM tasks`+browseIndex(q)+where+` ORDER BY created_at_ms DESC, id DESC LIMIT ?`)
	if err != nil {
		return nil, "", s.noteCorrupt(fmt.Errorf("sqlite store: browse: %w", err))
	}
	rows, err := st.QueryContext(ctx, append(args, rowcodec.BrowseLimit(q.Limit)+1)...)
	if err != nil {
		return nil, "", s.noteCorrupt(fmt.Errorf("sqlite store: browse: %w", err))
	}
	tasks, err := scanAll(rows)
	if err != nil {
		return nil, "", s.noteCorrupt(fmt.Errorf("sqlite store: browse: %w", err))
	}
	tasks, next := rowcodec.BrowsePage(q, s.browseCursors(), tasks)
	return tasks, next, nil
}

// CountByStatus counts the tasks q selects per status, and the tool
// errors among them, leaving out q.Statuses, q.Outcomes, q.Cursor and
// q.Limit, each up to the query's count limit; it implements
// [store.Browser]. Each status is counted on its range of
// tasks_status_created (or the index of the other filters), reading at
// most the limit of its tasks; the tool errors on their own index
// (tasks_tool_errors), which holds the filters.
func (s *Store) CountByStatus(ctx context.Context, q store.BrowseQuery) (store.Counts, error) {
	if s.closed() {
		return store.Counts{}, ErrClosed
	}
	where, args, err := s.browseWhere(q, false)
	if err != nil {
		return store.Counts{}, err
	}
	limit := store.CountLimitOf(q)
	out := store.Counts{ByStatus: map[task.Status]int64{}}
	count := func(what, from, cond string) (int64, error) {
		if where != "" {
			cond = where + " AND " + cond
		} else {
			cond = " WHERE " + cond
		}
		st, err := s.readStmt(ctx, `SELECT count(*) FROM (SELECT 1 FROM tasks`+from+cond+` LIMIT ?)`)
		if err != nil {
			return 0, s.noteCorrupt(fmt.Errorf("sqlite store: count %s: %w", what, err))
		}
		var n int64
		if err := st.QueryRowContext(ctx, append(args[:len(args):len(args)], limit)...).Scan(&n); err != nil {
			return 0, s.noteCorrupt(fmt.Errorf("sqlite store: count %s: %w", what, err))
		}
		return n, nil
	}
	for _, st := range countedStatuses {
		n, err := count(string(st)+" tasks", "", statusCond([]task.Status{st}))
		if err != nil {
			return store.Counts{}, err
		}
		if n > 0 {
			out.ByStatus[st] = n
		}
	}
	if out.ByStatus[task.Completed] == 0 {
		return out, nil
	}
	if out.ToolErrors, err = count("tool errors", " INDEXED BY tasks_tool_errors", toolErrorCond); err != nil {
		return store.Counts{}, err
	}
	return out, nil
}

// countedStatuses are the statuses CountByStatus counts.
var countedStatuses = []task.Status{task.Working, task.InputRequired, task.Completed, task.Failed, task.Cancelled}

// storeNow is the store's clock, for the events of writes that do not set
// the task's LastUpdatedAt.
var storeNow = time.Now

// LoadTasks inserts tasks in one write transaction, encoded as Create
// encodes them but without their histories and without Create's checks
// (idempotency keys, quotas, queues) or change announcements. It is a bulk
// loader for benchmarks that need a store holding many tasks (see
// bench/cmd/mcptask-curves); servers create tasks with Create. An ID
// already taken fails the whole transaction.
func (s *Store) LoadTasks(ctx context.Context, tasks []*task.Task) error {
	rows := make([]*row, len(tasks))
	for i, tk := range tasks {
		r, err := encodeTask(tk)
		if err != nil {
			return err
		}
		rows[i] = r
	}
	return s.writeNew(ctx, func(tx *sql.Tx) error {
		ins := tx.Stmt(s.insertStmt)
		for _, r := range rows {
			if _, err := ins.Exec(r.InsertArgs()...); err != nil {
				return fmt.Errorf("sqlite store: load task %s: %w", r.ID, err)
			}
		}
		return nil
	})
}
