package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/cursor"
	"github.com/mcptask/mcptask/store/internal/rowcodec"
	"github.com/mcptask/mcptask/task"
)

var _ store.Ledger = (*Store)(nil)

const opColumns = `key, task_id, tool, owner, object, object_version, effect, state, receipt, detail,
	created_at_ms, updated_at_ms, reconciled_at_ms, correlation`

// scanOp reads one operation selected with opColumns.
func scanOp(sc pgx.Row) (*task.Operation, error) { return rowcodec.Operation(sc) }

func (s *Store) opSQL(text string) string { return fmt.Sprintf(text, s.quoted) }

// RecordOperation inserts op unless the ledger holds its key, and returns
// the operation as stored; see [store.Ledger]. A zero CreatedAt or
// UpdatedAt is the current time. Two instances recording one key at once
// both get the row the first inserted.
func (s *Store) RecordOperation(ctx context.Context, op *task.Operation) (*task.Operation, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	o, args, err := rowcodec.RecordArgs(op, time.Now(), "postgres store")
	if err != nil {
		return nil, err
	}
	got, err := scanOp(s.pool.QueryRow(ctx, s.opSQL(`WITH ins AS (
		INSERT INTO %[1]s.operations (`+opColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
		ON CONFLICT (key) DO NOTHING RETURNING `+opColumns+`)
	SELECT `+opColumns+` FROM ins`), args...))
	if errors.Is(err, pgx.ErrNoRows) {
		// The key existed (or was inserted by a transaction that has
		// committed since: ON CONFLICT waited for it).
		got, err = scanOp(s.pool.QueryRow(ctx, s.opSQL(`SELECT `+opColumns+` FROM %[1]s.operations WHERE key = $1`), o.Key))
	}
	if err != nil {
		return nil, fmt.Errorf("postgres store: record operation %q: %w", o.Key, err)
	}
	return got, nil
}

// UpdateOperation reads the operation with key under a row lock, calls fn
// with it and writes back what fn left in it, in one transaction; see
// [store.Ledger].
func (s *Store) UpdateOperation(ctx context.Context, key string, fn func(op *task.Operation) error) (_ *task.Operation, err error) {
	if s.closed() {
		return nil, ErrClosed
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres store: update operation %q: %w", key, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	o, err := scanOp(tx.QueryRow(ctx, s.opSQL(`SELECT `+opColumns+` FROM %[1]s.operations WHERE key = $1 FOR UPDATE`), key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNoOperation
	}
	if err != nil {
		return nil, fmt.Errorf("postgres store: read operation %q: %w", key, err)
	}
	if err := fn(o); err != nil {
		return nil, err
	}
	args, err := rowcodec.UpdateArgs(o, key, "postgres store")
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, s.opSQL(`UPDATE %[1]s.operations SET task_id = $1, tool = $2, owner = $3, object = $4,
		object_version = $5, effect = $6, state = $7, receipt = $8, detail = $9, updated_at_ms = $10,
		reconciled_at_ms = $11, correlation = $12 WHERE key = $13`), args...); err != nil {
		return nil, fmt.Errorf("postgres store: update operation %q: %w", key, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("postgres store: update operation %q: %w", key, err)
	}
	return o, nil
}

func (s *Store) opSigner() cursor.Signer {
	return cursor.Signer{Key: s.cursorKey, Domain: "mcptask/postgres operations cursor"}
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
	where = rowcodec.Numbered(where, 1)
	text := `SELECT ` + opColumns + ` FROM %[1]s.operations`
	if len(where) > 0 {
		text += ` WHERE ` + strings.Join(where, " AND ")
	}
	text += fmt.Sprintf(` ORDER BY created_at_ms DESC, key DESC LIMIT %d`, q.PageLimit()+1)
	rows, err := s.pool.Query(ctx, s.opSQL(text), args...)
	if err != nil {
		return nil, "", fmt.Errorf("postgres store: operations: %w", err)
	}
	defer rows.Close()
	var ops []*task.Operation
	for rows.Next() {
		o, err := scanOp(rows)
		if err != nil {
			return nil, "", fmt.Errorf("postgres store: operations: %w", err)
		}
		ops = append(ops, o)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("postgres store: operations: %w", err)
	}
	ops, next := rowcodec.OperationPage(q, s.opSigner(), ops)
	return ops, next, nil
}

// DeleteOperations deletes the operations last updated before before and
// returns how many it deleted; see [store.Ledger].
func (s *Store) DeleteOperations(ctx context.Context, before time.Time) (int, error) {
	if s.closed() {
		return 0, ErrClosed
	}
	tag, err := s.pool.Exec(ctx, s.opSQL(`DELETE FROM %[1]s.operations WHERE updated_at_ms < $1`), before.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("postgres store: delete operations: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
