// Package sqlite is the SQLite backend of mcptask's [store.Store], built on
// the pure-Go driver modernc.org/sqlite (no cgo).
//
// The database runs in WAL mode with synchronous=FULL (by default; see
// Options.Synchronous): when a write method
// returns nil, its change is committed and on disk. Reads (Get, List,
// ListActive, Ping) use a pool of read-only connections and never wait for
// writers. All writes of the process go through one connection, driven by
// one goroutine that groups the writes waiting at the same moment into one
// transaction (group commit): under many concurrent callers a single disk
// flush commits many tasks, while every write stays individually atomic
// and keeps its own result. Write transactions are BEGIN IMMEDIATE, so
// several processes may share the file; SQLite serialises their writers.
//
// The schema is versioned with SQLite's user_version field; [Open]
// migrates an older file and refuses a newer one.
//
// *Store implements [store.ChangeFeed] within the process: Update, Claim
// and Delete announce the tasks they change, once committed, to the
// Changes calls of every *Store of the process on the same file. Writes made by
// other processes sharing the file are not announced; mcptaskd runs one
// process per file, so for it the process is the whole story. *Store also
// implements [store.Browser], [store.Historian], [store.Pinger] and
// [store.Deleter] (which erases the deleted
// task's bytes from the file: see [Store.Delete]).
package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptask/mcptask/store/internal/rowcodec"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/internal/history"
	"github.com/mcptask/mcptask/task"

	sqlitelib "modernc.org/sqlite" // also registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// Options configures [Open]. A nil *Options, like the zero value, means
// the defaults.
type Options struct {
	// Logger receives the store's log records: schema migrations, failed
	// commits, panics in Update functions. Nil discards them.
	Logger *slog.Logger

	// BusyTimeout is how long a statement waits for a lock held by another
	// process sharing the file before it fails. Zero means 5 seconds.
	BusyTimeout time.Duration

	// MaxReadConns is the size of the read connection pool. Zero means
	// the larger of 4 and GOMAXPROCS.
	MaxReadConns int

	// Synchronous is SQLite's synchronous setting: SyncFull (the default)
	// flushes every commit to disk before it returns, so a committed task
	// survives a power loss or OS crash too; SyncNormal flushes at WAL
	// checkpoints only: commits survive a crash of the process, but the
	// last ones may be lost on power loss, in exchange for faster
	// single-client writes.
	Synchronous Sync

	// ViewCache keeps the Views (store.Viewer) of tasks in memory, up to
	// ViewCacheEntries of them, shared by the Stores of the process on
	// the file: a tasks/get of a task that did not change since it was
	// last read reads no database. Every write through a Store of the
	// process drops the tasks it touches before it returns. Turn it on only when no other process
	// writes the file (mcptaskd holds a lock on it): their writes would
	// not drop anything.
	ViewCache bool
	// ViewCacheEntries bounds the Views the cache holds (also bounded to
	// 64 MiB of payloads); zero means DefaultViewCacheEntries.
	ViewCacheEntries int
}

// Sync is a value of SQLite's synchronous setting in WAL mode.
type Sync string

// The synchronous settings Open accepts.
const (
	SyncFull   Sync = "FULL"
	SyncNormal Sync = "NORMAL"
)

// Defaults of [Options] and of [Store.List].
const (
	// DefaultBusyTimeout is the busy timeout used when Options.BusyTimeout
	// is zero.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultListLimit is the page size List uses when asked for limit <= 0.
	DefaultListLimit = 100
	// MaxListLimit caps the page size of List; a larger limit gets pages
	// of this size, with a cursor to the rest.
	MaxListLimit = 1000
)

// ErrClosed is returned by the methods of a [Store] after Close.
var ErrClosed = errors.New("sqlite store: closed")

