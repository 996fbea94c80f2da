package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mcptask/mcptask/store/internal/rowcodec"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

var _ store.TaskLogs = (*Store)(nil)

const (
	logHeadSQL = `SELECT coalesce(h.last_seq, 0), coalesce(h.lines, 0), coalesce(h.bytes, 0), coalesce(h.dropped, 0)
	FROM tasks t LEFT JOIN task_log_heads h ON h.task_id = t.id WHERE t.id = ?`
	logInsertSQL = `INSERT INTO task_log_lines (task_id, seq, at_ms, stream, text)
	SELECT ?, json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'), json_extract(value, '$[3]')
	FROM json_each(?)`
	logOldestSQL = `SELECT seq, length(CAST(text AS BLOB)) FROM task_log_lines WHERE task_id = ? ORDER BY seq`
	logTrimSQL   = `DELETE FROM task_log_lines WHERE task_id = ? AND seq <= ?`
	logUpsertSQL = `INSERT INTO task_log_heads (task_id, last_seq, lines, bytes, dropped) VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (task_id) DO UPDATE SET last_seq = excluded.last_seq, lines = excluded.lines,
		bytes = excluded.bytes, dropped = excluded.dropped`
	logReadSQL = `SELECT seq, at_ms, stream, text FROM task_log_lines WHERE task_id = ? AND seq > ? ORDER BY seq LIMIT ?`
)

// logHead is a task's log as its head row says.
type logHead struct {
	last, lines, bytes, dropped int64
}

// AppendLog appends b's lines to the task's log in one write transaction
// (grouped with the other writes waiting at the same moment), dropping
// the oldest lines beyond b.Limits; see [store.TaskLogs].
func (s *Store) AppendLog(ctx context.Context, id task.ID, b store.LogBatch) error {
	lim := b.Limits.WithDefaults()
	now := time.Now()
	return s.writeTouching(ctx, func(tx *sql.Tx) ([]task.ID, error) {
		var h logHead
		err := tx.QueryRow(logHeadSQL, string(id)).Scan(&h.last, &h.lines, &h.bytes, &h.dropped)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, store.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("sqlite store: append to the log of %s: %w", id, err)
		}
		lines, dropped := store.PlanAppend(b, h.last, now)
		evs := b.Events
		h.last += max(b.Skipped, 0) + int64(len(b.Lines))
		h.dropped += dropped
		if len(lines) > 0 {
			// One statement for the whole batch: the lines as a JSON
			// array of [seq, at_ms, stream, text].
			if _, err := tx.Exec(logInsertSQL, string(id), linesJSON(lines)); err != nil {
				return nil, fmt.Errorf("sqlite store: append to the log of %s: %w", id, err)
			}
			for _, l := range lines {
				h.lines++
				h.bytes += int64(len(l.Text))
				// Emitted values before the line go first: one order.
				for len(evs) > 0 && !evs[0].Time.IsZero() && !evs[0].Time.After(l.Time) {
					if err := appendEvent(tx, id, evs[0], now); err != nil {
						return nil, err
					}
					evs = evs[1:]
				}
				if b.Publishes(l.Stream) {
					if _, err := tx.Exec(eventsAppendSQL, l.Time.UnixMilli(), l.Stream, l.Text, nil, string(id)); err != nil {
						return nil, fmt.Errorf("sqlite store: publish the log of %s: %w", id, err)
					}
				}
			}
		}
		if h.lines > int64(lim.MaxLines) || h.bytes > int64(lim.MaxBytes) {
			if err := trimLog(tx, id, &h, lim); err != nil {
				return nil, fmt.Errorf("sqlite store: trim the log of %s: %w", id, err)
			}
		}
		if _, err := tx.Exec(logUpsertSQL, string(id), h.last, h.lines, h.bytes, h.dropped); err != nil {
			return nil, fmt.Errorf("sqlite store: append to the log of %s: %w", id, err)
		}
		for _, e := range evs {
			if err := appendEvent(tx, id, e, now); err != nil {
				return nil, err
			}
		}
		return []task.ID{id}, nil
	})
}

