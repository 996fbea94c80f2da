package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/history"
	"github.com/mcptask/mcptask/task"
)

// The statements of the concurrency queues. Their conditions are those of
// the partial index tasks_queue, so each reads one range of it.
const (
	// queueCountSQL counts the running (?) and waiting tasks of a queue.
	queueCountSQL = `SELECT
		(SELECT count(*) FROM tasks WHERE queue = ?1 AND queued = 0 AND queue <> '' AND status IN ('working', 'input_required')),
		(SELECT count(*) FROM tasks WHERE queue = ?1 AND queued = 1 AND queue <> '' AND status IN ('working', 'input_required'))`
	// queueHeadSQL reads the first waiting tasks of a queue (?), up to ?.
	queueHeadSQL = `SELECT ` + taskColumns + ` FROM tasks
		WHERE queue = ? AND queued = 1 AND queue <> '' AND status IN ('working', 'input_required')
		ORDER BY created_at_ms, id LIMIT ?`
	// queueAnySQL says whether a queue (?) has a waiting task.
	queueAnySQL = `SELECT EXISTS (SELECT 1 FROM tasks
		WHERE queue = ? AND queued = 1 AND queue <> '' AND status IN ('working', 'input_required'))`
	// queueStartSQL starts a waiting task for a runner.
	queueStartSQL = `UPDATE tasks SET queued = 0, runner = ?, lease_expires_at_ms = ?, attempts = attempts + 1,
		status_message = '', updated_at_ms = ? WHERE id = ? AND queued = 1`
	// queueMessageSQL sets the status message of a waiting task.
	queueMessageSQL = `UPDATE tasks SET status_message = ? WHERE id = ? AND status_message <> ?`
)

// WaitingQueues returns the queues that have waiting tasks, and how many
// wait in each; see [store.Queuer].
func (s *Store) WaitingQueues(ctx context.Context) (map[string]int, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT queue, count(*) FROM tasks
		WHERE queued = 1 AND queue <> '' AND status IN ('working', 'input_required') GROUP BY queue`)
	if err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: waiting queues: %w", err))
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var q string
		var n int
		if err := rows.Scan(&q, &n); err != nil {
			return nil, fmt.Errorf("sqlite store: waiting queues: %w", err)
		}
		out[q] = n
	}
	return out, rows.Err()
}

// queueCounts returns how many tasks of queue run and wait, inside tx.
func (s *Store) queueCounts(tx *sql.Tx, queue string) (running, waiting int64, err error) {
	err = tx.Stmt(s.queueCountStmt).QueryRow(queue).Scan(&running, &waiting)
	return running, waiting, err
}

// StartQueued starts the oldest waiting tasks of req.Queue while fewer than
// req.Max of its tasks run; see [store.Queuer]. It runs in one write
// transaction, which holds the database's write lock: no Create or other
// StartQueued, in this process or another sharing the file, counts the
// queue in between.
func (s *Store) StartQueued(ctx context.Context, req store.QueueRequest) ([]*task.Task, error) {
	switch {
	case req.Runner == "":
		return nil, errors.New("sqlite store: StartQueued without a Runner")
	case req.Queue == "":
		return nil, errors.New("sqlite store: StartQueued without a Queue")
	case req.Lease <= 0:
		return nil, fmt.Errorf("sqlite store: StartQueued with a non-positive Lease %v", req.Lease)
	case req.Now.IsZero():
		return nil, errors.New("sqlite store: StartQueued without a Now")
	}
	// Most rounds find nothing waiting: ask the read pool first, so that
	// an idle queue costs no write transaction.
	var any int
	if err := s.queueAnyStmt.QueryRowContext(ctx, req.Queue).Scan(&any); err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: reading queue %q: %w", req.Queue, err))
	}
	if any == 0 {
		return nil, nil
	}
	until := leaseMS(req.Now.Add(req.Lease))
	nowMS := req.Now.UnixMilli()
	var started []*task.Task
	err := s.writeChanges(ctx, func(tx *sql.Tx) ([]task.ID, error) {
		started = nil
		running, waiting, err := s.queueCounts(tx, req.Queue)
		if err != nil {
			return nil, fmt.Errorf("sqlite store: counting queue %q: %w", req.Queue, err)
		}
		free := int64(req.Max) - running
		if waiting == 0 || free <= 0 {
			return nil, nil
		}
		rows, err := tx.Stmt(s.queueHeadStmt).Query(req.Queue, min(free, waiting)+store.MaxQueueMessages)
		if err != nil {
			return nil, fmt.Errorf("sqlite store: reading queue %q: %w", req.Queue, err)
		}
		head, err := scanAll(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite store: reading queue %q: %w", req.Queue, err)
		}
		var ids []task.ID
		start := tx.Stmt(s.queueStartStmt)
		for i, t := range head {
			if int64(i) < free {
				if _, err := start.Exec(req.Runner, until, nowMS, string(t.ID)); err != nil {
					return nil, fmt.Errorf("sqlite store: starting task %s: %w", t.ID, err)
				}
				before := *t
				t.Queued = false
				t.Runner = req.Runner
				t.LeaseExpiresAt = leaseTime(until)
				t.Attempts++
				t.StatusMessage = ""
				t.LastUpdatedAt = msTime(nowMS)
				if err := s.insertEvents(tx, string(t.ID), history.Events(&before, t, req.Now, req.Runner)); err != nil {
					return nil, err
				}
				started = append(started, t)
				ids = append(ids, t.ID)
				continue
			}
			msg := task.QueuedMessage(int64(i) - int64(len(started)))
			if _, err := tx.Stmt(s.queueMessageStmt).Exec(msg, string(t.ID), msg); err != nil {
				return nil, fmt.Errorf("sqlite store: task %s: %w", t.ID, err)
			}
		}
		return ids, nil
	})
	if err != nil {
		return nil, err
	}
	return started, nil
}

// CountActive counts the unfinished tasks by tool, status and whether
// they wait in a queue; see [store.Counter].
func (s *Store) CountActive(ctx context.Context) ([]store.ActiveCount, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	// +tool: grouping by the bare column would have SQLite read every
	// task through tasks_tool_created, for its order, instead of the
	// unfinished ones only through a partial index.
	rows, err := s.rdb.QueryContext(ctx, `SELECT tool, status, queued, count(*) FROM tasks
		WHERE status IN ('working', 'input_required') GROUP BY +tool, status, queued`)
	if err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: count active: %w", err))
	}
	defer rows.Close()
	var out []store.ActiveCount
	for rows.Next() {
		var c store.ActiveCount
		var queued int64
		if err := rows.Scan(&c.Tool, &c.Status, &queued, &c.N); err != nil {
			return nil, fmt.Errorf("sqlite store: count active: %w", err)
		}
		c.Queued = queued != 0
		out = append(out, c)
	}
	return out, rows.Err()
}
