package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

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
// Its conditions are those of the partial index tasks_queue_owner.
const queueCountSQL = `SELECT
	(SELECT count(*) FROM %[1]s.tasks WHERE queue = $1 AND NOT queued AND queue <> ''
		AND status IN ('working', 'input_required')),
	(SELECT count(*) FROM %[1]s.tasks WHERE queue = $1 AND queued AND queue <> ''
		AND status IN ('working', 'input_required'))`

// queueWaiting is the condition of a waiting task of queue $1 (of the
// partial index tasks_queue_owner), for the table or alias t.
func queueWaiting(t string) string {
	return t + `.queue = $1 AND ` + t + `.queued AND ` + t + `.queue <> '' AND ` + t + `.status IN ('working', 'input_required')`
}

// queueTurnsCTE is the common table expressions (of a WITH RECURSIVE)
// that order the waiting tasks of queue $1 by turn (see store.Queuer),
// heads holding the first limit of each owner (no owner has more among
// the first limit overall): a task's turn is its owner's running tasks of
// the queue plus the tasks of its owner waiting ahead of it; lower turns
// first, then the owner served least recently (queue_turns; never
// first), then the oldest. owners walks the distinct owners of the
// waiting tasks, one seek of tasks_queue_owner each (ordered as the index
// is: the range has one queue and queued), and each owner's running
// tasks are counted once, so the cost grows with the owners waiting and
// limit, not with the length of the queue.
func queueTurnsCTE(limit string) string {
	return `owners(o) AS (
	(SELECT owner FROM %[1]s.tasks t WHERE ` + queueWaiting("t") + ` ORDER BY queue, queued, owner LIMIT 1)
	UNION ALL
	SELECT (SELECT owner FROM %[1]s.tasks t WHERE ` + queueWaiting("t") + ` AND t.owner > owners.o
		ORDER BY queue, queued, owner LIMIT 1)
	FROM owners WHERE owners.o IS NOT NULL
), heads AS MATERIALIZED (
	SELECT h.id, h.created_at_ms, rc.n + h.rank AS turn, coalesce(qt.seq, 0) AS served
	FROM owners
	CROSS JOIN LATERAL (SELECT count(*) AS n FROM %[1]s.tasks r WHERE r.queue = $1 AND NOT r.queued AND r.queue <> ''
		AND r.status IN ('working', 'input_required') AND r.owner = owners.o) AS rc
	LEFT JOIN %[1]s.queue_turns qt ON qt.queue = $1 AND qt.owner = owners.o
	CROSS JOIN LATERAL (
		SELECT u.id, u.created_at_ms, row_number() OVER (ORDER BY u.queue, u.queued, u.owner, u.created_at_ms, u.id) - 1 AS rank
		FROM %[1]s.tasks u WHERE ` + queueWaiting("u") + ` AND u.owner = owners.o
		ORDER BY u.queue, u.queued, u.owner, u.created_at_ms, u.id LIMIT ` + limit + `
	) AS h
	WHERE owners.o IS NOT NULL
)`
}

// queueStartSQL starts, for runner $3, waiting tasks of queue $1 in turn
// order while fewer than $2 of its tasks run: lease until $4 (Unix ms),
// updated at $5, each announced on the change channel $6; they are
// returned in turn order. A waiting task that an Update holds (a cancel,
// say) is skipped, not waited for.
var queueStartSQL = `WITH RECURSIVE free AS (
	SELECT greatest($2 - count(*), 0) AS n FROM %[1]s.tasks
	WHERE queue = $1 AND NOT queued AND queue <> '' AND status IN ('working', 'input_required')
), ` + queueTurnsCTE("(SELECT n FROM free)") + `, cand AS MATERIALIZED (
	SELECT l.id, h.turn, h.served FROM (SELECT * FROM heads ORDER BY turn, served, created_at_ms, id) AS h
	CROSS JOIN LATERAL (SELECT t.id FROM %[1]s.tasks t
		WHERE t.id = h.id AND t.queued AND t.queue = $1 AND t.status IN ('working', 'input_required')
		FOR UPDATE SKIP LOCKED) AS l
	ORDER BY h.turn, h.served, h.created_at_ms, h.id
	LIMIT (SELECT n FROM free)
), upd AS (
	UPDATE %[1]s.tasks AS t SET queued = false, runner = $3, lease_expires_at_ms = $4,
		attempts = t.attempts + 1, status_message = '', updated_at_ms = $5, started_at_ms = $5
	FROM cand WHERE t.id = cand.id
	RETURNING ` + qualified("t", taskColumns) + `, cand.turn AS turn, cand.served AS served
)
SELECT ` + taskColumns + ` FROM upd CROSS JOIN LATERAL pg_notify($6, upd.id) AS n
ORDER BY turn, served, created_at_ms, id`

// queueServedSQL records that queue $1 served the owners $2, in that
// order, after the latest it recorded: each owner's seq is the next.
const queueServedSQL = `INSERT INTO %[1]s.queue_turns (queue, owner, seq)
SELECT $1, u.o, m.base + u.ord FROM unnest($2::text[]) WITH ORDINALITY AS u(o, ord),
	(SELECT coalesce(max(seq), 0) AS base FROM %[1]s.queue_turns WHERE queue = $1) AS m
ON CONFLICT (queue, owner) DO UPDATE SET seq = excluded.seq`

// queuePruneSQL forgets the turns of the owners with no task waiting in
// queue $1: one that enqueues again is served as one never served (its
// running tasks still count against it).
var queuePruneSQL = `DELETE FROM %[1]s.queue_turns AS q WHERE q.queue = $1 AND NOT EXISTS (
	SELECT 1 FROM %[1]s.tasks t WHERE ` + queueWaiting("t") + ` AND t.owner = q.owner)`

// queueMessagesSQL sets the status message of the first waiting tasks of
// queue $1, in turn order, to the message of their place: $2[1] for the
// first, $2[2] for the second, and so on (as many as $2 holds).
var queueMessagesSQL = `WITH RECURSIVE ` + queueTurnsCTE("cardinality($2::text[])") + `, w AS (
	SELECT id, row_number() OVER (ORDER BY turn, served, created_at_ms, id) AS place FROM heads
	ORDER BY turn, served, created_at_ms, id
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

// StartQueued starts waiting tasks of req.Queue, taking turns between their
// owners, while fewer than req.Max of its tasks run; see [store.Queuer]. It runs in one READ
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
			before.Queued, before.Runner, before.Attempts, before.StartedAt = true, "", t.Attempts-1, time.Time{}
			te.add(string(t.ID), history.Events(&before, t, req.Now, req.Runner))
		}
		if _, err := tx.Exec(ctx, s.eventsSQL, te.args()...); err != nil {
			return nil, fmt.Errorf("postgres store: recording the history of the started tasks of %q: %w", req.Queue, err)
		}
		if _, err := tx.Exec(ctx, s.queueServedSQL, req.Queue, servedOrder(started)); err != nil {
			return nil, fmt.Errorf("postgres store: queue %q: recording the turns: %w", req.Queue, err)
		}
		if _, err := tx.Exec(ctx, s.queuePruneSQL, req.Queue); err != nil {
			return nil, fmt.Errorf("postgres store: queue %q: forgetting turns: %w", req.Queue, err)
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

// servedOrder returns the owners of the started tasks (in turn order),
// each once, in the order of its last start.
func servedOrder(started []*task.Task) []string {
	last := map[task.Owner]int{}
	for i, t := range started {
		last[t.Owner] = i
	}
	var out []string
	for i, t := range started {
		if last[t.Owner] == i {
			out = append(out, string(t.Owner))
		}
	}
	return out
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
