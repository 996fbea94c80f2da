package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/store/internal/rowcodec"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// Claim candidates, both in the order of tasks_claim: tasks never held
// (lease 0) first, then by how long ago their lease ended, then oldest
// first. LIMIT -1 means no limit.
const (
	// The tasks whose lease ended before now: ? is rowcodec.CeilMS(now).
	claimSQL = `SELECT ` + taskColumns + ` FROM tasks
		WHERE status IN ('working', 'input_required') AND lease_expires_at_ms < ? AND queued = 0
		ORDER BY lease_expires_at_ms, created_at_ms, id LIMIT ?`
	// Every task not held by the claimer, whatever its lease.
	claimAllSQL = `SELECT ` + taskColumns + ` FROM tasks
		WHERE status IN ('working', 'input_required') AND runner <> ? AND queued = 0
		ORDER BY lease_expires_at_ms, created_at_ms, id LIMIT ?`
	takeSQL      = `UPDATE tasks SET runner = ?, lease_expires_at_ms = ? WHERE id = ?`
	heartbeatSQL = `UPDATE tasks SET lease_expires_at_ms = ?
		WHERE id = ? AND runner = ? AND status IN ('working', 'input_required')`
)

// Claim takes over non-terminal tasks for req.Runner; see [store.Store]
// and [store.ClaimRequest]. The tasks whose lease ended before req.Now are
// taken (the stored lease has millisecond precision: one ending at
// 10:00:00.123 is claimable at 10:00:00.123456), those never held first,
// then by end of lease, then oldest first. Only the task's Runner and
// LeaseExpiresAt change. The selection and the update run in one write
// transaction, so concurrent claimers, in this process or in others
// sharing the file, never get the same task. Each claimed task is
// announced (see [Store.Changes]), so that a previous runner of the
// process learns at once that it lost it. Runner must not be empty, Lease
// must be positive and Now set. A claim changes neither a task's status
// nor its run count, so it records no history event (see
// [Store.History]): the claimer's Update that counts the run records the
// start.
func (s *Store) Claim(ctx context.Context, req store.ClaimRequest) ([]*task.Task, error) {
	switch {
	case req.Runner == "":
		return nil, errors.New("sqlite store: Claim without a Runner")
	case req.Lease <= 0:
		return nil, fmt.Errorf("sqlite store: Claim with a non-positive Lease %v", req.Lease)
	case req.Now.IsZero():
		return nil, errors.New("sqlite store: Claim without a Now")
	}
	limit := int64(req.Limit)
	if limit <= 0 {
		limit = -1
	}
	until := leaseMS(req.Now.Add(req.Lease))
	var claimed []*task.Task
	err := s.writeChanges(ctx, func(tx *sql.Tx) ([]task.ID, error) {
		var (
			rows *sql.Rows
			err  error
		)
		if req.IgnoreLeases {
			rows, err = tx.Stmt(s.claimAllStmt).Query(req.Runner, limit)
		} else {
			rows, err = tx.Stmt(s.claimStmt).Query(rowcodec.CeilMS(req.Now), limit)
		}
		if err != nil {
			return nil, fmt.Errorf("sqlite store: claim: %w", err)
		}
		tasks, err := scanAll(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite store: claim: %w", err)
		}
		take := tx.Stmt(s.takeStmt)
		ids := make([]task.ID, len(tasks))
		for i, t := range tasks {
			if _, err := take.Exec(req.Runner, until, string(t.ID)); err != nil {
				return nil, fmt.Errorf("sqlite store: claim task %s: %w", t.ID, err)
			}
			t.Runner = req.Runner
			t.LeaseExpiresAt = rowcodec.OpTime(until)
			ids[i] = t.ID
		}
		claimed = tasks
		return ids, nil
	})
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

// Heartbeat extends to until the leases of the tasks among ids that
// runner holds and that are not terminal, and returns the others (held by
// another runner or none, ended, deleted or unknown) in the order of ids.
// Only LeaseExpiresAt changes, to until at millisecond precision; a lease
// that has ended but that no one took over is extended too. runner must
// not be empty and until must be set.
func (s *Store) Heartbeat(ctx context.Context, runner string, ids []task.ID, until time.Time) ([]task.ID, error) {
	switch {
	case runner == "":
		return nil, errors.New("sqlite store: Heartbeat without a runner")
	case until.IsZero():
		return nil, errors.New("sqlite store: Heartbeat without an until")
	}
	if len(ids) == 0 {
		if s.closed() {
			return nil, ErrClosed
		}
		return nil, nil
	}
	untilMS := leaseMS(until)
	var lost []task.ID
	err := s.writeTouching(ctx, func(tx *sql.Tx) ([]task.ID, error) {
		hb := tx.Stmt(s.heartbeatStmt)
		for _, id := range ids {
			res, err := hb.Exec(untilMS, string(id), runner)
			if err != nil {
				return nil, fmt.Errorf("sqlite store: heartbeat of task %s: %w", id, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return nil, fmt.Errorf("sqlite store: heartbeat of task %s: %w", id, err)
			}
			if n == 0 {
				lost = append(lost, id)
			}
		}
		return ids, nil
	})
	if err != nil {
		return nil, err
	}
	return lost, nil
}