// ErrFileGone is returned by writes and Ping once the database file at the
// store's path is no longer the file the store has open (deleted, or
// replaced): what the store wrote from then on would be lost with the
// process, so it writes nothing and says so.
var ErrFileGone = errors.New("sqlite store: the database file was deleted or replaced while open; nothing written now would survive a restart: restore the file (or restart on a new one)")

// ErrCorrupt is returned by Open, by Ping and by every write once the
// database file is found damaged: its header is not an SQLite database's,
// it was emptied, or SQLite reported a malformed database image. The store writes nothing from then on: a
// write on a damaged file may damage it further.
var ErrCorrupt = errors.New("sqlite store: the database file is corrupt; nothing is written until it is restored (from a backup, or with the sqlite3 shell's .recover) or replaced")

// Store is a [store.Store] kept in one SQLite database file. It is safe for
// concurrent use. Create it with [Open] and release it with [Store.Close].
type Store struct {
	path string
	log  *slog.Logger
	file os.FileInfo // the database file as opened (see checkFile)
	// header reads the database file's header (see checkHeader). It
	// stays open until the connections are closed: on POSIX systems,
	// closing any descriptor of the file drops every lock this process
	// holds on it, SQLite's included.
	header *os.File
	// sized is set once the file was seen non-empty: an empty file is a
	// new database not yet checkpointed, or one truncated.
	sized atomic.Bool
	// corrupt holds the error that showed the file damaged, once one did
	// (see noteCorrupt); from then on the store refuses every write.
	corrupt atomic.Pointer[error]

	wdb *sql.DB // exactly one connection; used by the writer goroutine only
	rdb *sql.DB // read-only pool

	cursorKey []byte

	// Statements of the read pool.
	getStmt, listFirstStmt, listNextStmt, listActiveStmt *sql.Stmt
	// Statements of the write connection, used inside batch transactions.
	wGetStmt, wByKeyStmt, wCountActiveStmt, insertStmt, updateStmt, deleteStmt *sql.Stmt
	deleteExpiredStmt, claimStmt, claimAllStmt, takeStmt, heartbeatStmt        *sql.Stmt
	queueCountStmt, queueHeadStmt, queueStartStmt, queueMessageStmt            *sql.Stmt
	queueServedStmt, queuePruneStmt                                            *sql.Stmt
	queueAnyStmt                                                               *sql.Stmt // of the read pool
	insertEventStmt                                                            *sql.Stmt // of the write connection
	historyStmt                                                                *sql.Stmt // of the read pool

	stmtMu sync.Mutex           // guards stmts
	stmts  map[string]*sql.Stmt // Browse's statements of the read pool, by SQL text

	ops        chan *op      // unbuffered: a send succeeds when the writer takes the op
	closing    chan struct{} // closed by Close
	writerDone chan struct{} // closed when the writer goroutine has returned

	hub *hub // relays the announcements of Update and Claim
	// views is the file's view cache when Options.ViewCache is on (reads use it).
	views  *viewCache
	feedMu sync.Mutex     // orders feeds.Add before Close's wait
	feeds  sync.WaitGroup // running Changes calls

	closeOnce sync.Once
	closeErr  error
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.ChangeFeed = (*Store)(nil)
	_ store.Pinger     = (*Store)(nil)
)

