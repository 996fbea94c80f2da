package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/rowcodec"
)

// SetControl writes a fleet switch; see [store.Controls]. Writers lock
// the table against each other, so that versions rise in commit order
// and a reader that saw version v never misses a later write.
func (s *Store) SetControl(ctx context.Context, c store.Control, ifVersion int64) (*store.Control, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	value, atMS, err := rowcodec.ControlArgs(c, time.Now())
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	var version int64
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.opSQL(`LOCK TABLE %[1]s.controls IN SHARE ROW EXCLUSIVE MODE`)); err != nil {
			return err
		}
		var cur int64
		err := tx.QueryRow(ctx, s.opSQL(`SELECT version FROM %[1]s.controls WHERE name = $1`), c.Name).Scan(&cur)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if ifVersion >= 0 && cur != ifVersion {
			return store.ErrControlConflict
		}
		return tx.QueryRow(ctx, s.opSQL(`INSERT INTO %[1]s.controls (name, value, set_by, reason, at_ms, version)
			VALUES ($1, $2, $3, $4, $5, (SELECT coalesce(max(version), 0) + 1 FROM %[1]s.controls))
			ON CONFLICT (name) DO UPDATE SET value = excluded.value, set_by = excluded.set_by, reason = excluded.reason,
				at_ms = excluded.at_ms, version = excluded.version
			RETURNING version`), c.Name, value, c.By, c.Reason, atMS).Scan(&version)
	})
	if errors.Is(err, store.ErrControlConflict) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("postgres store: set control %q: %w", c.Name, err)
	}
	return rowcodec.ControlWritten(c, value, atMS, version), nil
}

// Controls returns the fleet's switches; see [store.Controls].
func (s *Store) Controls(ctx context.Context) (map[string]*store.Control, int64, error) {
	if s.closed() {
		return nil, 0, ErrClosed
	}
	rows, err := s.pool.Query(ctx, s.opSQL(`SELECT name, value, set_by, reason, at_ms, version FROM %[1]s.controls`))
	if err != nil {
		return nil, 0, fmt.Errorf("postgres store: read controls: %w", err)
	}
	defer rows.Close()
	out, top, err := rowcodec.ControlRows(rows)
	if err != nil {
		return nil, 0, fmt.Errorf("postgres store: read controls: %w", err)
	}
	return out, top, nil
}

// ControlsVersion returns the fleet's version; see [store.Controls].
func (s *Store) ControlsVersion(ctx context.Context) (int64, error) {
	if s.closed() {
		return 0, ErrClosed
	}
	var v int64
	if err := s.pool.QueryRow(ctx, s.opSQL(`SELECT coalesce(max(version), 0) FROM %[1]s.controls`)).Scan(&v); err != nil {
		return 0, fmt.Errorf("postgres store: read controls version: %w", err)
	}
	return v, nil
}
