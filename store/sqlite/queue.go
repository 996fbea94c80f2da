package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/mcptask/mcptask/store/internal/rowcodec"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/history"
	"github.com/mcptask/mcptask/task"
)

// The statements of the concurrency queues. Their conditions are those of
// the partial index tasks_queue_owner, so each reads ranges of it.
const (
	// queueCountSQL counts the running (?) and waiting tasks of a queue.
	queueCountSQL = `SELECT
		(SELECT count(*) FROM tasks WHERE queue = ?1 AND queued = 0 AND queue <> '' AND status IN ('working', 'input_required')),
		(SELECT count(*) FROM tasks WHERE queue = ?1 AND queued = 1 AND queue <> '' AND status IN ('working', 'input_required'))`
	// queueHeadSQL reads the first waiting tasks of a queue (?1), up to
	// ?2, in turn order (see store.Queuer): each waiting task's turn is
	// its owner's running tasks of the queue plus the tasks of its owner
	// waiting ahead of it; lower turns first, then the owner served least
	// recently (queue_turns; never first), then the oldest. owners
	// walks the distinct owners of the waiting tasks, one index seek
	// each; heads takes the oldest ?2 of each owner (no owner has more
	// among the first ?2), so the cost grows with the owners waiting and
	// ?2, not with the length of the queue.
	queueHeadSQL = `WITH RECURSIVE owners(o) AS (
		SELECT min(owner) FROM tasks
		WHERE queue = ?1 AND queued = 1 AND queue <> '' AND status IN ('working', 'input_required')
		UNION ALL
		SELECT (SELECT min(owner) FROM tasks
			WHERE queue = ?1 AND queued = 1 AND queue <> '' AND status IN ('working', 'input_required') AND owner > o)
		FROM owners WHERE o IS NOT NULL
	), own(o, running, served) AS MATERIALIZED (
		SELECT o, (SELECT count(*) FROM tasks r
				WHERE r.queue = ?1 AND r.queued = 0 AND r.queue <> '' AND r.status IN ('working', 'input_required') AND r.owner = o),
			coalesce((SELECT seq FROM queue_turns WHERE queue_turns.queue = ?1 AND queue_turns.owner = o), 0)
		FROM owners WHERE o IS NOT NULL
	), heads(hid, hcreated, turn, served) AS (
		SELECT t.id, t.created_at_ms, own.running + row_number() OVER (PARTITION BY t.owner ORDER BY t.created_at_ms, t.id) - 1, own.served
		FROM own CROSS JOIN tasks t ON t.id IN (SELECT u.id FROM tasks u
			WHERE u.queue = ?1 AND u.queued = 1 AND u.queue <> '' AND u.status IN ('working', 'input_required') AND u.owner = own.o
			ORDER BY u.created_at_ms, u.id LIMIT ?2)
	)
	SELECT ` + taskColumns + ` FROM heads CROSS JOIN tasks ON tasks.id = heads.hid
	ORDER BY heads.turn, heads.served, heads.hcreated, heads.hid LIMIT ?2`
	// queueServedSQL records that a queue (?1) started a task of an owner
	// (?2), ?3 starts after the queue's latest recorded one.
	queueServedSQL = `INSERT INTO queue_turns (queue, owner, seq)
		VALUES (?1, ?2, ?3 + coalesce((SELECT max(seq) FROM queue_turns WHERE queue = ?1), 0))
		ON CONFLICT (queue, owner) DO UPDATE SET seq = excluded.seq`
	// queuePruneSQL forgets the turns of the owners with no task waiting
	// in a queue (?): one that enqueues again is served as one never
	// served (its running tasks still count against it).
	queuePruneSQL = `DELETE FROM queue_turns WHERE queue = ?1 AND NOT EXISTS (SELECT 1 FROM tasks
		WHERE tasks.queue = ?1 AND tasks.queued = 1 AND tasks.queue <> '' AND tasks.status IN ('working', 'input_required')
			AND tasks.owner = queue_turns.owner)`
	// queueAnySQL says whether a queue (?) has a waiting task.
	queueAnySQL = `SELECT EXISTS (SELECT 1 FROM tasks
		WHERE queue = ? AND queued = 1 AND queue <> '' AND status IN ('working', 'input_required'))`
	// queueStartSQL starts a waiting task for a runner.
	queueStartSQL = `UPDATE tasks SET queued = 0, runner = ?1, lease_expires_at_ms = ?2, attempts = attempts + 1,
		status_message = '', updated_at_ms = ?3, started_at_ms = ?3 WHERE id = ?4 AND queued = 1`
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

// queueHead reads the first n waiting tasks of queue in turn order, inside
// tx.
func (s *Store) queueHead(tx *sql.Tx, queue string, n int64) ([]*task.Task, error) {
	rows, err := tx.Stmt(s.queueHeadStmt).Query(queue, n)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: reading queue %q: %w", queue, err)
	}
	head, err := scanAll(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: reading queue %q: %w", queue, err)
	}
	return head, nil
}

// StartQueued starts waiting tasks of req.Queue, taking turns between their
// owners, while fewer than req.Max of its tasks run; see [store.Queuer]. It runs in one write
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
		// The tasks to start and, behind them, the places of those that
		// still wait: in the turn order before the starts, which they
		// leave as it is but for ties with an owner just served.
		head, err := s.queueHead(tx, req.Queue, min(free, waiting)+store.MaxQueueMessages)
		if err != nil {
			return nil, err
		}
		n := min(int(free), len(head))
		last := map[task.Owner]int{} // each started owner's last start
		for i, t := range head[:n] {
			last[t.Owner] = i
		}
		var ids []task.ID
		start := tx.Stmt(s.queueStartStmt)
		served := tx.Stmt(s.queueServedStmt)
		for i, t := range head[:n] {
			if _, err := start.Exec(req.Runner, until, nowMS, string(t.ID)); err != nil {
				return nil, fmt.Errorf("sqlite store: starting task %s: %w", t.ID, err)
			}
			before := *t
			t.Queued = false
			t.Runner = req.Runner
			t.LeaseExpiresAt = rowcodec.OpTime(until)
			t.Attempts++
			t.StatusMessage = ""
			t.LastUpdatedAt = rowcodec.MSTime(nowMS)
			t.StartedAt = t.LastUpdatedAt
			if err := s.insertEvents(tx, string(t.ID), history.Events(&before, t, req.Now, req.Runner)); err != nil {
				return nil, err
			}
			// Served in the order of their last start (the insert reads
			// the latest seq).
			if last[t.Owner] == i {
				if _, err := served.Exec(req.Queue, string(t.Owner), 1); err != nil {
					return nil, fmt.Errorf("sqlite store: queue %q: recording a turn: %w", req.Queue, err)
				}
			}
			started = append(started, t)
			ids = append(ids, t.ID)
		}
		if _, err := tx.Stmt(s.queuePruneStmt).Exec(req.Queue); err != nil {
			return nil, fmt.Errorf("sqlite store: queue %q: forgetting turns: %w", req.Queue, err)
		}
		for i, t := range head[n:] {
			msg := task.QueuedMessage(int64(i))
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
