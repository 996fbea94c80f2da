package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/history"
	"github.com/mcptask/mcptask/task"
)

// queueLockSpace is the first key of the transaction-level advisory locks
// of the concurrency queues, one per (schema, queue), taken with
// quotaLockSQL: every Create with a cap and every StartQueued of one queue,
// from every instance, count and change it one after the other. A Create
// with both a quota and a cap takes the owner's lock first, StartQueued
// only the queue's, so no two of them wait for each other in a cycle.
// ("mcqq" in ASCII.)
const queueLockSpace int32 = 0x6d637171

// queueCountSQL counts the running and waiting tasks of the queue $1.
// Its conditions are those of the partial index tasks_queue.
const queueCountSQL = `SELECT
	(SELECT count(*) FROM %[1]s.tasks WHERE queue = $1 AND NOT queued AND queue <> ''
		AND status IN ('working', 'input_required')),
	(SELECT count(*) FROM %[1]s.tasks WHERE queue = $1 AND queued AND queue <> ''
		AND status IN ('working', 'input_required'))`

// queueStartSQL starts, for runner $3, the oldest waiting tasks of queue
// $1 while fewer than $2 of its tasks run: lease until $4 (Unix ms),
// updated at $5, each announced on the change channel $6. A waiting task
// that an Update holds (a cancel, say) is skipped, not waited for.
var queueStartSQL = `WITH cand AS MATERIALIZED (
	SELECT id FROM %[1]s.tasks
	WHERE queue = $1 AND queued AND queue <> '' AND status IN ('working', 'input_required')
	ORDER BY created_at_ms, id
	LIMIT greatest($2 - (SELECT count(*) FROM %[1]s.tasks WHERE queue = $1 AND NOT queued AND queue <> ''
		AND status IN ('working', 'input_required')), 0)
	FOR UPDATE SKIP LOCKED
), upd AS (
	UPDATE %[1]s.tasks AS t SET queued = false, runner = $3, lease_expires_at_ms = $4,
		attempts = t.attempts + 1, status_message = '', updated_at_ms = $5
	FROM cand WHERE t.id = cand.id
	RETURNING ` + qualified("t", taskColumns) + `
)
SELECT ` + taskColumns + ` FROM upd CROSS JOIN LATERAL pg_notify($6, upd.id) AS n
ORDER BY created_at_ms, id`

// queueMessagesSQL sets the status message of the first waiting tasks of
// queue $1 to the message of their place: $2[1] for the first, $2[2] for
// the second, and so on (as many as $2 holds).
const queueMessagesSQL = `WITH w AS (
	SELECT id, row_number() OVER (ORDER BY created_at_ms, id) AS place FROM %[1]s.tasks
	WHERE queue = $1 AND queued AND queue <> '' AND status IN ('working', 'input_required')
	ORDER BY created_at_ms, id
	LIMIT cardinality($2::text[])
)
UPDATE %[1]s.tasks AS t SET status_message = ($2::text[])[w.place]
FROM w WHERE t.id = w.id AND t.status_message <> ($2::text[])[w.place]
	AND t.queued AND t.status IN ('working', 'input_required')`

// queueMessages are the messages of queueMessagesSQL: the status message
// of each of the first store.MaxQueueMessages places of a queue.
var queueMessages = func() []string {
	m := make([]string, store.MaxQueueMessages)
	for i := range m {
		m[i] = task.QueuedMessage(int64(i))
	}
	return m
}()

