package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

var _ store.Events = (*Store)(nil)

// The event log's statements. Positions are (tx, seq); a reader reads only
// the events of transactions older than every transaction still running
// (xmin), so that no later commit lands before what it read.
const (
	eventColumnsSQL = `e.seq, e.tx::text, e.kind, e.task_id, e.tool, e.at_ms, e.status, e.outcome, e.text, e.stream, e.data`

	eventsFilterSQL = `e.owner = $1 AND e.kind = $2 AND ($3 = '' OR e.task_id = $3) AND ($4 = '' OR e.tool = $4)
		AND (e.tx, e.seq) > ($5::xid8, $6::bigint) AND e.tx < $7::xid8`

	eventsReadSQL = `SELECT ` + eventColumnsSQL + ` FROM %[1]s.events e
		WHERE ` + eventsFilterSQL + ` AND e.at_ms >= $8 ORDER BY e.tx, e.seq LIMIT $9`

	eventsSkippedSQL = `SELECT count(*) FROM %[1]s.events e WHERE ` + eventsFilterSQL + ` AND e.at_ms < $8`

	eventsAppendSQL = `INSERT INTO %[1]s.events (owner, task_id, tool, kind, at_ms, stream, text, data)
		SELECT owner, id, tool, 'output', $1, $2, $3, $4 FROM %[1]s.tasks WHERE id = $5`

	subColumnsSQL = `s.id, s.owner, s.name, s.args, s.kind, s.task_id, s.tool, s.url, s.secret, s.old_secret,
		s.old_until_ms, s.expires_ms, s.created_ms, s.refreshed_ms, s.active, s.last_delivery_ms, s.last_error, s.failed_since_ms`

	// eventsReplaySQL queues the deliveries of a new subscription ($1)
	// for the events its filters select after a position and not older
	// than $8 (ms), skipping those queued already.
	eventsReplaySQL = `INSERT INTO %[1]s.event_deliveries (sub_id, event_seq, event_tx, next_at_ms, created_ms)
		SELECT $9, e.seq, e.tx, $10, $10 FROM %[1]s.events e
		WHERE ` + eventsFilterSQL + ` AND e.at_ms >= $8
		ON CONFLICT DO NOTHING`
)

// xmin returns the oldest transaction still running, as text, in tx's
// snapshot.
func xmin(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (uint64, error) {
	var s string
	if err := q.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text`).Scan(&s); err != nil {
		return 0, err
	}
	return strconv.ParseUint(s, 10, 64)
}

func txText(x uint64) string { return strconv.FormatUint(x, 10) }

// EventHead returns the position after every transaction begun so far
// (pg_snapshot_xmax): the events committed from now on are after it, and
// a reader whose page ends at or past it has read every event committed
// before it; see [store.Events].
func (s *Store) EventHead(ctx context.Context) (store.EventPos, error) {
	if s.closed() {
		return store.EventPos{}, ErrClosed
	}
	var v string
	if err := s.pool.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`).Scan(&v); err != nil {
		return store.EventPos{}, fmt.Errorf("postgres store: event head: %w", err)
	}
	x, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return store.EventPos{}, fmt.Errorf("postgres store: event head: %w", err)
	}
	return store.EventPos{Tx: x}, nil
}

// floor reads the newest position pruned.
func (s *Store) floor(ctx context.Context, tx pgx.Tx) (store.EventPos, error) {
	var v string
	err := tx.QueryRow(ctx, s.opSQL(`SELECT convert_from(value, 'UTF8') FROM %[1]s.meta WHERE key = 'events_floor'`)).Scan(&v)
	if err != nil {
		return store.EventPos{}, err
	}
	a, b, _ := strings.Cut(v, ".")
	x, _ := strconv.ParseUint(a, 10, 64)
	seq, _ := strconv.ParseInt(b, 10, 64)
	return store.EventPos{Tx: x, Seq: seq}, nil
}

func laterOf(a, b store.EventPos) store.EventPos {
	if a.Before(b) {
		return b
	}
	return a
}

