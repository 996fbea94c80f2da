package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/store/internal/rowcodec"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

var _ store.TaskLogs = (*Store)(nil)

const (
	logHeadInsertSQL = `INSERT INTO %[1]s.task_log_heads (task_id, last_seq, lines, bytes, dropped)
	SELECT id, 0, 0, 0, 0 FROM %[1]s.tasks WHERE id = $1 ON CONFLICT (task_id) DO NOTHING`
	logHeadLockSQL = `SELECT last_seq, lines, bytes, dropped FROM %[1]s.task_log_heads WHERE task_id = $1 FOR UPDATE`
	logInsertSQL   = `INSERT INTO %[1]s.task_log_lines (task_id, seq, at_ms, stream, text)
	SELECT $1, * FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[])`
	logOldestSQL = `SELECT seq, octet_length(text) FROM %[1]s.task_log_lines
	WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`
	logTrimSQL    = `DELETE FROM %[1]s.task_log_lines WHERE task_id = $1 AND seq <= $2`
	logHeadSetSQL = `UPDATE %[1]s.task_log_heads SET last_seq = $2, lines = $3, bytes = $4, dropped = $5
	WHERE task_id = $1`
	logHeadSQL = `SELECT coalesce(h.last_seq, 0), coalesce(h.dropped, 0)
	FROM %[1]s.tasks t LEFT JOIN %[1]s.task_log_heads h ON h.task_id = t.id WHERE t.id = $1`
	logReadSQL = `SELECT seq, at_ms, stream, text FROM %[1]s.task_log_lines
	WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`
)

// logHead is a task's log as its head row says.
type logHead struct {
	last, lines, bytes, dropped int64
}

// AppendLog appends b's lines to the task's log in one transaction,
// dropping the oldest lines beyond b.Limits; see [store.TaskLogs].
// Appends to one task's log take turns on its head row.
func (s *Store) AppendLog(ctx context.Context, id task.ID, b store.LogBatch) (err error) {
	if s.closed() {
		return ErrClosed
	}
	lim := b.Limits.WithDefaults()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres store: append to the log of %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if _, err := tx.Exec(ctx, s.opSQL(logHeadInsertSQL), string(id)); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23503" { // the task was deleted meanwhile
			return store.ErrNotFound
		}
		return fmt.Errorf("postgres store: append to the log of %s: %w", id, err)
	}
	var h logHead
	err = tx.QueryRow(ctx, s.opSQL(logHeadLockSQL), string(id)).Scan(&h.last, &h.lines, &h.bytes, &h.dropped)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("postgres store: append to the log of %s: %w", id, err)
	}
	lines, dropped := store.PlanAppend(b, h.last, time.Now())
	evs := b.Events
	h.last += max(b.Skipped, 0) + int64(len(b.Lines))
	h.dropped += dropped
	if len(lines) > 0 {
		seqs, ats := make([]int64, len(lines)), make([]int64, len(lines))
		streams, texts := make([]string, len(lines)), make([]string, len(lines))
		for i, l := range lines {
			seqs[i], ats[i], streams[i], texts[i] = l.Seq, l.Time.UnixMilli(), l.Stream, l.Text
			h.lines++
			h.bytes += int64(len(l.Text))
		}
		if _, err := tx.Exec(ctx, s.opSQL(logInsertSQL), string(id), seqs, ats, streams, texts); err != nil {
			return fmt.Errorf("postgres store: append to the log of %s: %w", id, err)
		}
		for _, l := range lines {
			// Emitted values before the line go first: one order.
			for len(evs) > 0 && !evs[0].Time.IsZero() && !evs[0].Time.After(l.Time) {
				if err := s.appendEvent(ctx, tx, id, evs[0]); err != nil {
					return err
				}
				evs = evs[1:]
			}
			if b.Publishes(l.Stream) {
				if _, err := tx.Exec(ctx, s.opSQL(eventsAppendSQL), l.Time.UnixMilli(), l.Stream, l.Text, nil, string(id)); err != nil {
					return fmt.Errorf("postgres store: publish the log of %s: %w", id, err)
				}
			}
		}
	}
	if h.lines > int64(lim.MaxLines) || h.bytes > int64(lim.MaxBytes) {
		if err := s.trimLog(ctx, tx, id, &h, lim); err != nil {
			return fmt.Errorf("postgres store: trim the log of %s: %w", id, err)
		}
	}
	if _, err := tx.Exec(ctx, s.opSQL(logHeadSetSQL), string(id), h.last, h.lines, h.bytes, h.dropped); err != nil {
		return fmt.Errorf("postgres store: append to the log of %s: %w", id, err)
	}
	for _, e := range evs {
		if err := s.appendEvent(ctx, tx, id, e); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres store: append to the log of %s: %w", id, err)
	}
	return nil
}

