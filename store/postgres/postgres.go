// Package postgres is the PostgreSQL backend of mcptask's [store.Store],
// built on github.com/jackc/pgx/v5 and its connection pool. Any number of
// mcptask instances may share one database: every method is one
// transaction, and the methods that several instances run against the
// same tasks at once are written for it (Update locks the task's row,
// Claim and DeleteExpired skip the rows other instances have locked).
//
// A store lives in one PostgreSQL schema ("mcptask" unless
// Options.Schema says otherwise), created by [Open] if it is missing. The
// schema is versioned in its schema_migrations table; Open migrates an
// older one and refuses a newer one, under an advisory lock so that
// instances starting at once on an empty database all come up.
//
// A write method that returns nil has committed its change (durable as
// the server's synchronous_commit setting makes commits; "on" by default).
//
// *Store implements [store.ChangeFeed] with LISTEN/NOTIFY: Update and
// Claim announce the IDs of the tasks they change (and Delete the ID it
// deletes) in the same transaction, on a channel of the schema's own. This has a price under
// concurrent writes: PostgreSQL commits the transactions that notify one
// at a time, holding a database-wide lock through each commit's WAL flush,
// so those commits never share a flush the way plain commits do. That is
// why Create announces nothing (nobody waits for a task that does not
// exist yet), nor do Heartbeat and DeleteExpired. *Store also
// implements [store.Pinger], [store.Browser] and [store.Historian].
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mcptask/mcptask/store/internal/rowcodec"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/history"
	"github.com/mcptask/mcptask/task"
)

// Options configures [Open]. A nil *Options, like the zero value, means
// the defaults.
type Options struct {
	// Logger receives the store's log records: schema creation and
	// migrations, failed rollbacks. Nil discards them.
	Logger *slog.Logger

	// Schema is the PostgreSQL schema that holds the store's tables,
	// created if missing. Instances that share a schema share their
	// tasks; stores in different schemas of one database are independent
	// (tests use a schema each). Empty means [DefaultSchema].
	Schema string

	// MaxConns caps the connection pool. Zero means the DSN's
	// pool_max_conns if it has one, else [DefaultMaxConns]. A running
	// Changes call holds one more connection, outside the pool.
	MaxConns int32
}

// Defaults of [Options] and of [Store.List].
const (
	// DefaultSchema is the schema used when Options.Schema is empty.
	DefaultSchema = "mcptask"
	// DefaultMaxConns is the pool size used when neither Options.MaxConns
	// nor the DSN sets one. Commits wait for the WAL flush on the server,
	// so more connections than CPUs pay off under concurrent writes.
	DefaultMaxConns = 16
	// DefaultConnectTimeout bounds each connection attempt when the DSN
	// sets no connect_timeout: a server restarting can accept a
	// connection and never answer it, which would hang the request
	// waiting for it (and the lease renewals) for as long as TCP lets it.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultListLimit is the page size List uses when asked for limit <= 0.
	DefaultListLimit = 100
	// MaxListLimit caps the page size of List; a larger limit gets pages
	// of this size, with a cursor to the rest.
	MaxListLimit = 1000
	// deleteExpiredBatch is the number of tasks DeleteExpired deletes per
	// transaction.
	deleteExpiredBatch = 500
)

// ErrClosed is returned by the methods of a [Store] after Close.
var ErrClosed = errors.New("postgres store: closed")

// Store is a [store.Store] and a [store.ChangeFeed] kept in one schema of
// a PostgreSQL database. It is safe for concurrent use. Create it with
// [Open] and release it with [Store.Close].
type Store struct {
	pool    *pgxpool.Pool
	log     *slog.Logger
	schema  string
	channel string // LISTEN/NOTIFY channel of the schema

	cursorKey []byte

	// SQL texts with the schema filled in.
	getSQL, listFirstSQL, listNextSQL, listActiveSQL, byKeySQL, countActiveSQL string
	viewSQL                                                                    string // see view.go
	insertSQL, lockSQL, updateSQL, deleteSQL, deleteExpiredSQL                 string
	claimSQL, heartbeatSQL                                                     string
	queueCountSQL, queueStartSQL, queueMessagesSQL, waitingQueuesSQL           string
	queueAnySQL, countByStatusSQL                                              string
	queueServedSQL, queuePruneSQL                                              string
	createSQL, eventsSQL, historySQL, existsSQL                                string
	quoted                                                                     string // the schema, quoted

	ctx    context.Context // canceled by Close; ends running Changes calls
	cancel context.CancelFunc
	feedMu sync.Mutex     // orders feeds.Add after Close's cancel
	feeds  sync.WaitGroup // running Changes calls

	closeOnce sync.Once
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.ChangeFeed = (*Store)(nil)
	_ store.Pinger     = (*Store)(nil)
)