// Open opens the SQLite database at path, creating the file (not its
// directory) if it does not exist, and migrates its schema to the current
// version. opts may be nil.
func Open(path string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	if o.MaxReadConns <= 0 {
		o.MaxReadConns = max(4, runtime.GOMAXPROCS(0))
	}
	switch Sync(strings.ToUpper(string(o.Synchronous))) {
	case "", SyncFull:
		o.Synchronous = SyncFull
	case SyncNormal:
		o.Synchronous = SyncNormal
	default:
		return nil, fmt.Errorf("sqlite store: Synchronous must be %s or %s, not %q", SyncFull, SyncNormal, o.Synchronous)
	}
	if path == "" {
		return nil, errors.New("sqlite store: empty database path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: %w", err)
	}

	s := &Store{
		path:       abs,
		log:        o.Logger.With("db", abs),
		ops:        make(chan *op),
		closing:    make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	if err := s.open(o); err != nil {
		s.closeDBs()
		if isCorruption(err) && !errors.Is(err, ErrCorrupt) {
			// Damage in the schema's pages shows before quick_check runs.
			err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return nil, fmt.Errorf("sqlite store: open %s: %w", abs, err)
	}
	fi, err := os.Stat(abs)
	if err == nil {
		s.header, err = os.Open(abs)
	}
	if err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("sqlite store: open %s: %w", abs, err)
	}
	s.file = fi
	s.hub = acquireHub(hubKey(abs))
	if o.ViewCache {
		s.views = s.hub.enableViews(o.ViewCacheEntries)
	}
	go s.writeLoop()
	return s, nil
}

// writerCacheKiB is the page cache of the writing connection, in KiB
// (SQLite's default is 2 MiB): the lease renewal of many running tasks
// updates pages all over the tasks table and its lease index, and with a
// small cache each renewal spills and reads them again (idle CPU with
// 30,000 running tasks: 12.6 % of a core with 2 MiB, 8.5 % with 64 MiB).
// It grows only as the file is used.
const writerCacheKiB = 64 << 10

func (s *Store) open(o Options) error {
	ctx := context.Background()
	busy := strconv.FormatInt(o.BusyTimeout.Milliseconds(), 10)

	var err error
	s.wdb, err = sql.Open("sqlite", dsn(s.path, url.Values{
		"_pragma": {"busy_timeout(" + busy + ")", "journal_mode(WAL)", "synchronous(" + string(o.Synchronous) + ")", "secure_delete(on)",
			"cache_size(-" + strconv.Itoa(writerCacheKiB) + ")"},
		"_txlock": {"immediate"},
	}))
	if err != nil {
		return err
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)

	var mode string
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		// Still correct and durable, but readers and the writer block each
		// other (e.g. on a file system without shared memory).
		s.log.Warn("sqlite store: WAL journal mode unavailable", "journal_mode", mode)
	}
	// A damaged file is refused at once, before anything is written to
	// it (quick_check reads every page once, without the index checks of
	// integrity_check).
	if err := quickCheck(ctx, s.wdb); err != nil {
		return err
	}
	if err := migrate(ctx, s.wdb, s.log); err != nil {
		return err
	}
	if err := s.wdb.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'cursor_key'`).Scan(&s.cursorKey); err != nil {
		return fmt.Errorf("reading the cursor key: %w", err)
	}

	s.rdb, err = sql.Open("sqlite", dsn(s.path, url.Values{
		"_pragma": {"busy_timeout(" + busy + ")", "query_only(1)"},
	}))
	if err != nil {
		return err
	}
	s.rdb.SetMaxOpenConns(o.MaxReadConns)
	s.rdb.SetMaxIdleConns(o.MaxReadConns)
	s.rdb.SetConnMaxLifetime(0)
	s.rdb.SetConnMaxIdleTime(0)

	for _, p := range []struct {
		db   *sql.DB
		stmt **sql.Stmt
		sql  string
	}{
		{s.rdb, &s.getStmt, `SELECT ` + taskColumns + ` FROM tasks WHERE id = ?`},
		{s.rdb, &s.listFirstStmt, `SELECT ` + taskColumns + ` FROM tasks WHERE owner = ?
			ORDER BY created_at_ms DESC, id DESC LIMIT ?`},
		{s.rdb, &s.listNextStmt, `SELECT ` + taskColumns + ` FROM tasks WHERE owner = ? AND (created_at_ms, id) < (?, ?)
			ORDER BY created_at_ms DESC, id DESC LIMIT ?`},
		{s.rdb, &s.listActiveStmt, `SELECT ` + taskColumns + ` FROM tasks WHERE status IN ('working', 'input_required')
			ORDER BY created_at_ms, id`},
		{s.wdb, &s.wGetStmt, `SELECT ` + taskColumns + ` FROM tasks WHERE id = ?`},
		{s.wdb, &s.wByKeyStmt, byKeySQL},
		{s.wdb, &s.wCountActiveStmt, countActiveSQL},
		{s.wdb, &s.insertStmt, insertSQL},
		{s.wdb, &s.updateStmt, updateSQL},
		{s.wdb, &s.deleteStmt, `DELETE FROM tasks WHERE id = ?`},
		{s.wdb, &s.deleteExpiredStmt, deleteExpiredSQL},
		{s.wdb, &s.claimStmt, claimSQL},
		{s.wdb, &s.claimAllStmt, claimAllSQL},
		{s.wdb, &s.takeStmt, takeSQL},
		{s.wdb, &s.heartbeatStmt, heartbeatSQL},
		{s.wdb, &s.queueCountStmt, queueCountSQL},
		{s.wdb, &s.queueHeadStmt, queueHeadSQL},
		{s.wdb, &s.queueStartStmt, queueStartSQL},
		{s.wdb, &s.queueMessageStmt, queueMessageSQL},
		{s.wdb, &s.queueServedStmt, queueServedSQL},
		{s.wdb, &s.queuePruneStmt, queuePruneSQL},
		{s.rdb, &s.queueAnyStmt, queueAnySQL},
		{s.wdb, &s.insertEventStmt, insertEventSQL},
		{s.rdb, &s.historyStmt, historySQL},
	} {
		if *p.stmt, err = p.db.PrepareContext(ctx, p.sql); err != nil {
			return fmt.Errorf("preparing %q: %w", p.sql, err)
		}
	}
	return nil
}

// byKeySQL reads the task of a key owner (?, task.Owner.KeyScope) with an
// idempotency key (?, not empty). The redundant condition that the key is not empty lets SQLite
// use the partial index tasks_idempotency.
const byKeySQL = `SELECT ` + taskColumns + ` FROM tasks
	WHERE key_owner = ? AND idempotency_key = ? AND idempotency_key <> ''`

// countActiveSQL counts the working and input_required tasks of an owner
// (?), up to a cap (?): Create with a quota only needs to know whether
// the quota is reached, so an owner far over it (after the quota was
// lowered) costs no more than one at it. The status condition is the one of the partial
// index tasks_owner_active, word for word, so that SQLite uses it and
// never reads the owner's finished tasks.
const countActiveSQL = `SELECT count(*) FROM (SELECT 1 FROM tasks
	WHERE owner = ? AND status IN ('working', 'input_required') LIMIT ?)`

// dsn is the modernc.org/sqlite data source name of the file at the
// absolute path abs. A file: URI keeps any character of the path (even
// '?' or '#') out of the query.
func dsn(abs string, params url.Values) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows volume: file:///C:/dir/file
	}
	u := url.URL{Scheme: "file", Path: p, RawQuery: params.Encode()}
	return u.String()
}

// Close stops accepting calls, ends running Changes calls, waits for the
// writes already taken to be committed and for those Changes calls to
// return, and closes the database. It is safe to call more than once and
// from several goroutines; every call returns the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.feedMu.Lock()
		close(s.closing)
		s.feedMu.Unlock()
		<-s.writerDone
		s.feeds.Wait()
		s.closeErr = s.closeDBs()
		releaseHub(s.hub)
	})
	return s.closeErr
}

func (s *Store) closeDBs() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.getStmt, s.listFirstStmt, s.listNextStmt, s.listActiveStmt,
		s.wGetStmt, s.wByKeyStmt, s.wCountActiveStmt, s.insertStmt, s.updateStmt, s.deleteStmt, s.deleteExpiredStmt,
		s.claimStmt, s.claimAllStmt, s.takeStmt, s.heartbeatStmt,
		s.queueCountStmt, s.queueHeadStmt, s.queueStartStmt, s.queueMessageStmt, s.queueAnyStmt, s.queueServedStmt, s.queuePruneStmt,
		s.insertEventStmt, s.historyStmt} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	s.stmtMu.Lock()
	for _, st := range s.stmts {
		errs = append(errs, st.Close())
	}
	s.stmts = nil
	s.stmtMu.Unlock()
	for _, db := range []*sql.DB{s.rdb, s.wdb} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	if s.header != nil { // after SQLite's own descriptors (see Store.header)
		errs = append(errs, s.header.Close())
	}
	return errors.Join(errs...)
}

func (s *Store) closed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// checkFile returns ErrFileGone (with the path) when the file at the
// store's path is not the one it opened, and ErrCorrupt when the file was
// found damaged, now (see checkHeader) or before.
func (s *Store) checkFile() error {
	fi, err := os.Stat(s.path)
	if err != nil || !os.SameFile(fi, s.file) {
		return fmt.Errorf("%w (%s)", ErrFileGone, s.path)
	}
	if p := s.corrupt.Load(); p != nil {
		return *p
	}
	if fi.Size() > 0 {
		s.sized.Store(true)
	} else if s.sized.Load() {
		return s.noteCorrupt(fmt.Errorf("%w (%s: the file was emptied)", ErrCorrupt, s.path))
	}
	return s.noteCorrupt(checkHeader(s.header, s.path, fi.Size()))
}

// checkHeader reads the database header of f, the file at path, of the
// given size, and returns an error wrapping ErrCorrupt when it is not a
// valid SQLite header (the file overwritten or truncated in place, which
// leaves it the same file the store opened). An empty file is a database
// not yet checkpointed.
func checkHeader(f *os.File, path string, size int64) error {
	if size == 0 {
		return nil
	}
	var h [100]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		return fmt.Errorf("%w (%s: %d bytes, shorter than a database header)", ErrCorrupt, path, size)
	}
	if string(h[:16]) != "SQLite format 3\x00" {
		return fmt.Errorf("%w (%s: the file does not start with an SQLite header)", ErrCorrupt, path)
	}
	pageSize := int64(binary.BigEndian.Uint16(h[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	if pageSize < 512 || pageSize&(pageSize-1) != 0 {
		return fmt.Errorf("%w (%s: page size %d in the header)", ErrCorrupt, path, pageSize)
	}
	// Only the bytes that stay the same for the database's life are
	// checked here: a checkpoint may be rewriting the rest while this
	// reads. Damage further in shows as SQLite's corruption errors.
	return nil
}

// quickCheck runs PRAGMA quick_check on db and returns an error wrapping
// ErrCorrupt unless it finds the database sound.
func quickCheck(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, "PRAGMA quick_check(5)")
	if err != nil {
		if isCorruption(err) {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return err
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		if isCorruption(err) {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: quick_check: %s", ErrCorrupt, strings.Join(problems, "; "))
	}
	return nil
}

// isCorruption reports whether err is SQLite's SQLITE_CORRUPT or
// SQLITE_NOTADB.
func isCorruption(err error) bool {
	var se *sqlitelib.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

// Transient implements [store.ErrorClassifier]: err is transient when the
// database file was busy or locked past the busy timeout (another process
// writing to it). A full disk, a corrupt or vanished file, a closed store
// and a done context are not.
func (s *Store) Transient(err error) bool {
	var se *sqlitelib.Error
	if err == nil || !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// noteCorrupt returns err, and when it shows the database damaged
// (ErrCorrupt, or SQLite's corruption codes) records that, once and
// loudly, so that Ping and every later write fail with ErrCorrupt.
func (s *Store) noteCorrupt(err error) error {
	if err == nil || (!errors.Is(err, ErrCorrupt) && !isCorruption(err)) {
		return err
	}
	if !errors.Is(err, ErrCorrupt) {
		err = fmt.Errorf("%w (%s: %v)", ErrCorrupt, s.path, err)
	}
	if s.corrupt.CompareAndSwap(nil, &err) {
		s.log.Error("sqlite store: the database file is corrupt; refusing every write from now on", "err", err)
	}
	return *s.corrupt.Load()
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Ping implements [store.Pinger]: it runs a trivial query on a read
// connection, or returns [ErrClosed] after Close.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed() {
		return ErrClosed
	}
	if err := s.checkFile(); err != nil {
		return err
	}
	var version int
	if err := s.rdb.QueryRowContext(ctx, `PRAGMA schema_version`).Scan(&version); err != nil {
		return s.noteCorrupt(fmt.Errorf("sqlite store: ping: %w", err))
	}
	return nil
}

// Create durably inserts t, or returns [store.ErrExists] if its ID is
// taken, or a [*store.DuplicateError] holding the existing task if
// t.IdempotencyKey is set and t.Owner already has a task with that key
// (whatever its ID; the key is checked first). The store keeps timestamps
// at millisecond precision in UTC. JSON fields are kept byte for byte;
// Error.Data and the values of the input maps must be valid JSON.
//
// With a quota (opts.MaxActive > 0), when t.Owner already has
// opts.MaxActive or more working or input_required tasks, it inserts
// nothing and returns [store.ErrTooManyActive]; an idempotent retry gets
// its [*store.DuplicateError] whatever the count. The key lookup, the
// count and the insert run in one write transaction, which holds the
// database's write lock: no other writer, in this process or another
// sharing the file, creates or finishes a task in between, so concurrent
// creations never overshoot the quota.
func (s *Store) Create(ctx context.Context, t *task.Task, opts store.CreateOptions) error {
	if t == nil {
		return errors.New("sqlite store: Create of a nil task")
	}
	if opts.MaxConcurrent > 0 && t.Queue == "" {
		return errors.New("sqlite store: Create with MaxConcurrent of a task without a Queue")
	}
	return s.create(ctx, t, opts)
}

// create is Create with opts: in one write transaction, the idempotency
// key, then the quota, then the queue's count, then the insert.
func (s *Store) create(ctx context.Context, t *task.Task, opts store.CreateOptions) error {
	maxActive := opts.MaxActive
	// Encode in the caller's goroutine: the writer only binds.
	r, err := encodeTask(t)
	if err != nil {
		return err
	}
	var queued *row // what the insert wrote, when the task waits
	instance := store.InstanceOf(ctx)
	err = s.writeNew(ctx, func(tx *sql.Tx) error {
		queued = nil
		if r.IdempotencyKey != "" {
			// The write transaction holds the database's write lock, so
			// no other writer, in this process or another, can insert
			// the key between this read and the insert.
			old, err := scanTask(tx.Stmt(s.wByKeyStmt).QueryRow(r.KeyOwner, r.IdempotencyKey))
			if err == nil {
				return &store.DuplicateError{Task: old}
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("sqlite store: insert task %s: looking up its idempotency key: %w", r.ID, err)
			}
		}
		if maxActive > 0 {
			// The same write lock keeps the count true until the insert.
			var n int64
			if err := tx.Stmt(s.wCountActiveStmt).QueryRow(r.Owner, int64(maxActive)).Scan(&n); err != nil {
				return fmt.Errorf("sqlite store: insert task %s: counting the owner's unfinished tasks: %w", r.ID, err)
			}
			if n >= int64(maxActive) {
				return store.ErrTooManyActive
			}
		}
		ins := r
		if opts.MaxConcurrent > 0 {
			running, waiting, err := s.queueCounts(tx, r.Queue)
			if err != nil {
				return fmt.Errorf("sqlite store: insert task %s: counting queue %q: %w", r.ID, r.Queue, err)
			}
			if waiting > 0 || running >= int64(opts.MaxConcurrent) {
				queued = r.InQueue(waiting)
				ins = queued
			}
		}
		res, err := tx.Stmt(s.insertStmt).Exec(ins.InsertArgs()...)
		if err != nil {
			return fmt.Errorf("sqlite store: insert task %s: %w", r.ID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("sqlite store: insert task %s: %w", r.ID, err)
		}
		if n == 0 {
			return store.ErrExists
		}
		return s.insertEvents(tx, r.ID, history.Events(nil, ins.EventTask(), storeNow(), instance))
	})
	if err == nil && queued != nil {
		t.Queued, t.Runner, t.LeaseExpiresAt, t.Attempts, t.StartedAt = true, "", time.Time{}, 0, time.Time{}
		t.StatusMessage = queued.StatusMessage
	}
	return err
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
	t, err := scanTask(s.rdb.QueryRowContext(ctx, byKeySQL, string(owner.KeyScope()), key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: get task by key: %w", err))
	}
	return t, nil
}

// Get returns the task with the given ID, or [store.ErrNotFound].
func (s *Store) Get(ctx context.Context, id task.ID) (*task.Task, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	t, err := scanTask(s.getStmt.QueryRowContext(ctx, string(id)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: get task %s: %w", id, err))
	}
	return t, nil
}

// Update reads the task with the given ID, calls fn with it and writes
// back what fn left in it, in one transaction; see [store.Store]. fn runs
// on the store's single writer goroutine, so it must be quick and must not
// call the Store's write methods (Get is fine). The returned task is what
// a following Get returns. Once committed, the change is announced to the
// Changes calls of the process on this file (see [Store.Changes]). A panic
// in fn writes nothing and is re-raised in the caller's goroutine.
// Changing the task's ID is an error.
func (s *Store) Update(ctx context.Context, id task.ID, fn func(t *task.Task) error) (*task.Task, error) {
	var out *task.Task
	instance := store.InstanceOf(ctx)
	err := s.writeChanges(ctx, func(tx *sql.Tx) ([]task.ID, error) {
		t, err := scanTask(tx.Stmt(s.wGetStmt).QueryRow(string(id)))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, store.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("sqlite store: read task %s: %w", id, err)
		}
		before := *t
		if err := callFn(fn, t); err != nil {
			return nil, err
		}
		if t.ID != id {
			return nil, fmt.Errorf("sqlite store: Update of task %s: fn changed the ID to %q", id, t.ID)
		}
		r, err := encodeTask(t)
		if err != nil {
			return nil, err
		}
		if _, err := tx.Stmt(s.updateStmt).Exec(r.UpdateArgs()...); err != nil {
			return nil, fmt.Errorf("sqlite store: update task %s: %w", id, err)
		}
		if err := s.insertEvents(tx, r.ID, history.Events(&before, t, storeNow(), instance)); err != nil {
			return nil, err
		}
		t.CreatedAt = rowcodec.MSTime(r.CreatedMS)
		t.LastUpdatedAt = rowcodec.MSTime(r.UpdatedMS)
		t.LeaseExpiresAt = rowcodec.OpTime(r.LeaseMS)
		out = t
		return []task.ID{id}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// List returns up to limit tasks of owner, newest first (ties broken by
// ID), after the position of cursor. A limit <= 0 means
// [DefaultListLimit], and limits above [MaxListLimit] are lowered to it.
// Cursors are signed: one that this database did not issue for this owner
// gives [store.ErrBadCursor]. A cursor stays valid across restarts and
// when the task it points after is deleted.
func (s *Store) List(ctx context.Context, owner task.Owner, cursor string, limit int) ([]*task.Task, string, error) {
	if s.closed() {
		return nil, "", ErrClosed
	}
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	var (
		rows *sql.Rows
		err  error
	)
	if cursor == "" {
		rows, err = s.listFirstStmt.QueryContext(ctx, owner, limit+1)
	} else {
		createdMS, id, cerr := s.parseCursor(owner, cursor)
		if cerr != nil {
			return nil, "", cerr
		}
		rows, err = s.listNextStmt.QueryContext(ctx, owner, createdMS, id, limit+1)
	}
	if err != nil {
		return nil, "", s.noteCorrupt(fmt.Errorf("sqlite store: list: %w", err))
	}
	tasks, err := scanAll(rows)
	if err != nil {
		return nil, "", s.noteCorrupt(fmt.Errorf("sqlite store: list: %w", err))
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
// Claim): tools and tests use it to see the unfinished work of a file.
func (s *Store) ListActive(ctx context.Context) ([]*task.Task, error) {
	if s.closed() {
		return nil, ErrClosed
	}
	rows, err := s.listActiveStmt.QueryContext(ctx)
	if err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: list active: %w", err))
	}
	tasks, err := scanAll(rows)
	if err != nil {
		return nil, s.noteCorrupt(fmt.Errorf("sqlite store: list active: %w", err))
	}
	return tasks, nil
}

func scanAll(rows *sql.Rows) ([]*task.Task, error) {
	defer rows.Close()
	var tasks []*task.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, t)
	}
	return tasks, rows.Err()
}

// deleteExpiredSQL deletes the terminal tasks whose retention ended, but
// the children of a parent that has not ended: a re-run of the parent's
// work must find the steps it finished (a parent's children are deleted
// once it has ended and their retention has too).
const deleteExpiredSQL = `DELETE FROM tasks WHERE expires_at_ns < ?
	AND (parent_id = '' OR NOT EXISTS (SELECT 1 FROM tasks p WHERE p.id = tasks.parent_id AND p.status IN ('working', 'input_required')))`

// DeleteExpired deletes the terminal tasks whose retention ended before now
// and returns how many it deleted. Working and input_required tasks are
// never deleted, nor the children of those.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.Stmt(s.deleteExpiredStmt).Exec(rowcodec.UnixNano(now))
		if err != nil {
			return fmt.Errorf("sqlite store: delete expired: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// Delete removes the task with the given ID and everything it holds, or
// returns [store.ErrNotFound]; it implements [store.Deleter] (the owner's
// tasks/delete). Once committed, the deletion is announced to the Changes
// calls of the process on this file. The operations of a ledger are not
// touched.
//
// Deleted content is erased from the file: the write connection runs with
// PRAGMA secure_delete=ON, so the deleted row's bytes (and any overflow or
// freed page) are overwritten with zeros, and Delete then checkpoints the
// WAL with TRUNCATE, so that the older copies of the row's pages that the
// WAL held are gone too. If a reader holds an old snapshot at that moment
// the checkpoint cannot finish: Delete still succeeds, logs a warning, and
// the old copy stays in the -wal file until the next checkpoint (at most
// until the next Delete, the WAL's auto-checkpoint or Close).
func (s *Store) Delete(ctx context.Context, id task.ID) error {
	err := s.writeChanges(ctx, func(tx *sql.Tx) ([]task.ID, error) {
		res, err := tx.Stmt(s.deleteStmt).Exec(string(id))
		if err != nil {
			return nil, fmt.Errorf("sqlite store: delete task %s: %w", id, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, fmt.Errorf("sqlite store: delete task %s: %w", id, err)
		}
		if n == 0 {
			return nil, store.ErrNotFound
		}
		return []task.ID{id}, nil
	})
	if err != nil {
		return err
	}
	if err := s.checkpointTruncate(ctx); err != nil {
		s.log.Warn("sqlite store: the deleted task's older copy stays in the WAL until the next checkpoint", "task", id, "err", err)
	}
	return nil
}

// errCheckpointBusy is checkpointTruncate's error when a reader kept the
// checkpoint from finishing.
var errCheckpointBusy = errors.New("a reader holds an older snapshot")

// checkpointTruncate copies the WAL into the database file and truncates
// it to zero bytes.
func (s *Store) checkpointTruncate(ctx context.Context) error {
	var busy, logFrames, done int
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done); err != nil {
		return err
	}
	if busy != 0 {
		return errCheckpointBusy
	}
	return nil
}

// DBSystem returns "sqlite" (see [store.Systemer]).
func (s *Store) DBSystem() string { return "sqlite" }