// trimLog drops the oldest lines of the log until h fits lim. It reads
// the sizes of the oldest lines in chunks, so that a small trim does not
// read the whole log.
func (s *Store) trimLog(ctx context.Context, tx pgx.Tx, id task.ID, h *logHead, lim store.LogLimits) error {
	var cut, n, size int64
	over := func() bool { return h.lines-n > int64(lim.MaxLines) || h.bytes-size > int64(lim.MaxBytes) }
	for over() {
		chunk := max(h.lines-n-int64(lim.MaxLines), 0) + 256
		rows, err := tx.Query(ctx, s.opSQL(logOldestSQL), string(id), cut, chunk)
		if err != nil {
			return err
		}
		read := 0
		for over() && rows.Next() {
			var seq, bytes int64
			if err := rows.Scan(&seq, &bytes); err != nil {
				rows.Close()
				return err
			}
			cut, n, size, read = seq, n+1, size+bytes, read+1
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if read == 0 {
			break // nothing left to drop
		}
	}
	if n == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, s.opSQL(logTrimSQL), string(id), cut); err != nil {
		return err
	}
	h.lines, h.bytes, h.dropped = h.lines-n, h.bytes-size, h.dropped+n
	return nil
}

// ReadLog reads a page of the task's log from one snapshot (a read-only
// repeatable-read transaction); see [store.TaskLogs].
func (s *Store) ReadLog(ctx context.Context, id task.ID, after int64, limit int) (*store.LogPage, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	if limit <= 0 {
		// The position only: one statement.
		var last, dropped int64
		err := s.pool.QueryRow(ctx, s.opSQL(logHeadSQL), string(id)).Scan(&last, &dropped)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, store.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("postgres store: read the log of %s: %w", id, err)
		}
		return store.LogPageOf(nil, max(after, 0), 0, last, dropped), nil
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("postgres store: read the log of %s: %w", id, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var last, dropped int64
	err = tx.QueryRow(ctx, s.opSQL(logHeadSQL), string(id)).Scan(&last, &dropped)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres store: read the log of %s: %w", id, err)
	}
	after = max(after, 0)
	limit = store.LogReadLimit(limit)
	var lines []store.LogLine
	if limit > 0 && after < last {
		rows, err := tx.Query(ctx, s.opSQL(logReadSQL), string(id), after, limit+1)
		if err != nil {
			return nil, fmt.Errorf("postgres store: read the log of %s: %w", id, err)
		}
		for rows.Next() {
			var (
				l  store.LogLine
				ms int64
			)
			if err := rows.Scan(&l.Seq, &ms, &l.Stream, &l.Text); err != nil {
				rows.Close()
				return nil, fmt.Errorf("postgres store: read the log of %s: %w", id, err)
			}
			l.Time = rowcodec.MSTime(ms)
			lines = append(lines, l)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("postgres store: read the log of %s: %w", id, err)
		}
	}
	return store.LogPageOf(lines, after, limit, last, dropped), nil
}

// appendEvent appends the output event e of the task id in tx.
func (s *Store) appendEvent(ctx context.Context, tx pgx.Tx, id task.ID, e store.OutputEvent) error {
	at := e.Time
	if at.IsZero() {
		at = time.Now()
	}
	var data any
	if e.Data != nil {
		data = pgText(string(e.Data))
	}
	if _, err := tx.Exec(ctx, s.opSQL(eventsAppendSQL), at.UnixMilli(), pgText(e.Stream), pgText(store.CutLine(e.Text, 1<<20)), data, string(id)); err != nil {
		return fmt.Errorf("postgres store: append events of %s: %w", id, err)
	}
	return nil
}