// WaitingQueues returns the queues that have waiting tasks, and how many
// wait in each; see [store.Queuer].
func (s *Store) WaitingQueues(ctx context.Context) (map[string]int, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	rows, err := s.pool.Query(ctx, s.waitingQueuesSQL)
	if err != nil {
		return nil, fmt.Errorf("postgres store: waiting queues: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var q string
		var n int
		if err := rows.Scan(&q, &n); err != nil {
			return nil, fmt.Errorf("postgres store: waiting queues: %w", err)
		}
		out[q] = n
	}
	return out, rows.Err()
}

// StartQueued starts the oldest waiting tasks of req.Queue while fewer than
// req.Max of its tasks run; see [store.Queuer]. It runs in one READ
// COMMITTED transaction under the queue's advisory lock (see
// queueLockSpace), so instances starting tasks of one queue at once never
// overshoot its cap together, and the waiting tasks are taken FOR UPDATE
// SKIP LOCKED.
func (s *Store) StartQueued(ctx context.Context, req store.QueueRequest) (_ []*task.Task, err error) {
	switch {
	case req.Runner == "":
		return nil, errors.New("postgres store: StartQueued without a Runner")
	case req.Queue == "":
		return nil, errors.New("postgres store: StartQueued without a Queue")
	case req.Lease <= 0:
		return nil, fmt.Errorf("postgres store: StartQueued with a non-positive Lease %v", req.Lease)
	case req.Now.IsZero():
		return nil, errors.New("postgres store: StartQueued without a Now")
	}
	for _, v := range []string{req.Runner, req.Queue} {
		if err := checkText(v); err != nil {
			return nil, fmt.Errorf("postgres store: StartQueued: %q %w", v, err)
		}
	}
	if s.closed() {
		return nil, ErrClosed
	}
	// Most rounds find nothing waiting: ask first, without a transaction
	// or a lock, so that an idle queue costs one read.
	var waiting bool
	if err := s.pool.QueryRow(ctx, s.queueAnySQL, req.Queue).Scan(&waiting); err != nil {
		return nil, fmt.Errorf("postgres store: reading queue %q: %w", req.Queue, err)
	}
	if !waiting {
		return nil, nil
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("postgres store: starting queued tasks: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if _, err := tx.Exec(ctx, quotaLockSQL, queueLockSpace, s.schema, req.Queue); err != nil {
		return nil, fmt.Errorf("postgres store: locking queue %q: %w", req.Queue, err)
	}
	rows, err := tx.Query(ctx, s.queueStartSQL, req.Queue, int64(req.Max), req.Runner,
		req.Now.Add(req.Lease).UnixMilli(), req.Now.UnixMilli(), s.channel)
	if err != nil {
		return nil, fmt.Errorf("postgres store: starting queued tasks of %q: %w", req.Queue, err)
	}
	started, err := scanAll(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres store: starting queued tasks of %q: %w", req.Queue, err)
	}
	if len(started) > 0 {
		var te taskEvents
		for _, t := range started {
			before := *t
			before.Queued, before.Runner, before.Attempts = true, "", t.Attempts-1
			te.add(string(t.ID), history.Events(&before, t, req.Now, req.Runner))
		}
		if _, err := tx.Exec(ctx, s.eventsSQL, te.args()...); err != nil {
			return nil, fmt.Errorf("postgres store: recording the history of the started tasks of %q: %w", req.Queue, err)
		}
		if _, err := tx.Exec(ctx, s.queueMessagesSQL, req.Queue, queueMessages); err != nil {
			return nil, fmt.Errorf("postgres store: queue %q: %w", req.Queue, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("postgres store: starting queued tasks of %q: %w", req.Queue, err)
	}
	return started, nil
}

// CountActive counts the unfinished tasks by tool, status and whether
// they wait in a queue; see [store.Counter].
func (s *Store) CountActive(ctx context.Context) ([]store.ActiveCount, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	rows, err := s.pool.Query(ctx, s.countByStatusSQL)
	if err != nil {
		return nil, fmt.Errorf("postgres store: count active: %w", err)
	}
	defer rows.Close()
	var out []store.ActiveCount
	for rows.Next() {
		var c store.ActiveCount
		var status string
		if err := rows.Scan(&c.Tool, &status, &c.Queued, &c.N); err != nil {
			return nil, fmt.Errorf("postgres store: count active: %w", err)
		}
		c.Status = task.Status(status)
		out = append(out, c)
	}
	return out, rows.Err()
}
