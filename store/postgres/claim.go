package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/rowcodec"
	"github.com/mcptask/mcptask/task"
)

// claimSQL takes over, for runner $1, up to $3 (NULL: all) non-terminal
// tasks: those whose lease ended before $2 (Unix ms, rounded up) or that
// no engine ever held, or, when $4, every one not held by $1. Candidates
// go in the order of the tasks_claim index: never held first, then by end
// of lease, then oldest first; the result comes in the same order. Rows
// locked by another transaction (another instance claiming, an Update) are
// skipped, so two claimers never get the same task. The new lease ends at
// $5 (Unix ms); each claimed task is announced on the change channel $6,
// so that a previous runner still listening learns at once that it lost
// it.
var claimSQL = `WITH cand AS MATERIALIZED (
	SELECT id, lease_expires_at_ms AS old_lease FROM %[1]s.tasks
	WHERE status IN ('working', 'input_required') AND NOT queued
		AND CASE WHEN $4::boolean THEN runner <> $1
			ELSE lease_expires_at_ms IS NULL OR lease_expires_at_ms < $2 END
	ORDER BY lease_expires_at_ms NULLS FIRST, created_at_ms, id
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), upd AS (
	UPDATE %[1]s.tasks AS t SET runner = $1, lease_expires_at_ms = $5
	FROM cand WHERE t.id = cand.id
	RETURNING cand.old_lease, ` + qualified("t", taskColumns) + `
)
SELECT ` + taskColumns + ` FROM upd CROSS JOIN LATERAL pg_notify($6, upd.id) AS n
ORDER BY old_lease NULLS FIRST, created_at_ms, id`

// qualified prefixes each of the comma-separated columns with table.
func qualified(table, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = table + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// Claim atomically takes over non-terminal tasks for req.Runner and
// returns them as they are after the claim: Runner set to req.Runner and
// LeaseExpiresAt to req.Now+req.Lease (at millisecond precision). The
// tasks whose lease ended before req.Now are taken (the stored lease has
// millisecond precision: one ending at 10:00:00.123 is claimable at
// 10:00:00.123456) or, with req.IgnoreLeases, every one held by another
// runner or none, whatever its lease; those never held first, then by end
// of lease, then oldest first. Only Runner and LeaseExpiresAt change.
//
// Claim is one statement whose row selection is FOR UPDATE SKIP LOCKED:
// instances claiming at once split the claimable tasks between them and
// never get the same one, and a task that an Update holds at that moment
// is left for the next Claim. Runner must not be empty, Lease must be
// positive and Now set. A claim changes neither a task's status nor its
// run count, so it records no history event (see [Store.History]): the
// claimer's Update that counts the run records the start.
func (s *Store) Claim(ctx context.Context, req store.ClaimRequest) ([]*task.Task, error) {
	switch {
	case req.Runner == "":
		return nil, errors.New("postgres store: Claim without a Runner")
	case req.Lease <= 0:
		return nil, fmt.Errorf("postgres store: Claim with a non-positive Lease %v", req.Lease)
	case req.Now.IsZero():
		return nil, errors.New("postgres store: Claim without a Now")
	}
	if err := checkText(req.Runner); err != nil {
		return nil, fmt.Errorf("postgres store: Claim: the runner %w", err)
	}
	if s.closed() {
		return nil, ErrClosed
	}
	var limit any // NULL: LIMIT ALL
	if req.Limit > 0 {
		limit = req.Limit
	}
	rows, err := s.pool.Query(ctx, s.claimSQL, req.Runner, rowcodec.CeilMS(req.Now), limit, req.IgnoreLeases,
		req.Now.Add(req.Lease).UnixMilli(), s.channel)
	if err != nil {
		return nil, fmt.Errorf("postgres store: claim: %w", err)
	}
	tasks, err := scanAll(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres store: claim: %w", err)
	}
	return tasks, nil
}

// heartbeatSQL extends to $3 (Unix ms) the leases of the tasks among $2
// that runner $1 holds and that are not terminal, and returns their IDs.
// It changes nothing a watcher cares about, so it announces nothing.
const heartbeatSQL = `UPDATE %[1]s.tasks SET lease_expires_at_ms = $3
	WHERE id = ANY($2) AND runner = $1 AND status IN ('working', 'input_required')
	RETURNING id`

// Heartbeat extends to until (at millisecond precision) the leases of the
// tasks among ids that runner holds and that are not terminal, and returns
// the others (held by another runner or none, ended, deleted or unknown),
// in the order of ids. Only LeaseExpiresAt changes; a lease
// that has ended but that no one took over is extended too. It is one
// UPDATE, which waits for an Update of one of the tasks in progress.
// runner must not be empty and until must be set.
func (s *Store) Heartbeat(ctx context.Context, runner string, ids []task.ID, until time.Time) ([]task.ID, error) {
	switch {
	case runner == "":
		return nil, errors.New("postgres store: Heartbeat without a runner")
	case until.IsZero():
		return nil, errors.New("postgres store: Heartbeat without an until")
	}
	if err := checkText(runner); err != nil {
		return nil, fmt.Errorf("postgres store: Heartbeat: the runner %w", err)
	}
	if s.closed() {
		return nil, ErrClosed
	}
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]string, len(ids))
	for i, id := range ids {
		args[i] = string(id)
	}
	rows, err := s.pool.Query(ctx, s.heartbeatSQL, runner, args, until.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("postgres store: heartbeat: %w", err)
	}
	held := map[task.ID]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("postgres store: heartbeat: %w", err)
		}
		held[task.ID(id)] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres store: heartbeat: %w", err)
	}
	var lost []task.ID
	for _, id := range ids {
		if !held[id] {
			lost = append(lost, id)
		}
	}
	return lost, nil
}
