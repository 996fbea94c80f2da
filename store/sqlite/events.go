package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

var _ store.Events = (*Store)(nil)

const (
	eventColumnsSQL = `e.seq, e.kind, e.task_id, e.tool, e.at_ms, e.status, e.outcome, e.text, e.stream, e.data`

	eventsReadSQL = `SELECT ` + eventColumnsSQL + ` FROM events e
		WHERE e.owner = ? AND e.seq > ? AND e.kind = ? AND (? = '' OR e.task_id = ?) AND (? = '' OR e.tool = ?)
			AND e.at_ms >= ?
		ORDER BY e.seq LIMIT ?`

	eventsSkippedSQL = `SELECT count(*) FROM events e
		WHERE e.owner = ? AND e.seq > ? AND e.kind = ? AND (? = '' OR e.task_id = ?) AND (? = '' OR e.tool = ?)
			AND e.at_ms < ?`

	eventsAppendSQL = `INSERT INTO events (owner, task_id, tool, kind, at_ms, stream, text, data)
		SELECT owner, id, tool, 'output', ?, ?, ?, ? FROM tasks WHERE id = ?`

	subColumnsSQL = `s.id, s.owner, s.name, s.args, s.kind, s.task_id, s.tool, s.url, s.secret, s.old_secret,
		s.old_until_ms, s.expires_ms, s.created_ms, s.refreshed_ms, s.active, s.last_delivery_ms, s.last_error, s.failed_since_ms`
)

// EventHead returns the newest event's position (or the newest pruned);
// see [store.Events].
func (s *Store) EventHead(ctx context.Context) (store.EventPos, error) {
	if s.closed() {
		return store.EventPos{}, ErrClosed
	}
	var seq int64
	err := s.rdb.QueryRowContext(ctx, `SELECT max(coalesce((SELECT max(seq) FROM events), 0),
		(SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'events_floor'))`).Scan(&seq)
	if err != nil {
		return store.EventPos{}, s.noteCorrupt(fmt.Errorf("sqlite store: event head: %w", err))
	}
	return store.EventPos{Seq: seq}, nil
}