// Open connects to the PostgreSQL database at dsn (a URL such as
// postgres://user@host:5432/db?sslmode=disable, or key=value pairs; see
// pgxpool.ParseConfig), creates the schema if it is missing and migrates
// it to the current version. opts may be nil. The database must use the
// UTF8 encoding.
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if err := checkSchemaName(o.Schema); err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	if o.MaxConns < 0 {
		return nil, fmt.Errorf("postgres store: negative MaxConns %d", o.MaxConns)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgconn's parse errors never include the password.
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	switch {
	case o.MaxConns > 0:
		cfg.MaxConns = o.MaxConns
	case !dsnSetsMaxConns(dsn):
		cfg.MaxConns = DefaultMaxConns
	}
	cfg.MinConns = min(cfg.MinConns, cfg.MaxConns)
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}

	quoted := pgx.Identifier{o.Schema}.Sanitize()
	s := &Store{
		log:    o.Logger.With("schema", o.Schema),
		schema: o.Schema,
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	if err := s.open(ctx, quoted); err != nil {
		s.pool.Close()
		s.cancel()
		return nil, fmt.Errorf("postgres store: open schema %s: %w", quoted, err)
	}
	return s, nil
}

// dsnSetsMaxConns reports whether dsn sets pool_max_conns itself.
func dsnSetsMaxConns(dsn string) bool {
	// pgxpool.ParseConfig takes the pool settings out of the parameters
	// it parses; pgconn's parser leaves them in.
	c, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return false
	}
	_, ok := c.RuntimeParams["pool_max_conns"]
	return ok
}

func (s *Store) open(ctx context.Context, quoted string) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	var enc string
	if err := conn.QueryRow(ctx, `SHOW server_encoding`).Scan(&enc); err != nil {
		return err
	}
	if enc != "UTF8" {
		return fmt.Errorf("the database's encoding is %s; mcptask needs UTF8", enc)
	}
	m := &migrator{schema: s.schema, quoted: quoted, log: s.log}
	if err := m.migrate(ctx, conn.Conn()); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT key, value FROM %s.meta WHERE key IN ('cursor_key', 'channel')`, quoted))
	if err != nil {
		return err
	}
	defer rows.Close()
	var channel []byte
	for rows.Next() {
		var k string
		var v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		switch k {
		case "cursor_key":
			s.cursorKey = v
		case "channel":
			channel = v
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(s.cursorKey) == 0 || len(channel) == 0 {
		return errors.New("the meta table lacks the cursor key or the channel name")
	}
	s.channel = string(channel)

	q := func(sql string) string { return fmt.Sprintf(sql, quoted) }
	s.quoted = quoted
	s.getSQL = q(`SELECT ` + taskColumns + ` FROM %[1]s.tasks WHERE id = $1`)
	s.viewSQL = q(viewSQL)
	s.byKeySQL = q(`SELECT ` + taskColumns + ` FROM %[1]s.tasks WHERE key_owner = $1 AND idempotency_key = $2`)
	s.lockSQL = q(`SELECT ` + taskColumns + ` FROM %[1]s.tasks WHERE id = $1 FOR UPDATE`)
	s.listFirstSQL = q(`SELECT ` + taskColumns + ` FROM %[1]s.tasks WHERE owner = $1
		ORDER BY created_at_ms DESC, id DESC LIMIT $2`)
	s.listNextSQL = q(`SELECT ` + taskColumns + ` FROM %[1]s.tasks WHERE owner = $1 AND (created_at_ms, id) < ($2, $3)
		ORDER BY created_at_ms DESC, id DESC LIMIT $4`)
	s.listActiveSQL = q(`SELECT ` + taskColumns + ` FROM %[1]s.tasks WHERE status IN ('working', 'input_required')
		ORDER BY created_at_ms, id`)
	s.countActiveSQL = q(countActiveSQL)
	s.insertSQL = q(insertSQL)
	s.createSQL = q(createSQL)
	s.eventsSQL = q(eventsSQL)
	s.historySQL = q(historySQL)
	s.existsSQL = q(`SELECT 1 FROM %[1]s.tasks WHERE id = $1`)
	s.updateSQL = q(updateSQL)
	s.deleteSQL = q(`WITH del AS (DELETE FROM %[1]s.tasks WHERE id = $1 RETURNING id)
