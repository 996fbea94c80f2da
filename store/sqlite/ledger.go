package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/cursor"
	"github.com/mcptask/mcptask/store/internal/rowcodec"
	"github.com/mcptask/mcptask/task"
)

var _ store.Ledger = (*Store)(nil)

const opColumns = `key, task_id, tool, owner, object, object_version, effect, state, receipt, detail,
	created_at_ms, updated_at_ms, reconciled_at_ms, correlation`

const opInsertSQL = `INSERT INTO operations (` + opColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING`

const opUpdateSQL = `UPDATE operations SET task_id = ?, tool = ?, owner = ?, object = ?, object_version = ?,
	effect = ?, state = ?, receipt = ?, detail = ?, updated_at_ms = ?, reconciled_at_ms = ?, correlation = ? WHERE key = ?`

const opGetSQL = `SELECT ` + opColumns + ` FROM operations WHERE key = ?`

// scanOp reads one operation selected with opColumns.
func scanOp(sc scanner) (*task.Operation, error) { return rowcodec.Operation(sc) }

// RecordOperation inserts op unless the ledger holds its key, and returns
// the operation as stored; see [store.Ledger]. A zero CreatedAt or
// UpdatedAt is the current time.
func (s *Store) RecordOperation(ctx context.Context, op *task.Operation) (*task.Operation, error) {
	o, args, err := rowcodec.RecordArgs(op, time.Now(), "sqlite store")
	if err != nil {
		return nil, err
	}
	var out *task.Operation
	err = s.writeTouching(ctx, func(tx *sql.Tx) ([]task.ID, error) {
		if _, err := tx.Exec(opInsertSQL, args...); err != nil {
			return nil, fmt.Errorf("sqlite store: record operation %q: %w", o.Key, err)
		}
		got, err := scanOp(tx.QueryRow(opGetSQL, o.Key))
		if err != nil {
			return nil, fmt.Errorf("sqlite store: record operation %q: %w", o.Key, err)
		}
		out = got
		return []task.ID{o.TaskID, got.TaskID}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateOperation reads the operation with key, calls fn with it and
// writes back what fn left in it, in one transaction; see [store.Ledger].
// fn runs on the store's writer goroutine: it must be quick and must not
// call the Store's write methods.
func (s *Store) UpdateOperation(ctx context.Context, key string, fn func(op *task.Operation) error) (*task.Operation, error) {
	var out *task.Operation
	err := s.writeTouching(ctx, func(tx *sql.Tx) ([]task.ID, error) {
		o, err := scanOp(tx.QueryRow(opGetSQL, key))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, store.ErrNoOperation
		}
		if err != nil {
			return nil, fmt.Errorf("sqlite store: read operation %q: %w", key, err)
		}
		before := o.TaskID
		if err := callOpFn(fn, o); err != nil {
			return nil, err
		}
		args, err := rowcodec.UpdateArgs(o, key, "sqlite store")
		if err != nil {
			return nil, err
		}
		if _, err := tx.Exec(opUpdateSQL, args...); err != nil {
			return nil, fmt.Errorf("sqlite store: update operation %q: %w", key, err)
		}
		out = o
		return []task.ID{before, o.TaskID}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Store) opSigner() cursor.Signer {
	return cursor.Signer{Key: s.cursorKey, Domain: "mcptask/sqlite operations cursor"}
}

// Operations returns a page of the operations q selects, newest first
// (ties broken by key); see [store.Ledger]. Cursors are signed for the
// selection of q.
func (s *Store) Operations(ctx context.Context, q store.OperationQuery) ([]*task.Operation, string, error) {
	if s.closed() {
		return nil, "", ErrClosed
	}
	where, args, err := rowcodec.OperationFilter(q, s.opSigner())
	if err != nil {
		return nil, "", err
	}
	text := `SELECT ` + opColumns + ` FROM operations`
	if len(where) > 0 {
		text += ` WHERE ` + strings.Join(where, " AND ")
	}
	text += ` ORDER BY created_at_ms DESC, key DESC LIMIT ?`
	args = append(args, q.PageLimit()+1)
	// Prepared once per variant of the filters (a tasks/get reads its
	// task's latest operation with one of them).
	st, err := s.readStmt(ctx, text)
	if err != nil {
		return nil, "", s.noteCorrupt(fmt.Errorf("sqlite store: operations: %w", err))
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, "", s.noteCorrupt(fmt.Errorf("sqlite store: operations: %w", err))
	}
	defer rows.Close()
	var ops []*task.Operation
	for rows.Next() {
		o, err := scanOp(rows)
		if err != nil {
			return nil, "", fmt.Errorf("sqlite store: operations: %w", err)
		}
		ops = append(ops, o)
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.noteCorrupt(fmt.Errorf("sqlite store: operations: %w", err))
	}
	ops, next := rowcodec.OperationPage(q, s.opSigner(), ops)
	return ops, next, nil
}

// DeleteOperations deletes the operations last updated before before and
// returns how many it deleted; see [store.Ledger].
func (s *Store) DeleteOperations(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.Exec(`DELETE FROM operations WHERE updated_at_ms < ?`, before.UnixMilli())
		if err != nil {
			return fmt.Errorf("sqlite store: delete operations: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// callOpFn calls fn with o, turning a panic into a *fnPanic that
// writeChanges re-raises in the caller's goroutine.
func callOpFn(fn func(*task.Operation) error, o *task.Operation) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &fnPanic{value: v}
		}
	}()
	return fn(o)
}