// ReadEvents reads a page of an owner's events from one snapshot of the
// file; see [store.Events].
func (s *Store) ReadEvents(ctx context.Context, q store.EventQuery) (*store.EventPage, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	limit := eventLimit(q.Limit)
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite store: read events: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	page := &store.EventPage{Next: store.EventPos{Seq: q.After.Seq}}
	var floor, head int64
	if err := tx.QueryRowContext(ctx, `SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'events_floor'`).Scan(&floor); err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: read events: %w", err))
	}
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM events`).Scan(&head); err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: read events: %w", err))
	}
	after := q.After.Seq
	if after < floor {
		page.Truncated = true
		after = floor
	}
	owner, id, tool := string(q.Owner), string(q.TaskID), q.Tool
	var notBefore int64
	if !q.NotBefore.IsZero() {
		notBefore = q.NotBefore.UnixMilli()
		var skipped int64
		if err := tx.QueryRowContext(ctx, eventsSkippedSQL, owner, after, string(q.Kind), id, id, tool, tool, notBefore).Scan(&skipped); err != nil {
			return nil, s.noteCorrupt(fmt.Errorf("sqlite store: read events: %w", err))
		}
		page.Truncated = page.Truncated || skipped > 0
	}
	rows, err := tx.QueryContext(ctx, eventsReadSQL, owner, after, string(q.Kind), id, id, tool, tool, notBefore, limit+1)
	if err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: read events: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite store: read events: %w", err)
		}
		if len(page.Events) == limit {
			page.More = true
			break
		}
		page.Events = append(page.Events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite store: read events: %w", err)
	}
	switch {
	case len(page.Events) > 0:
		page.Next = page.Events[len(page.Events)-1].Pos
	case !page.More:
		// Nothing more for this query up to the head.
		page.Next = store.EventPos{Seq: max(after, head)}
	}
	return page, nil
}

func eventLimit(n int) int {
	if n <= 0 {
		return store.DefaultEventLimit
	}
	return min(n, store.MaxEventLimit)
}

// scanEvent reads one event selected with eventColumnsSQL.
func scanEvent(sc scanner) (*store.Event, error) {
	var e store.Event
	var kind, status, outcome, id string
	var at int64
	var data sql.NullString
	if err := sc.Scan(&e.Pos.Seq, &kind, &id, &e.Tool, &at, &status, &outcome, &e.Text, &e.Stream, &data); err != nil {
		return nil, err
	}
	e.Kind, e.TaskID, e.Status, e.Outcome = store.EventKind(kind), task.ID(id), task.Status(status), task.Outcome(outcome)
	e.At = time.UnixMilli(at).UTC()
	if data.Valid {
		e.Data = []byte(data.String)
	}
	return &e, nil
}

// AppendEvents appends output events in one write transaction; see
// [store.Events].
func (s *Store) AppendEvents(ctx context.Context, id task.ID, evs []store.OutputEvent) error {
	now := time.Now()
	return s.write(ctx, func(tx *sql.Tx) error {
		for _, e := range evs {
			at := e.Time
			if at.IsZero() {
				at = now
			}
			var data any
			if e.Data != nil {
				data = string(e.Data)
			}
			res, err := tx.Exec(eventsAppendSQL, at.UnixMilli(), e.Stream, toValidText(e.Text), data, string(id))
			if err != nil {
				return fmt.Errorf("sqlite store: append events of %s: %w", id, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return store.ErrNotFound
			}
		}
		return nil
	})
}

// toValidText is s as valid UTF-8.
func toValidText(s string) string { return store.CutLine(s, 1<<20) }

// PutSubscription creates or refreshes a webhook subscription; see
// [store.Events].
func (s *Store) PutSubscription(ctx context.Context, sub *store.Subscription, maxPerOwner int) (created, truncated bool, err error) {
	err = s.write(ctx, func(tx *sql.Tx) error {
		created, truncated = false, false
		// An expired subscription not yet pruned is made anew (its
		// replay starts from the cursor given).
		if _, err := tx.Exec(`DELETE FROM event_subscriptions WHERE id = ? AND owner = ? AND expires_ms <> 0 AND expires_ms <= ?`,
			sub.ID, string(sub.Owner), sub.Refreshed.UnixMilli()); err != nil {
			return err
		}
		var n int
		err := tx.QueryRow(`SELECT count(*) FROM event_subscriptions WHERE id = ?`, sub.ID).Scan(&n)
		if err != nil {
			return err
		}
		if n > 0 {
			if _, err := tx.Exec(`UPDATE event_subscriptions SET secret = ?, old_secret = ?, old_until_ms = ?, expires_ms = ?,
				refreshed_ms = ?, active = 1 WHERE id = ? AND owner = ?`,
				sub.Secret, sub.OldSecret, msOrZero(sub.OldUntil), msOrZero(sub.Expires), sub.Refreshed.UnixMilli(), sub.ID, string(sub.Owner)); err != nil {
				return err
			}
			// Deliveries held back while it was suspended are due again.
			_, err := tx.Exec(`UPDATE event_deliveries SET next_at_ms = min(next_at_ms, ?) WHERE sub_id = ? AND state = 'pending'`,
				sub.Refreshed.UnixMilli(), sub.ID)
			return err
		}
		if maxPerOwner > 0 {
			if err := tx.QueryRow(`SELECT count(*) FROM event_subscriptions WHERE owner = ?`, string(sub.Owner)).Scan(&n); err != nil {
				return err
			}
			if n >= maxPerOwner {
				return store.ErrTooManySubscriptions
			}
		}
		_, err = tx.Exec(`INSERT INTO event_subscriptions (id, owner, name, args, kind, task_id, tool, url, secret, old_secret,
			old_until_ms, expires_ms, created_ms, refreshed_ms, active) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`,
			sub.ID, string(sub.Owner), sub.Name, sub.Args, string(sub.Kind), string(sub.TaskID), sub.Tool, sub.URL,
			sub.Secret, sub.OldSecret, msOrZero(sub.OldUntil), msOrZero(sub.Expires), sub.Created.UnixMilli(), sub.Refreshed.UnixMilli())
		if err != nil {
			return err
		}
		created = true
		if sub.From == nil {
			return nil
		}
		var floor int64
		if err := tx.QueryRow(`SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'events_floor'`).Scan(&floor); err != nil {
			return err
		}
		after := sub.From.Seq
		if after < floor {
			truncated, after = true, floor
		}
		var notBefore int64
		if !sub.FromTime.IsZero() {
			notBefore = sub.FromTime.UnixMilli()
			var skipped int64
			if err := tx.QueryRow(`SELECT count(*) FROM events WHERE owner = ? AND kind = ? AND seq > ? AND at_ms < ?
				AND (? = '' OR task_id = ?) AND (? = '' OR tool = ?)`, string(sub.Owner), string(sub.Kind), after, notBefore,
				string(sub.TaskID), string(sub.TaskID), sub.Tool, sub.Tool).Scan(&skipped); err != nil {
				return err
			}
			truncated = truncated || skipped > 0
		}
		now := sub.Created.UnixMilli()
		_, err = tx.Exec(`INSERT INTO event_deliveries (sub_id, event_seq, next_at_ms, created_ms)
			SELECT ?, seq, ?, ? FROM events WHERE owner = ? AND kind = ? AND seq > ? AND at_ms >= ?
				AND (? = '' OR task_id = ?) AND (? = '' OR tool = ?)
			ON CONFLICT DO NOTHING`, sub.ID, now, now, string(sub.Owner), string(sub.Kind), after, notBefore,
			string(sub.TaskID), string(sub.TaskID), sub.Tool, sub.Tool)
		return err
	})
	if err != nil && !errors.Is(err, store.ErrTooManySubscriptions) {
		err = fmt.Errorf("sqlite store: put subscription: %w", err)
	}
	return created, truncated, err
}

func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func timeOrZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// scanSub reads one subscription selected with subColumnsSQL.
func scanSub(sc scanner) (*store.Subscription, error) {
	var sub store.Subscription
	var owner, kind, id string
	var oldUntil, expires, created, refreshed, lastDelivery, failedSince int64
	var active int
	if err := sc.Scan(&sub.ID, &owner, &sub.Name, &sub.Args, &kind, &id, &sub.Tool, &sub.URL, &sub.Secret, &sub.OldSecret,
		&oldUntil, &expires, &created, &refreshed, &active, &lastDelivery, &sub.LastError, &failedSince); err != nil {
		return nil, err
	}
	sub.Owner = task.Owner(owner)
	sub.Kind, sub.TaskID, sub.Active = store.EventKind(kind), task.ID(id), active == 1
	sub.OldUntil, sub.Expires, sub.Created, sub.Refreshed = timeOrZero(oldUntil), timeOrZero(expires), timeOrZero(created), timeOrZero(refreshed)
	sub.LastDelivery, sub.FailedSince = timeOrZero(lastDelivery), timeOrZero(failedSince)
	return &sub, nil
}

// GetSubscription reads a subscription; see [store.Events].
func (s *Store) GetSubscription(ctx context.Context, owner task.Owner, id string) (*store.Subscription, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	sub, err := scanSub(s.rdb.QueryRowContext(ctx, `SELECT `+subColumnsSQL+` FROM event_subscriptions s WHERE s.id = ? AND s.owner = ?`, id, string(owner)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite store: get subscription: %w", err)
	}
	return sub, nil
}

// DeleteSubscription deletes a subscription and its deliveries; see
// [store.Events].
func (s *Store) DeleteSubscription(ctx context.Context, owner task.Owner, id string) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.Exec(`DELETE FROM event_subscriptions WHERE id = ? AND owner = ?`, id, string(owner))
		if err != nil {
			return fmt.Errorf("sqlite store: delete subscription: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return store.ErrNotFound
		}
		return nil
	})
}

// ClaimDeliveries leases due deliveries; see [store.Events].
func (s *Store) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]*store.Delivery, error) {
	var out []*store.Delivery
	nowMS := now.UnixMilli()
	// A read first: most wake-ups find nothing due, and need no write.
	var due int
	if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM event_deliveries d
		JOIN event_subscriptions s ON s.id = d.sub_id
		WHERE d.state = 'pending' AND d.next_at_ms <= ? AND d.lease_until_ms <= ? AND s.active = 1 LIMIT 1)`, nowMS, nowMS).Scan(&due); err != nil {
		return nil, fmt.Errorf("sqlite store: claim deliveries: %w", err)
	}
	if due == 0 {
		return nil, nil
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		rows, err := tx.Query(`UPDATE event_deliveries SET lease_until_ms = ?, attempts = attempts + 1
			WHERE (sub_id, event_seq) IN (
				SELECT d.sub_id, d.event_seq FROM event_deliveries d JOIN event_subscriptions s ON s.id = d.sub_id
				WHERE d.state = 'pending' AND d.next_at_ms <= ? AND d.lease_until_ms <= ? AND s.active = 1
				ORDER BY d.next_at_ms LIMIT ?)
			RETURNING sub_id, event_seq, attempts, created_ms`, nowMS+lease.Milliseconds(), nowMS, nowMS, limit)
		if err != nil {
			return err
		}
		type claimed struct {
			sub          string
			seq, created int64
			attempts     int
		}
		var cs []claimed
		for rows.Next() {
			var c claimed
			if err := rows.Scan(&c.sub, &c.seq, &c.attempts, &c.created); err != nil {
				rows.Close()
				return err
			}
			cs = append(cs, c)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		subs := map[string]*store.Subscription{}
		for _, c := range cs {
			sub := subs[c.sub]
			if sub == nil {
				sub, err = scanSub(tx.QueryRow(`SELECT `+subColumnsSQL+` FROM event_subscriptions s WHERE s.id = ?`, c.sub))
				if err != nil {
					return err
				}
				subs[c.sub] = sub
			}
			e, err := scanEvent(tx.QueryRow(`SELECT `+eventColumnsSQL+` FROM events e WHERE e.seq = ?`, c.seq))
			if errors.Is(err, sql.ErrNoRows) {
				// Pruned: nothing left to deliver.
				if _, err := tx.Exec(`DELETE FROM event_deliveries WHERE sub_id = ? AND event_seq = ?`, c.sub, c.seq); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			// The watermark: before the oldest delivery of the
			// subscription still pending, at most this event.
			var oldest sql.NullInt64
			if err := tx.QueryRow(`SELECT min(event_seq) FROM event_deliveries WHERE sub_id = ? AND state = 'pending'`, c.sub).Scan(&oldest); err != nil {
				return err
			}
			wm := c.seq
			if oldest.Valid && oldest.Int64 < c.seq {
				wm = oldest.Int64 - 1
			}
			out = append(out, &store.Delivery{Sub: sub, Event: e, Attempts: c.attempts,
				Created: time.UnixMilli(c.created).UTC(), Watermark: store.EventPos{Seq: wm}})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite store: claim deliveries: %w", err)
	}
	return out, nil
}

// FinishDelivery records an attempt's end; see [store.Events]. Only the
// attempt that holds the delivery (its attempt count, pending) records.
func (s *Store) FinishDelivery(ctx context.Context, d *store.Delivery, r store.DeliveryResult) error {
	at := r.At.UnixMilli()
	const mine = `sub_id = ? AND event_seq = ? AND state = 'pending' AND attempts = ?`
	key := []any{d.Sub.ID, d.Event.Pos.Seq, d.Attempts}
	err := s.write(ctx, func(tx *sql.Tx) error {
		var res sql.Result
		var err error
		switch {
		case r.Delivered:
			res, err = tx.Exec(`DELETE FROM event_deliveries WHERE `+mine, key...)
		case r.Dead:
			res, err = tx.Exec(`UPDATE event_deliveries SET state = 'dead', last_error = ?, done_at_ms = ?, lease_until_ms = 0 WHERE `+mine,
				append([]any{r.Error, at}, key...)...)
		default:
			res, err = tx.Exec(`UPDATE event_deliveries SET next_at_ms = ?, last_error = ?, lease_until_ms = 0 WHERE `+mine,
				append([]any{r.Next.UnixMilli(), r.Error}, key...)...)
		}
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // a late attempt: another one holds the delivery
		}
		switch {
		case r.Delivered:
			_, err = tx.Exec(`UPDATE event_subscriptions SET last_delivery_ms = ?, last_error = '', failed_since_ms = 0 WHERE id = ?`, at, d.Sub.ID)
		default:
			suspend := 0
			if r.Dead && r.Suspend {
				suspend = 1
			}
			_, err = tx.Exec(`UPDATE event_subscriptions SET active = CASE WHEN ? = 1 THEN 0 ELSE active END, last_error = ?,
				failed_since_ms = CASE WHEN failed_since_ms = 0 THEN ? ELSE failed_since_ms END WHERE id = ?`, suspend, r.Error, at, d.Sub.ID)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite store: finish delivery: %w", err)
	}
	return nil
}

// DeadLetters lists dead deliveries; see [store.Events].
func (s *Store) DeadLetters(ctx context.Context, limit int) ([]*store.DeadLetter, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT d.sub_id, s.owner, s.url, d.attempts, d.last_error, d.done_at_ms, `+eventColumnsSQL+`
		FROM event_deliveries d JOIN event_subscriptions s ON s.id = d.sub_id JOIN events e ON e.seq = d.event_seq
		WHERE d.state = 'dead' ORDER BY d.done_at_ms DESC LIMIT ?`, eventLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("sqlite store: dead letters: %w", err)
	}
	defer rows.Close()
	var out []*store.DeadLetter
	for rows.Next() {
		var dl store.DeadLetter
		var owner string
		var at int64
		var e store.Event
		var kind, status, outcome, id string
		var eat int64
		var data sql.NullString
		if err := rows.Scan(&dl.SubID, &owner, &dl.URL, &dl.Attempts, &dl.Error, &at,
			&e.Pos.Seq, &kind, &id, &e.Tool, &eat, &status, &outcome, &e.Text, &e.Stream, &data); err != nil {
			return nil, fmt.Errorf("sqlite store: dead letters: %w", err)
		}
		dl.Owner = task.Owner(owner)
		e.Kind, e.TaskID, e.Status, e.Outcome, e.At = store.EventKind(kind), task.ID(id), task.Status(status), task.Outcome(outcome), time.UnixMilli(eat).UTC()
		if data.Valid {
			e.Data = []byte(data.String)
		}
		dl.Event, dl.At = &e, time.UnixMilli(at).UTC()
		out = append(out, &dl)
	}
	return out, rows.Err()
}

// EventCounts counts pending and dead deliveries; see [store.Events].
func (s *Store) EventCounts(ctx context.Context) (pending, dead int64, err error) {
	if s.closed() {
		return 0, 0, ErrClosed
	}
	err = s.rdb.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM event_deliveries WHERE state = 'pending'),
		(SELECT count(*) FROM event_deliveries WHERE state = 'dead')`).Scan(&pending, &dead)
	if err != nil {
		err = fmt.Errorf("sqlite store: event counts: %w", err)
	}
	return pending, dead, err
}

// PruneEvents applies the retention of events and dead letters and ends
// expired subscriptions; see [store.Events].
func (s *Store) PruneEvents(ctx context.Context, before, now time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		b := before.UnixMilli()
		// The oldest events first, in seq order (which is time order but
		// for clock steps): no index on time to keep up on every write.
		var top sql.NullInt64
		rows, err := tx.Query(`SELECT seq, at_ms FROM events ORDER BY seq LIMIT 10000`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var seq, at int64
			if err := rows.Scan(&seq, &at); err != nil {
				rows.Close()
				return err
			}
			if at >= b {
				break
			}
			top = sql.NullInt64{Int64: seq, Valid: true}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		if top.Valid {
			// Events still waiting for a delivery stay until it is made
			// or given up; the floor moves past the rest.
			if _, err := tx.Exec(`DELETE FROM event_deliveries WHERE event_seq <= ? AND state <> 'pending'`, top.Int64); err != nil {
				return err
			}
			res, err := tx.Exec(`DELETE FROM events WHERE seq <= ?
				AND NOT EXISTS (SELECT 1 FROM event_deliveries d WHERE d.event_seq = events.seq AND d.state = 'pending')`, top.Int64)
			if err != nil {
				return err
			}
			n, _ = res.RowsAffected()
			if _, err := tx.Exec(`UPDATE meta SET value = max(CAST(value AS INTEGER), ?) WHERE key = 'events_floor'`, top.Int64); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(`DELETE FROM event_deliveries WHERE state = 'dead' AND done_at_ms < ?`, b); err != nil {
			return err
		}
		_, err = tx.Exec(`DELETE FROM event_subscriptions WHERE expires_ms <> 0 AND expires_ms <= ?`, now.UnixMilli())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite store: prune events: %w", err)
	}
	return int(n), nil
}
