package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcptask/mcptask/task"
)

// feedPingInterval is how long Changes waits for a notification before it
// checks that its connection is still alive.
const feedPingInterval = 30 * time.Second

// Changes implements [store.ChangeFeed]: it opens a connection of its own
// (outside the pool), LISTENs on the schema's channel and calls fn, in
// the calling goroutine, with the ID of every task that any instance sharing
// the schema updates or claims (creations are not announced), until ctx is done, the store is
// closed, or the connection fails. It then returns ctx's error,
// [ErrClosed], or the connection's error; the caller may call it again,
// and covers with polling what was announced in between.
//
// fn must be quick: PostgreSQL queues the notifications while fn runs,
// and drops the listener if the queue fills. A notification is sent when
// its transaction commits, so fn sees only committed changes; it may see
// the same ID more than once, and announcements made before LISTEN took
// effect are not seen: ready (if not nil) is called once it has.
func (s *Store) Changes(ctx context.Context, ready func(), fn func(task.ID)) (err error) {
	s.feedMu.Lock()
	if s.closed() {
		s.feedMu.Unlock()
		return ErrClosed
	}
	s.feeds.Add(1)
	s.feedMu.Unlock()
	defer s.feeds.Done()

	// Canceled by ctx and by Close.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	defer func() {
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
		case s.closed():
			err = ErrClosed
		}
	}()

	conn, err := pgx.ConnectConfig(lctx, s.pool.Config().ConnConfig)
	if err != nil {
		return fmt.Errorf("postgres store: change feed: connect: %w", err)
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(lctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return fmt.Errorf("postgres store: change feed: listen: %w", err)
	}
	// LISTEN has returned, so it is in effect: PostgreSQL delivers every
	// notification committed from now on.
	if ready != nil {
		ready()
	}
	for {
		wctx, wcancel := context.WithTimeout(lctx, feedPingInterval)
		n, err := conn.WaitForNotification(wctx)
		wcancel()
		if err != nil {
			if lctx.Err() != nil {
				return lctx.Err()
			}
			if !errors.Is(err, context.DeadlineExceeded) || conn.IsClosed() {
				return fmt.Errorf("postgres store: change feed: %w", err)
			}
			// Quiet for a while: make sure the server is still there (a
			// dead peer would otherwise go unnoticed until TCP gives up).
			pctx, pcancel := context.WithTimeout(lctx, feedPingInterval)
			err := conn.Ping(pctx)
			pcancel()
			if err != nil {
				if lctx.Err() != nil {
					return lctx.Err()
				}
				return fmt.Errorf("postgres store: change feed: %w", err)
			}
			continue
		}
		fn(task.ID(n.Payload))
	}
}