// trimLog drops the oldest lines of the log until h fits lim.
func trimLog(tx *sql.Tx, id task.ID, h *logHead, lim store.LogLimits) error {
	rows, err := tx.Query(logOldestSQL, string(id))
	if err != nil {
		return err
	}
	var cut, n, size int64
	for (h.lines-n > int64(lim.MaxLines) || h.bytes-size > int64(lim.MaxBytes)) && rows.Next() {
		var seq, bytes int64
		if err := rows.Scan(&seq, &bytes); err != nil {
			rows.Close()
			return err
		}
		cut, n, size = seq, n+1, size+bytes
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if _, err := tx.Exec(logTrimSQL, string(id), cut); err != nil {
		return err
	}
	h.lines, h.bytes, h.dropped = h.lines-n, h.bytes-size, h.dropped+n
	return nil
}

// ReadLog reads a page of the task's log from one snapshot of the file;
// see [store.TaskLogs].
func (s *Store) ReadLog(ctx context.Context, id task.ID, after int64, limit int) (*store.LogPage, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	if limit <= 0 {
		// The position only: one statement, prepared once (tasks/get
		// reads it).
		var h logHead
		st, err := s.readStmt(ctx, logHeadSQL)
		if err == nil {
			err = st.QueryRowContext(ctx, string(id)).Scan(&h.last, &h.lines, &h.bytes, &h.dropped)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return nil, store.ErrNotFound
		}
		if err != nil {
			return nil, s.noteCorrupt(fmt.Errorf("sqlite store: read the log of %s: %w", id, err))
		}
		return store.LogPageOf(nil, max(after, 0), 0, h.last, h.dropped), nil
	}
	tx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: read the log of %s: %w", id, err))
	}
	defer func() { _ = tx.Rollback() }()
	var h logHead
	err = tx.QueryRowContext(ctx, logHeadSQL, string(id)).Scan(&h.last, &h.lines, &h.bytes, &h.dropped)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: read the log of %s: %w", id, err))
	}
	after = max(after, 0)
	limit = store.LogReadLimit(limit)
	var lines []store.LogLine
	if limit > 0 && after < h.last {
		rows, err := tx.QueryContext(ctx, logReadSQL, string(id), after, limit+1)
		if err != nil {
			return nil, s.noteCorrupt(fmt.Errorf("sqlite store: read the log of %s: %w", id, err))
		}
		defer rows.Close()
		for rows.Next() {
			var (
				l  store.LogLine
				ms int64
			)
			if err := rows.Scan(&l.Seq, &ms, &l.Stream, &l.Text); err != nil {
				return nil, s.noteCorrupt(fmt.Errorf("sqlite store: read the log of %s: %w", id, err))
			}
			l.Time = rowcodec.MSTime(ms)
			lines = append(lines, l)
		}
		if err := rows.Err(); err != nil {
			return nil, s.noteCorrupt(fmt.Errorf("sqlite store: read the log of %s: %w", id, err))
		}
	}
	return store.LogPageOf(lines, after, limit, h.last, h.dropped), nil
}

// linesJSON encodes lines as a JSON array of [seq, at_ms, stream, text]
// (the texts valid UTF-8, as store.PlanAppend leaves them).
func linesJSON(lines []store.LogLine) string {
	n := 2
	for _, l := range lines {
		n += len(l.Text) + len(l.Stream) + 48
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, l := range lines {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, l.Seq, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, l.Time.UnixMilli(), 10)
		b = append(b, ',')
		b = appendJSONString(b, l.Stream)
		b = append(b, ',')
		b = appendJSONString(b, l.Text)
		b = append(b, ']')
	}
	return string(append(b, ']'))
}

// appendJSONString appends s (valid UTF-8) as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// appendEvent appends the output event e of the task id in tx.
func appendEvent(tx *sql.Tx, id task.ID, e store.OutputEvent, now time.Time) error {
	at := e.Time
	if at.IsZero() {
		at = now
	}
	var data any
	if e.Data != nil {
		data = string(e.Data)
	}
	if _, err := tx.Exec(eventsAppendSQL, at.UnixMilli(), e.Stream, toValidText(e.Text), data, string(id)); err != nil {
		return fmt.Errorf("sqlite store: append events of %s: %w", id, err)
	}
	return nil
}
