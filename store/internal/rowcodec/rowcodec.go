// Package rowcodec reads the rows both SQL backends select alike, from
// any row with a Scan method (database/sql's and pgx's): a task (the
// columns of the tasks table, in the order of the backends'
// taskColumns), an operation of the ledger (opColumns), and the row of a
// tasks/get view (the task, its log's position, its newest operation).
// What differs between the backends is only how they name themselves in
// errors; the SQL stays in each backend.
package rowcodec

import (
	"fmt"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/jsoncol"
	"github.com/mcptask/mcptask/task"
)

// Row is a row to read: *sql.Row, *sql.Rows, pgx.Row or pgx.Rows.
type Row interface{ Scan(dest ...any) error }

// Task reads one task selected with the backend's taskColumns; backend
// ("sqlite store", "postgres store") begins its errors.
func Task(r Row, backend string) (*task.Task, error) {
	var c taskCols
	if err := r.Scan(c.dest()...); err != nil {
		return nil, err
	}
	return c.task(backend)
}

// Operation reads one operation selected with the backend's opColumns.
func Operation(r Row) (*task.Operation, error) {
	var c opCols
	if err := r.Scan(c.dest()...); err != nil {
		return nil, err
	}
	return c.operation()
}

// View reads the row of the backend's viewSQL: the task's columns, its
// log's last sequence number and dropped count, then its newest
// operation's columns (an empty key when it has none).
func View(r Row, backend string) (*store.View, error) {
	var (
		c             taskCols
		last, dropped int64
		o             opCols
	)
	if err := r.Scan(append(append(c.dest(), &last, &dropped), o.dest()...)...); err != nil {
		return nil, err
	}
	t, err := c.task(backend)
	if err != nil {
		return nil, err
	}
	v := &store.View{Task: t, Log: store.LogPageOf(nil, 0, 0, last, dropped)}
	if o.o.Key != "" {
		if v.Operation, err = o.operation(); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// taskCols receives the columns of a task row.
type taskCols struct {
	t                                     task.Task
	id, status                            string
	createdMS, updatedMS, ttlNS, pollNS   int64
	request, result, errJSON, reqs, resps []byte
	leaseMS                               *int64  // NULL (PostgreSQL) or 0 (SQLite) when no engine holds the task
	idemKey                               *string // NULL (PostgreSQL) or "" (SQLite) when the client chose none
	correlation                           string
	startedMS                             int64
	parent, root                          string
}

// dest returns the scan destinations of the columns.
func (c *taskCols) dest() []any {
	t := &c.t
	return []any{&c.id, &t.Owner, &t.Tool, &t.Wire, &c.status, &t.StatusMessage, &c.createdMS, &c.updatedMS,
		&c.ttlNS, &c.pollNS, &c.request, &c.result, &c.errJSON, &c.reqs, &c.resps, &t.InputSeq, &t.Runner, &t.Attempts,
		&c.leaseMS, &c.idemKey, &t.Queue, &t.Queued, &t.ExternalRef, &c.correlation,
		&t.ToolError, &c.startedMS, &c.parent, &c.root}
}

// task returns the task the scanned columns hold.
func (c *taskCols) task(backend string) (*task.Task, error) {
	t := c.t
	t.ID = task.ID(c.id)
	t.Status = task.Status(c.status)
	t.CreatedAt = MSTime(c.createdMS)
	t.LastUpdatedAt = MSTime(c.updatedMS)
	t.TTL = time.Duration(c.ttlNS)
	t.PollInterval = time.Duration(c.pollNS)
	if c.leaseMS != nil {
		t.LeaseExpiresAt = OpTime(*c.leaseMS)
	}
	t.StartedAt = OpTime(c.startedMS)
	t.Parent, t.Root = task.ID(c.parent), task.ID(c.root)
	if c.idemKey != nil {
		t.IdempotencyKey = *c.idemKey
	}
	if len(c.request) > 0 {
		t.Request = c.request
	}
	if len(c.result) > 0 {
		t.Result = c.result
	}
	if err := jsoncol.Decode(&t, c.errJSON, c.reqs, c.resps); err != nil {
		return nil, fmt.Errorf("%s: %w", backend, err)
	}
	var err error
	if t.Correlation, err = jsoncol.DecodeCorrelation(c.correlation); err != nil {
		return nil, fmt.Errorf("%s: task %s: %w", backend, t.ID, err)
	}
	return &t, nil
}

// opCols receives the columns of an operation row.
type opCols struct {
	o                         task.Operation
	taskID, owner, state      string
	created, updated, reconMS int64
	corr                      string
}

// dest returns the scan destinations of the columns.
func (c *opCols) dest() []any {
	o := &c.o
	return []any{&o.Key, &c.taskID, &o.Tool, &c.owner, &o.Object, &o.ObjectVersion, &o.Effect, &c.state,
		&o.Receipt, &o.Detail, &c.created, &c.updated, &c.reconMS, &c.corr}
}

// operation returns the operation the scanned columns hold.
func (c *opCols) operation() (*task.Operation, error) {
	o := c.o
	var err error
	if o.Correlation, err = jsoncol.DecodeCorrelation(c.corr); err != nil {
		return nil, fmt.Errorf("operation %q: %w", o.Key, err)
	}
	o.TaskID, o.Owner, o.State = task.ID(c.taskID), task.Owner(c.owner), task.OpState(c.state)
	o.CreatedAt, o.UpdatedAt, o.ReconciledAt = MSTime(c.created), MSTime(c.updated), OpTime(c.reconMS)
	return &o, nil
}

// MSTime is the UTC time of Unix millisecond ms.
func MSTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// OpTime is MSTime but for 0, the zero time: how both backends store an
// optional time (a ledger time, SQLite's lease) as milliseconds.
func OpTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return MSTime(ms)
}