SELECT pg_notify($2, del.id) FROM del`)
	s.deleteExpiredSQL = q(deleteExpiredSQL)
	s.claimSQL = q(claimSQL)
	s.heartbeatSQL = q(heartbeatSQL)
	s.queueCountSQL = q(queueCountSQL)
	s.queueStartSQL = q(queueStartSQL)
	s.queueMessagesSQL = q(queueMessagesSQL)
	s.queueServedSQL = q(queueServedSQL)
	s.queuePruneSQL = q(queuePruneSQL)
	s.queueAnySQL = q(`SELECT EXISTS (SELECT 1 FROM %[1]s.tasks
		WHERE queue = $1 AND queued AND queue <> '' AND status IN ('working', 'input_required'))`)
	s.waitingQueuesSQL = q(`SELECT queue, count(*) FROM %[1]s.tasks
		WHERE queued AND queue <> '' AND status IN ('working', 'input_required') GROUP BY queue`)
	s.countByStatusSQL = q(`SELECT tool, status, queued, count(*) FROM %[1]s.tasks
		WHERE status IN ('working', 'input_required') GROUP BY tool, status, queued`)
	return nil
}

// Schema returns the name of the schema that holds the store's tables.
func (s *Store) Schema() string { return s.schema }

// Channel returns the LISTEN/NOTIFY channel on which the store's writes
// announce task IDs (see [Store.Changes]).
func (s *Store) Channel() string { return s.channel }

// Close ends running Changes calls, waits for them to return, and closes
// the connection pool, waiting for the connections in use to be
// released. It is safe to call more than once and from several
// goroutines; it always returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.feedMu.Lock()
		s.cancel()
		s.feedMu.Unlock()
		s.feeds.Wait()
		s.pool.Close()
	})
	return nil
}

func (s *Store) closed() bool { return s.ctx.Err() != nil }

// Ping implements [store.Pinger]: it pings the server over a connection of
// the pool, or returns [ErrClosed] after Close.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed() {
		return ErrClosed
	}
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres store: ping: %w", err)
	}
	return nil
}

// Create durably inserts t, or returns [store.ErrExists] if its ID is
// taken, or a *[store.DuplicateError] holding the existing task if
// t.IdempotencyKey is set and t.Owner already has a task with that key
// (the ID is checked first). The store keeps timestamps at millisecond
// precision in UTC. JSON fields are kept byte for byte; Error.Data and
// the values of the input maps must be valid JSON, and no text may hold
// a NUL byte or invalid UTF-8.
//
// Without a quota the insert is one statement: one round trip to the
// server when the task is new.
//
// With a quota (opts.MaxActive > 0), when t.Owner already has
// opts.MaxActive or more working or input_required tasks, Create inserts
// nothing and returns [store.ErrTooManyActive]; an idempotent retry gets
// its *[store.DuplicateError] whatever the count. The idempotency lookup,
// the count and the insert then run in one transaction that holds an
// advisory lock of the owner (see quotaLockSpace): the Creates with a
// quota of one owner, from every instance sharing the schema, run one
// after the other, so they never overshoot the quota, while those of
// different owners do not wait for each other. A Create without a quota
// takes no lock: one running at the same moment may still add a task
// beyond the quota. A Create with a quota takes two round trips to the
// server when the task is inserted, like Update.
func (s *Store) Create(ctx context.Context, t *task.Task, opts store.CreateOptions) error {
	if t == nil {
		return errors.New("postgres store: Create of a nil task")
	}
	if s.closed() {
		return ErrClosed
	}
	if opts.MaxConcurrent > 0 && t.Queue == "" {
		return errors.New("postgres store: Create with MaxConcurrent of a task without a Queue")
	}
	if opts.MaxActive > 0 || opts.MaxConcurrent > 0 {
		return s.createLocked(ctx, t, opts)
	}
	r, err := encodeTask(t)
	if err != nil {
		return err
	}
	args := append(r.InsertArgs(), eventArrays(history.Events(nil, r.EventTask(), storeNow(), store.InstanceOf(ctx)))...)
	// A conflict names a row that a concurrent Delete may remove before
	// we read it; then the insert is tried again.
	for range 3 {
		var id string
		err := s.pool.QueryRow(ctx, s.createSQL, args...).Scan(&id)
		if err == nil {
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("postgres store: insert task %s: %w", r.ID, err)
		}
		if err := s.conflict(ctx, r); err != nil {
			return err
		}
	}
	return fmt.Errorf("postgres store: insert task %s: conflicting tasks kept vanishing", r.ID)
}

// conflict explains why the insert of r did nothing: [store.ErrExists]
// if its ID is taken, a *[store.DuplicateError] if its (owner,
// idempotency key) is, or nil if the conflicting task is gone by now
// (deleted meanwhile), when the caller may insert again.
func (s *Store) conflict(ctx context.Context, r *row) error {
	if _, err := s.Get(ctx, task.ID(r.ID)); err == nil {
		return store.ErrExists
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if r.IdempotencyKey != "" {
		existing, err := scanTask(s.pool.QueryRow(ctx, s.byKeySQL, r.KeyOwner, r.IdempotencyKey))
		if err == nil {
			return &store.DuplicateError{Task: existing}
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("postgres store: read the task of idempotency key %q: %w", r.IdempotencyKey, err)
		}
	}
	return nil
}

// quotaLockSpace is the first key of the transaction-level advisory locks
// that Create with a quota takes, one per (schema, owner): the second key
// is hashtext(schema || ':' || owner). Locks keyed by two int4 values and
// locks keyed by one bigint (migrationLockKey) are distinct key spaces in
// PostgreSQL, so these never collide with the migration lock. Two owners
// whose names hash alike, or another application using the same first
// key, only wait for each other: correctness never depends on the lock
// being exclusive to one owner. ("mcpq" in ASCII.)
const quotaLockSpace int32 = 0x6d637071

// quotaLockSQL takes the advisory lock of the owner $3 of schema $2 ($1 is
// quotaLockSpace) until the end of the transaction.
const quotaLockSQL = `SELECT pg_advisory_xact_lock($1, hashtext($2::text || ':' || $3::text))`

// countActiveSQL counts the working and input_required tasks of an owner
// ($1), up to a cap ($2): Create with a quota only needs to know whether
// the quota is reached, so an owner far over it (after the quota was
// lowered) costs no more than one at it. Its status condition is the one of the
// partial index tasks_owner_active, so the count never reads the owner's
// finished tasks.
const countActiveSQL = `SELECT count(*) FROM (SELECT 1 FROM %[1]s.tasks
	WHERE owner = $1 AND status IN ('working', 'input_required') LIMIT $2) AS active`

// createLocked is Create with a quota (opts.MaxActive > 0), a queue's
// cap (opts.MaxConcurrent > 0), or both.
func (s *Store) createLocked(ctx context.Context, t *task.Task, opts store.CreateOptions) error {
	r, err := encodeTask(t)
	if err != nil {
		return err
	}
	// As in Create, a conflict may name a task deleted before we read it;
	// then the whole transaction, count included, is tried again.
	for range 3 {
		inserted, queued, err := s.createLockedTx(ctx, r, opts)
		if err == nil && queued != nil {
			t.Queued, t.Runner, t.LeaseExpiresAt, t.Attempts, t.StartedAt = true, "", time.Time{}, 0, time.Time{}
			t.StatusMessage = queued.StatusMessage
		}
		if err != nil || inserted {
			return err
		}
		if err := s.conflict(ctx, r); err != nil {
			return err
		}
	}
	return fmt.Errorf("postgres store: insert task %s: conflicting tasks kept vanishing", r.ID)
}

// createLockedTx runs the transaction of createLocked once: under the
// owner's advisory lock with a quota, then the queue's with a cap (always
// in that order, so two Creates never wait for each other's lock), the
// idempotency lookup, the counts and the insert. It returns false and no
// error when the insert found its ID or idempotency key taken (by a Create
// without a lock, or a task created meanwhile): the caller finds out which
// with conflict. queued is the row inserted when the task waits in its
// queue.
func (s *Store) createLockedTx(ctx context.Context, r *row, opts store.CreateOptions) (inserted bool, queued *row, err error) {
	maxActive := opts.MaxActive
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, nil, fmt.Errorf("postgres store: insert task %s: %w", r.ID, err)
	}
	// As in Update: a connection left inside the transaction (refused
	// task, error) is rolled back here.
	inTx := false
	defer func() {
		if inTx {
			s.rollback(conn)
		}
		conn.Release()
	}()

	// READ COMMITTED whatever the server's default_transaction_isolation:
	// each statement after the lock then sees every task committed by the
	// owner's previous lock holders. Under REPEATABLE READ the snapshot
	// would date from the lock statement's start, before the wait.
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	locks := 0
	if maxActive > 0 {
		b.Queue(quotaLockSQL, quotaLockSpace, s.schema, r.Owner)
		locks++
	}
	if opts.MaxConcurrent > 0 {
		b.Queue(quotaLockSQL, queueLockSpace, s.schema, r.Queue)
		locks++
	}
	if r.IdempotencyKey != "" {
		b.Queue(s.byKeySQL, r.KeyOwner, r.IdempotencyKey)
	}
	if maxActive > 0 {
		b.Queue(s.countActiveSQL, r.Owner, int64(maxActive))
	}
	if opts.MaxConcurrent > 0 {
		b.Queue(s.queueCountSQL, r.Queue)
	}
	br := conn.SendBatch(ctx, b)
	inTx = true
	var (
		existing         *task.Task
		active           int64
		running, waiting int64
	)
	_, err = br.Exec()
	for range locks {
		if err == nil {
			_, err = br.Exec()
		}
	}
	if err == nil && r.IdempotencyKey != "" {
		existing, err = scanTask(br.QueryRow())
		if errors.Is(err, pgx.ErrNoRows) {
			existing, err = nil, nil
		}
	}
	if err == nil && maxActive > 0 {
		err = br.QueryRow().Scan(&active)
	}
	if err == nil && opts.MaxConcurrent > 0 {
		err = br.QueryRow().Scan(&running, &waiting)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return false, nil, fmt.Errorf("postgres store: insert task %s: %w", r.ID, err)
	case existing != nil:
		return false, nil, &store.DuplicateError{Task: existing}
	case maxActive > 0 && active >= int64(maxActive):
		return false, nil, store.ErrTooManyActive
	}
	ins := r
	if opts.MaxConcurrent > 0 && (waiting > 0 || running >= int64(opts.MaxConcurrent)) {
		queued = r.InQueue(waiting)
		ins = queued
	}

	b = &pgx.Batch{}
	evs := history.Events(nil, ins.EventTask(), storeNow(), store.InstanceOf(ctx))
	b.Queue(s.createSQL, append(ins.InsertArgs(), eventArrays(evs)...)...)
	b.Queue("COMMIT")
	br = conn.SendBatch(ctx, b)
	var id string
	err = br.QueryRow().Scan(&id)
	inserted = err == nil
	if errors.Is(err, pgx.ErrNoRows) {
		err = nil // a conflict: ON CONFLICT DO NOTHING leaves the transaction usable
	}
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// If COMMIT itself failed on a broken connection, the outcome
		// is unknown, as for any write.
		return false, nil, fmt.Errorf("postgres store: insert task %s: %w", r.ID, err)
	}
	inTx = false
	if tag.String() != "COMMIT" {
		return false, nil, fmt.Errorf("postgres store: insert task %s: the transaction was rolled back (%s)", r.ID, tag)
	}
	if !inserted {
		queued = nil
	}
	return inserted, queued, nil
}

// GetByKey returns the task of owner's key scope with the idempotency
// key key; see [store.Store].
func (s *Store) GetByKey(ctx context.Context, owner task.Owner, key string) (*task.Task, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	if key == "" {
		return nil, store.ErrNotFound
	}
	t, err := scanTask(s.pool.QueryRow(ctx, s.byKeySQL, string(owner.KeyScope()), key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres store: get task by key: %w", err)
	}
	return t, nil
}

// Get returns the task with the given ID, or [store.ErrNotFound].
func (s *Store) Get(ctx context.Context, id task.ID) (*task.Task, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	t, err := scanTask(s.pool.QueryRow(ctx, s.getSQL, string(id)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres store: get task %s: %w", id, err)
	}
	return t, nil
}

// Update reads the task with the given ID, calls fn with it and writes
// back what fn left in it, in one transaction that holds the task's row
// lock (SELECT ... FOR UPDATE) from the read to the commit: Updates of
// one task, from any instance, run one after the other; Updates of
// different tasks do not wait for each other. Nothing is retried. fn runs
// in the caller's goroutine while the row is locked and a connection of
// the pool is held, so it must be quick; it must not call Update or Delete
// on the same task (that would wait for itself). It may call Get, which
// takes another connection: when every connection of the pool is held by
// an Update whose fn calls Get, they wait until their contexts end. A
// panic in fn rolls back and is re-raised. Changing the
// task's ID is an error. The returned task is what a following Get
// returns.
//
// Update takes two round trips to the server when fn succeeds: BEGIN
// with the locking read, then the write, its change announcement and
// COMMIT.
func (s *Store) Update(ctx context.Context, id task.ID, fn func(t *task.Task) error) (_ *task.Task, err error) {
	if s.closed() {
		return nil, ErrClosed
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres store: update task %s: %w", id, err)
	}
	// A connection left inside a transaction (by an error, or a panic in
	// fn) is rolled back here; Release destroys one that cannot be.
	inTx := false
	defer func() {
		if inTx {
			s.rollback(conn)
		}
		conn.Release()
	}()

	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(s.lockSQL, string(id))
	br := conn.SendBatch(ctx, b)
	inTx = true
	_, err = br.Exec()
	var t *task.Task
	if err == nil {
		t, err = scanTask(br.QueryRow())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres store: read task %s: %w", id, err)
	}

	before := *t
	if err := fn(t); err != nil {
		return nil, err
	}
	if t.ID != id {
		return nil, fmt.Errorf("postgres store: Update of task %s: fn changed the ID to %q", id, t.ID)
	}
	r, err := encodeTask(t)
	if err != nil {
		return nil, err
	}
	b = &pgx.Batch{}
	b.Queue(s.updateSQL, append(r.UpdateArgs(), s.channel)...)
	evs := history.Events(&before, t, storeNow(), store.InstanceOf(ctx))
	if len(evs) > 0 {
		var te taskEvents
		te.add(r.ID, evs)
		b.Queue(s.eventsSQL, te.args()...)
	}
	b.Queue("COMMIT")
	br = conn.SendBatch(ctx, b)
	var got string
	err = br.QueryRow().Scan(&got)
	if err == nil && len(evs) > 0 {
		_, err = br.Exec()
	}
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// The row is locked, so it cannot have vanished: any error here
		// is the server's or the connection's. If COMMIT itself failed
		// on a broken connection, the outcome is unknown.
		return nil, fmt.Errorf("postgres store: update task %s: %w", id, err)
	}
	inTx = false
	if tag.String() != "COMMIT" {
		return nil, fmt.Errorf("postgres store: update task %s: the transaction was rolled back (%s)", id, tag)
	}
	t.CreatedAt = rowcodec.MSTime(r.CreatedMS)
	t.LastUpdatedAt = rowcodec.MSTime(r.UpdatedMS)
	t.LeaseExpiresAt = rowcodec.OpTime(r.LeaseMS)
	return t, nil
}

// rollback ends the transaction open on conn, if any. If that fails the
// connection is closed, so that the pool discards it instead of handing
// out a connection in an unknown state.
func (s *Store) rollback(conn *pgxpool.Conn) {
	if conn.Conn().IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		s.log.Warn("postgres store: rollback failed; dropping the connection", "err", err)
		_ = conn.Conn().Close(ctx)
	}
}

// List returns up to limit tasks of owner, newest first (ties broken by
// ID), after the position of cursor. A limit <= 0 means
// [DefaultListLimit], and limits above [MaxListLimit] are lowered to it.
// Cursors are signed: one that this schema did not issue for this owner
// gives [store.ErrBadCursor]. A cursor is valid on every instance sharing
// the schema, across restarts, and when the task it points after is
// deleted.
func (s *Store) List(ctx context.Context, owner task.Owner, cursor string, limit int) ([]*task.Task, string, error) {
	if s.closed() {
		return nil, "", ErrClosed
	}
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	var (
		rows pgx.Rows
		err  error
	)
	if cursor == "" {
		rows, err = s.pool.Query(ctx, s.listFirstSQL, owner, limit+1)
	} else {
		createdMS, id, cerr := s.parseCursor(owner, cursor)
		if cerr != nil {
			return nil, "", cerr
		}
		rows, err = s.pool.Query(ctx, s.listNextSQL, owner, createdMS, id, limit+1)
	}
	if err != nil {
		return nil, "", fmt.Errorf("postgres store: list: %w", err)
	}
	tasks, err := scanAll(rows)
	if err != nil {
		return nil, "", fmt.Errorf("postgres store: list: %w", err)
	}
	next := ""
	if len(tasks) > limit {
		tasks = tasks[:limit]
		next = s.makeCursor(owner, tasks[limit-1])
	}
	return tasks, next, nil
}

// ListActive returns every working or input_required task, oldest first.
// It is not part of [store.Store] (the engine claims unfinished tasks with
// Claim): tools and tests use it to see the unfinished work of a schema.
func (s *Store) ListActive(ctx context.Context) ([]*task.Task, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	rows, err := s.pool.Query(ctx, s.listActiveSQL)
	if err != nil {
		return nil, fmt.Errorf("postgres store: list active: %w", err)
	}
	tasks, err := scanAll(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres store: list active: %w", err)
	}
	return tasks, nil
}

// deleteExpiredSQL deletes up to $2 terminal tasks whose retention ended
// before $1 (Unix ns), skipping those that another transaction has locked
// (an instance sweeping at the same moment, or an Update), and returns how
// many it deleted.
const deleteExpiredSQL = `WITH del AS (
	DELETE FROM %[1]s.tasks WHERE id IN (
		SELECT id FROM %[1]s.tasks t WHERE expires_at_ns < $1
			AND (t.parent_id = '' OR NOT EXISTS (SELECT 1 FROM %[1]s.tasks p
				WHERE p.id = t.parent_id AND p.status IN ('working', 'input_required')))
		ORDER BY expires_at_ns LIMIT $2
		FOR UPDATE SKIP LOCKED)
	RETURNING 1
)
SELECT count(*) FROM del`

// DeleteExpired deletes the terminal tasks whose retention ended before now
// and returns how many it deleted. Working and input_required tasks are
// never deleted, nor the children of those (a re-run of the parent's
// work must find the steps it finished). It deletes in batches, one transaction each, skipping
// the rows locked by others: instances sweeping at once share the work
// instead of waiting for each other, and no task is counted twice. A
// task being updated at that moment is left for the next sweep.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	if s.closed() {
		return 0, ErrClosed
	}
	total := 0
	for {
		var n int
		if err := s.pool.QueryRow(ctx, s.deleteExpiredSQL, rowcodec.UnixNano(now), deleteExpiredBatch).Scan(&n); err != nil {
			return total, fmt.Errorf("postgres store: delete expired: %w", err)
		}
		total += n
		if n < deleteExpiredBatch {
			return total, nil
		}
	}
}

// Delete removes the task with the given ID and everything it holds, or
// returns [store.ErrNotFound]; it implements [store.Deleter] (the owner's
// tasks/delete). It waits for an Update of the task in progress. The
// deletion is announced on the change feed (NOTIFY in the same statement),
// so that the engines of every process waiting for the task find it gone.
// The operations of a ledger are not touched.
//
// The row is gone logically at once: no query of any session sees it
// after the commit. Its bytes stay in the table's heap file (a dead tuple)
// until VACUUM (autovacuum, by default) reclaims the space, and in the
// WAL segments and any backups until they are recycled: an operator who
// must erase results physically runs VACUUM on the tasks table and keeps
// WAL archives and backups under the same retention as the data.
func (s *Store) Delete(ctx context.Context, id task.ID) error {
	if s.closed() {
		return ErrClosed
	}
	tag, err := s.pool.Exec(ctx, s.deleteSQL, string(id), s.channel)
	if err != nil {
		return fmt.Errorf("postgres store: delete task %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// DBSystem returns "postgresql" (see [store.Systemer]).
func (s *Store) DBSystem() string { return "postgresql" }