// ReadEvents reads a page of an owner's events in one snapshot; see
// [store.Events].
func (s *Store) ReadEvents(ctx context.Context, q store.EventQuery) (_ *store.EventPage, err error) {
	if s.closed() {
		return nil, ErrClosed
	}
	limit := eventLimit(q.Limit)
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("postgres store: read events: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	x, err := xmin(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("postgres store: read events: %w", err)
	}
	fl, err := s.floor(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("postgres store: read events: %w", err)
	}
	page := &store.EventPage{Next: q.After}
	after := q.After
	if after.Before(fl) {
		page.Truncated, after = true, fl
	}
	args := []any{string(q.Owner), string(q.Kind), string(q.TaskID), q.Tool, txText(after.Tx), after.Seq, txText(x)}
	if !q.NotBefore.IsZero() {
		var skipped int64
		if err := tx.QueryRow(ctx, s.opSQL(eventsSkippedSQL), append(args, q.NotBefore.UnixMilli())...).Scan(&skipped); err != nil {
			return nil, fmt.Errorf("postgres store: read events: %w", err)
		}
		page.Truncated = page.Truncated || skipped > 0
	}
	var notBefore int64
	if !q.NotBefore.IsZero() {
		notBefore = q.NotBefore.UnixMilli()
	}
	rows, err := tx.Query(ctx, s.opSQL(eventsReadSQL), append(args, notBefore, limit+1)...)
	if err != nil {
		return nil, fmt.Errorf("postgres store: read events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres store: read events: %w", err)
		}
		if len(page.Events) == limit {
			page.More = true
			break
		}
		page.Events = append(page.Events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres store: read events: %w", err)
	}
	switch {
	case len(page.Events) > 0:
		page.Next = page.Events[len(page.Events)-1].Pos
	case !page.More:
		// Every event of a transaction before xmin has been read.
		page.Next = laterOf(after, store.EventPos{Tx: x})
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
func scanEvent(row pgx.Row) (*store.Event, error) {
	var e store.Event
	var txs, kind, status, outcome, id string
	var at int64
	var data *string
	if err := row.Scan(&e.Pos.Seq, &txs, &kind, &id, &e.Tool, &at, &status, &outcome, &e.Text, &e.Stream, &data); err != nil {
		return nil, err
	}
	x, err := strconv.ParseUint(txs, 10, 64)
	if err != nil {
		return nil, err
	}
	e.Pos.Tx = x
	e.Kind, e.TaskID, e.Status, e.Outcome = store.EventKind(kind), task.ID(id), task.Status(status), task.Outcome(outcome)
	e.At = time.UnixMilli(at).UTC()
	if data != nil {
		e.Data = []byte(*data)
	}
	return &e, nil
}

// pgText is s as a PostgreSQL text value can hold it.
func pgText(s string) string {
	if checkText(s) != nil {
		s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	}
	return s
}

// AppendEvents appends output events in one transaction; see
// [store.Events].
func (s *Store) AppendEvents(ctx context.Context, id task.ID, evs []store.OutputEvent) (err error) {
	if s.closed() {
		return ErrClosed
	}
	now := time.Now()
	b := &pgx.Batch{}
	for _, e := range evs {
		at := e.Time
		if at.IsZero() {
			at = now
		}
		var data any
		if e.Data != nil {
			data = pgText(string(e.Data))
		}
		b.Queue(s.opSQL(eventsAppendSQL), at.UnixMilli(), pgText(e.Stream), pgText(store.CutLine(e.Text, 1<<20)), data, string(id))
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		for range evs {
			tag, err := br.Exec()
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return store.ErrNotFound
			}
		}
		return br.Close()
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		err = fmt.Errorf("postgres store: append events of %s: %w", id, err)
	}
	return err
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

// PutSubscription creates or refreshes a webhook subscription; see
// [store.Events]. It holds its owner's events lock alone (the event
// writers of the owner share it, in the fan-out trigger): its replay sees
// every event committed before it, and every later event sees it. An
// expired subscription not yet pruned is made anew (its replay starts
// from the cursor given).
func (s *Store) PutSubscription(ctx context.Context, sub *store.Subscription, maxPerOwner int) (created, truncated bool, err error) {
	if s.closed() {
		return false, false, ErrClosed
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		created, truncated = false, false
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(1702258035, hashtext($1))`, string(sub.Owner)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.opSQL(`DELETE FROM %[1]s.event_subscriptions WHERE id = $1 AND owner = $2 AND expires_ms <> 0 AND expires_ms <= $3`),
			sub.ID, string(sub.Owner), sub.Refreshed.UnixMilli()); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, s.opSQL(`UPDATE %[1]s.event_subscriptions SET secret = $1, old_secret = $2, old_until_ms = $3,
			expires_ms = $4, refreshed_ms = $5, active = true WHERE id = $6 AND owner = $7`),
			sub.Secret, sub.OldSecret, msOrZero(sub.OldUntil), msOrZero(sub.Expires), sub.Refreshed.UnixMilli(), sub.ID, string(sub.Owner))
		if err != nil {
			return err
		}
		if tag.RowsAffected() > 0 {
			// Deliveries held back while it was suspended are due again.
			_, err := tx.Exec(ctx, s.opSQL(`UPDATE %[1]s.event_deliveries SET next_at_ms = least(next_at_ms, $2)
				WHERE sub_id = $1 AND state = 'pending'`), sub.ID, sub.Refreshed.UnixMilli())
			return err
		}
		if maxPerOwner > 0 {
			var n int
			if err := tx.QueryRow(ctx, s.opSQL(`SELECT count(*) FROM %[1]s.event_subscriptions WHERE owner = $1`), string(sub.Owner)).Scan(&n); err != nil {
				return err
			}
			if n >= maxPerOwner {
				return store.ErrTooManySubscriptions
			}
		}
		_, err = tx.Exec(ctx, s.opSQL(`INSERT INTO %[1]s.event_subscriptions (id, owner, name, args, kind, task_id, tool, url,
			secret, old_secret, old_until_ms, expires_ms, created_ms, refreshed_ms, active)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, true)`),
			sub.ID, string(sub.Owner), pgText(sub.Name), pgText(sub.Args), string(sub.Kind), string(sub.TaskID), pgText(sub.Tool), pgText(sub.URL),
			sub.Secret, sub.OldSecret, msOrZero(sub.OldUntil), msOrZero(sub.Expires), sub.Created.UnixMilli(), sub.Refreshed.UnixMilli())
		if err != nil {
			return err
		}
		created = true
		if sub.From == nil {
			return nil
		}
		from := *sub.From
		fl, err := s.floor(ctx, tx)
		if err != nil {
			return err
		}
		if from.Before(fl) {
			truncated, from = true, fl
		}
		var notBefore int64
		if !sub.FromTime.IsZero() {
			notBefore = sub.FromTime.UnixMilli()
			var skipped int64
			if err := tx.QueryRow(ctx, s.opSQL(eventsSkippedSQL), string(sub.Owner), string(sub.Kind), string(sub.TaskID), sub.Tool,
				txText(from.Tx), from.Seq, maxXid, notBefore).Scan(&skipped); err != nil {
				return err
			}
			truncated = truncated || skipped > 0
		}
		now := sub.Created.UnixMilli()
		_, err = tx.Exec(ctx, s.opSQL(eventsReplaySQL), string(sub.Owner), string(sub.Kind), string(sub.TaskID), sub.Tool,
			txText(from.Tx), from.Seq, maxXid, notBefore, sub.ID, now)
		return err
	})
	if err != nil && !errors.Is(err, store.ErrTooManySubscriptions) {
		err = fmt.Errorf("postgres store: put subscription: %w", err)
	}
	return created, truncated, err
}

// maxXid is a transaction ID above every one: the bound of a replay,
// which reads what the snapshot sees.
const maxXid = "18446744073709551615"

// scanSub reads one subscription selected with subColumnsSQL.
func scanSub(row pgx.Row) (*store.Subscription, error) {
	var sub store.Subscription
	var owner, kind, id string
	var oldUntil, expires, created, refreshed, lastDelivery, failedSince int64
	if err := row.Scan(&sub.ID, &owner, &sub.Name, &sub.Args, &kind, &id, &sub.Tool, &sub.URL, &sub.Secret, &sub.OldSecret,
		&oldUntil, &expires, &created, &refreshed, &sub.Active, &lastDelivery, &sub.LastError, &failedSince); err != nil {
		return nil, err
	}
	sub.Owner, sub.Kind, sub.TaskID = task.Owner(owner), store.EventKind(kind), task.ID(id)
	sub.OldUntil, sub.Expires, sub.Created, sub.Refreshed = timeOrZero(oldUntil), timeOrZero(expires), timeOrZero(created), timeOrZero(refreshed)
	sub.LastDelivery, sub.FailedSince = timeOrZero(lastDelivery), timeOrZero(failedSince)
	return &sub, nil
}

// GetSubscription reads a subscription; see [store.Events].
func (s *Store) GetSubscription(ctx context.Context, owner task.Owner, id string) (*store.Subscription, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	sub, err := scanSub(s.pool.QueryRow(ctx, s.opSQL(`SELECT `+subColumnsSQL+` FROM %[1]s.event_subscriptions s WHERE s.id = $1 AND s.owner = $2`), id, string(owner)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres store: get subscription: %w", err)
	}
	return sub, nil
}

// DeleteSubscription deletes a subscription and its deliveries; see
// [store.Events].
func (s *Store) DeleteSubscription(ctx context.Context, owner task.Owner, id string) error {
	if s.closed() {
		return ErrClosed
	}
	tag, err := s.pool.Exec(ctx, s.opSQL(`DELETE FROM %[1]s.event_subscriptions WHERE id = $1 AND owner = $2`), id, string(owner))
	if err != nil {
		return fmt.Errorf("postgres store: delete subscription: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// ClaimDeliveries leases due deliveries, skipping those another instance
// is claiming (SKIP LOCKED); see [store.Events].
func (s *Store) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]*store.Delivery, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	nowMS := now.UnixMilli()
	// A read first: most wake-ups find nothing due (nor any new
	// subscription to catch up), and need no write.
	var due bool
	if err := s.pool.QueryRow(ctx, s.opSQL(`SELECT EXISTS (SELECT 1 FROM %[1]s.event_deliveries d
			JOIN %[1]s.event_subscriptions s ON s.id = d.sub_id
			WHERE d.state = 'pending' AND d.next_at_ms <= $1 AND d.lease_until_ms <= $1 AND s.active)`), nowMS).Scan(&due); err != nil {
		return nil, fmt.Errorf("postgres store: claim deliveries: %w", err)
	}
	if !due {
		return nil, nil
	}
	var out []*store.Delivery
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = out[:0]
		x, err := xmin(ctx, tx)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, s.opSQL(`UPDATE %[1]s.event_deliveries d SET lease_until_ms = $1, attempts = d.attempts + 1
			FROM (SELECT d2.sub_id, d2.event_seq FROM %[1]s.event_deliveries d2 JOIN %[1]s.event_subscriptions s ON s.id = d2.sub_id
				WHERE d2.state = 'pending' AND d2.next_at_ms <= $2 AND d2.lease_until_ms <= $2 AND s.active
				ORDER BY d2.next_at_ms LIMIT $3 FOR UPDATE OF d2 SKIP LOCKED) c
			WHERE d.sub_id = c.sub_id AND d.event_seq = c.event_seq
			RETURNING d.sub_id, d.event_seq, d.attempts, d.created_ms`), nowMS+lease.Milliseconds(), nowMS, limit)
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
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		subs := map[string]*store.Subscription{}
		for _, c := range cs {
			sub := subs[c.sub]
			if sub == nil {
				if sub, err = scanSub(tx.QueryRow(ctx, s.opSQL(`SELECT `+subColumnsSQL+` FROM %[1]s.event_subscriptions s WHERE s.id = $1`), c.sub)); err != nil {
					return err
				}
				subs[c.sub] = sub
			}
			e, err := scanEvent(tx.QueryRow(ctx, s.opSQL(`SELECT `+eventColumnsSQL+` FROM %[1]s.events e WHERE e.seq = $1`), c.seq))
			if errors.Is(err, pgx.ErrNoRows) {
				if _, err := tx.Exec(ctx, s.opSQL(`DELETE FROM %[1]s.event_deliveries WHERE sub_id = $1 AND event_seq = $2`), c.sub, c.seq); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			// The watermark: before the oldest delivery of the
			// subscription still pending and before any transaction still
			// running, at most this event.
			wm := e.Pos
			var otx *string
			var oseq *int64
			if err := tx.QueryRow(ctx, s.opSQL(`SELECT event_tx::text, event_seq FROM %[1]s.event_deliveries
				WHERE sub_id = $1 AND state = 'pending' ORDER BY event_tx, event_seq LIMIT 1`), c.sub).Scan(&otx, &oseq); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if otx != nil {
				ox, _ := strconv.ParseUint(*otx, 10, 64)
				if o := (store.EventPos{Tx: ox, Seq: *oseq}); o.Before(wm) {
					wm = store.EventPos{Tx: o.Tx, Seq: o.Seq - 1}
				}
			}
			if lim := (store.EventPos{Tx: x}); lim.Before(wm) {
				wm = lim
			}
			out = append(out, &store.Delivery{Sub: sub, Event: e, Attempts: c.attempts,
				Created: time.UnixMilli(c.created).UTC(), Watermark: wm})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres store: claim deliveries: %w", err)
	}
	return out, nil
}

// FinishDelivery records an attempt's end; see [store.Events]. Only the
// attempt that holds the delivery (its attempt count, pending) records:
// a late one, whose lease lapsed and another took the delivery, changes
// nothing.
func (s *Store) FinishDelivery(ctx context.Context, d *store.Delivery, r store.DeliveryResult) error {
	if s.closed() {
		return ErrClosed
	}
	at := r.At.UnixMilli()
	const mine = `sub_id = $1 AND event_seq = $2 AND state = 'pending' AND attempts = $3`
	var q string
	args := []any{d.Sub.ID, d.Event.Pos.Seq, d.Attempts, at}
	switch {
	case r.Delivered:
		q = `WITH d AS (DELETE FROM %[1]s.event_deliveries WHERE ` + mine + ` RETURNING 1)
			UPDATE %[1]s.event_subscriptions SET last_delivery_ms = $4, last_error = '', failed_since_ms = 0
			WHERE id = $1 AND EXISTS (SELECT 1 FROM d)`
	case r.Dead:
		q = `WITH d AS (UPDATE %[1]s.event_deliveries SET state = 'dead', last_error = $5, done_at_ms = $4, lease_until_ms = 0
				WHERE ` + mine + ` RETURNING 1)
			UPDATE %[1]s.event_subscriptions SET active = active AND NOT $6, last_error = $5,
				failed_since_ms = CASE WHEN failed_since_ms = 0 THEN $4 ELSE failed_since_ms END
			WHERE id = $1 AND EXISTS (SELECT 1 FROM d)`
		args = append(args, r.Error, r.Suspend)
	default:
		q = `WITH d AS (UPDATE %[1]s.event_deliveries SET next_at_ms = $6, last_error = $5, lease_until_ms = 0
				WHERE ` + mine + ` RETURNING 1)
			UPDATE %[1]s.event_subscriptions SET last_error = $5,
				failed_since_ms = CASE WHEN failed_since_ms = 0 THEN $4 ELSE failed_since_ms END
			WHERE id = $1 AND EXISTS (SELECT 1 FROM d)`
		args = append(args, r.Error, r.Next.UnixMilli())
	}
	if _, err := s.pool.Exec(ctx, s.opSQL(q), args...); err != nil {
		return fmt.Errorf("postgres store: finish delivery: %w", err)
	}
	return nil
}

// DeadLetters lists dead deliveries; see [store.Events].
func (s *Store) DeadLetters(ctx context.Context, limit int) ([]*store.DeadLetter, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	rows, err := s.pool.Query(ctx, s.opSQL(`SELECT d.sub_id, s.owner, s.url, d.attempts, d.last_error, d.done_at_ms, `+eventColumnsSQL+`
		FROM %[1]s.event_deliveries d JOIN %[1]s.event_subscriptions s ON s.id = d.sub_id JOIN %[1]s.events e ON e.seq = d.event_seq
		WHERE d.state = 'dead' ORDER BY d.done_at_ms DESC LIMIT $1`), eventLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("postgres store: dead letters: %w", err)
	}
	defer rows.Close()
	var out []*store.DeadLetter
	for rows.Next() {
		var dl store.DeadLetter
		var owner, txs, kind, status, outcome, id string
		var at, eat int64
		var e store.Event
		var data *string
		if err := rows.Scan(&dl.SubID, &owner, &dl.URL, &dl.Attempts, &dl.Error, &at,
			&e.Pos.Seq, &txs, &kind, &id, &e.Tool, &eat, &status, &outcome, &e.Text, &e.Stream, &data); err != nil {
			return nil, fmt.Errorf("postgres store: dead letters: %w", err)
		}
		e.Pos.Tx, _ = strconv.ParseUint(txs, 10, 64)
		e.Kind, e.TaskID, e.Status, e.Outcome, e.At = store.EventKind(kind), task.ID(id), task.Status(status), task.Outcome(outcome), time.UnixMilli(eat).UTC()
		if data != nil {
			e.Data = []byte(*data)
		}
		dl.Owner, dl.Event, dl.At = task.Owner(owner), &e, time.UnixMilli(at).UTC()
		out = append(out, &dl)
	}
	return out, rows.Err()
}

// EventCounts counts pending and dead deliveries; see [store.Events].
func (s *Store) EventCounts(ctx context.Context) (pending, dead int64, err error) {
	if s.closed() {
		return 0, 0, ErrClosed
	}
	err = s.pool.QueryRow(ctx, s.opSQL(`SELECT
		count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'dead')
		FROM %[1]s.event_deliveries WHERE state IN ('pending', 'dead')`)).Scan(&pending, &dead)
	if err != nil {
		err = fmt.Errorf("postgres store: event counts: %w", err)
	}
	return pending, dead, err
}

// PruneEvents applies the retention of events, delivered and dead
// deliveries, and ends expired subscriptions; see [store.Events].
func (s *Store) PruneEvents(ctx context.Context, before, now time.Time) (int, error) {
	if s.closed() {
		return 0, ErrClosed
	}
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := before.UnixMilli()
		// Events still waiting for a delivery stay until it is made or
		// given up; the floor moves past the rest.
		var txs *string
		var seq *int64
		err := tx.QueryRow(ctx, s.opSQL(`WITH gone AS (
				DELETE FROM %[1]s.events e WHERE e.seq IN (
					SELECT x.seq FROM %[1]s.events x WHERE x.at_ms < $1
						AND NOT EXISTS (SELECT 1 FROM %[1]s.event_deliveries d WHERE d.event_seq = x.seq AND d.state = 'pending')
					ORDER BY x.seq LIMIT 10000)
				RETURNING e.tx, e.seq),
			dels AS (DELETE FROM %[1]s.event_deliveries d USING gone WHERE d.event_seq = gone.seq)
			SELECT (SELECT tx::text FROM gone ORDER BY tx DESC, seq DESC LIMIT 1),
				(SELECT seq FROM gone ORDER BY tx DESC, seq DESC LIMIT 1), (SELECT count(*) FROM gone)`), b).Scan(&txs, &seq, &n)
		if err != nil {
			return err
		}
		if txs != nil {
			fl, err := s.floor(ctx, tx)
			if err != nil {
				return err
			}
			x, _ := strconv.ParseUint(*txs, 10, 64)
			top := laterOf(fl, store.EventPos{Tx: x, Seq: *seq})
			if _, err := tx.Exec(ctx, s.opSQL(`UPDATE %[1]s.meta SET value = convert_to($1, 'UTF8') WHERE key = 'events_floor'`),
				fmt.Sprintf("%d.%d", top.Tx, top.Seq)); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, s.opSQL(`DELETE FROM %[1]s.event_deliveries WHERE state = 'dead' AND done_at_ms < $1`), b); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.opSQL(`DELETE FROM %[1]s.event_subscriptions WHERE expires_ms <> 0 AND expires_ms <= $1`), now.UnixMilli())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("postgres store: prune events: %w", err)
	}
	return int(n), nil
}
