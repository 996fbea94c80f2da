package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/rowcodec"
)

// SetControl writes a fleet switch; see [store.Controls]. The single
// writer serializes it with every other write.
func (s *Store) SetControl(ctx context.Context, c store.Control, ifVersion int64) (*store.Control, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	value, atMS, err := rowcodec.ControlArgs(c, storeNow())
	if err != nil {
		return nil, fmt.Errorf("sqlite store: %w", err)
	}
	var version int64
	err = s.write(ctx, func(tx *sql.Tx) error {
		var cur int64
		err := tx.QueryRow(`SELECT version FROM controls WHERE name = ?`, c.Name).Scan(&cur)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite store: set control %q: %w", c.Name, err)
		}
		if ifVersion >= 0 && cur != ifVersion {
			return store.ErrControlConflict
		}
		if err := tx.QueryRow(`SELECT coalesce(max(version), 0) + 1 FROM controls`).Scan(&version); err != nil {
			return fmt.Errorf("sqlite store: set control %q: %w", c.Name, err)
		}
		if _, err := tx.Exec(`INSERT INTO controls (name, value, set_by, reason, at_ms, version) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value, set_by = excluded.set_by, reason = excluded.reason,
				at_ms = excluded.at_ms, version = excluded.version`,
			c.Name, value, c.By, c.Reason, atMS, version); err != nil {
			return fmt.Errorf("sqlite store: set control %q: %w", c.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rowcodec.ControlWritten(c, value, atMS, version), nil
}

// Controls returns the fleet's switches; see [store.Controls].
func (s *Store) Controls(ctx context.Context) (map[string]*store.Control, int64, error) {
	if s.closed() {
		return nil, 0, ErrClosed
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT name, value, set_by, reason, at_ms, version FROM controls`)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite store: read controls: %w", err)
	}
	defer rows.Close()
	out, top, err := rowcodec.ControlRows(rows)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite store: read controls: %w", err)
	}
	return out, top, nil
}

// ControlsVersion returns the fleet's version; see [store.Controls].
func (s *Store) ControlsVersion(ctx context.Context) (int64, error) {
	if s.closed() {
		return 0, ErrClosed
	}
	var v int64
	if err := s.rdb.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM controls`).Scan(&v); err != nil {
		return 0, fmt.Errorf("sqlite store: read controls version: %w", err)
	}
	return v, nil
}
