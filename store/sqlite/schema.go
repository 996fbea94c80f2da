package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/mcptask/mcptask/task"
)

// migration brings the schema from one version to the next inside the
// transaction tx. migrations[i] takes the schema from version i to i+1; the
// version is kept in SQLite's user_version header field, which is written
// in the same transaction. To change the schema, append a migration; never
// edit one that has shipped.
type migration struct {
	name string
	up   func(ctx context.Context, tx *sql.Tx) error
}

var migrations = []migration{
	{"create tasks and meta", migrateV1},
	{"index the unfinished tasks of each owner", migrateV2},
	{"scope idempotency keys by key owner", migrateV3},
	{"concurrency queues and external references", migrateV4},
	{"the domain operation ledger", migrateV5},
	{"task logs", migrateV6},
	{"task histories and the indexes of browsing", migrateV7},
	{"the queue index by owner, for turns between owners", migrateV8},
	{"host correlation keys of tasks and operations", migrateV9},
	{"tool errors and the start of a task's work", migrateV10},
	{"event logs and the webhook outbox", migrateV11},
	{"the fleet's switches", migrateV12},
	{"task trees: a child's parent and root", migrateV13},
}

// Units are part of the column names: timestamps are integer Unix
// milliseconds in UTC, durations integer nanoseconds. expires_at_ns is
// updated_at + TTL, stored only while the task is terminal (NULL
// otherwise), so that DeleteExpired can never touch a running task.
// lease_expires_at_ms is 0 when no engine holds the task (not NULL, so that
// Claim's "lease before now" is one range of tasks_claim).
// idempotency_key is the empty string when the client chose none.
// JSON values are stored as TEXT exactly as given; NULL means absent.
//
// Nothing has shipped with schema version 1 yet: it may still change in
// place. Once a release has created files with it, change the schema by
// appending a migration instead.
const schemaV1 = `
CREATE TABLE tasks (
	id                  TEXT    NOT NULL PRIMARY KEY,
	owner               TEXT    NOT NULL,
	tool                TEXT    NOT NULL,
	wire                TEXT    NOT NULL,
	status              TEXT    NOT NULL,
	status_message      TEXT    NOT NULL,
	created_at_ms       INTEGER NOT NULL,
	updated_at_ms       INTEGER NOT NULL,
	ttl_ns              INTEGER NOT NULL,
	poll_ns             INTEGER NOT NULL,
	expires_at_ns       INTEGER,
	request             TEXT,
	result              TEXT,
	error               TEXT,
	input_requests      TEXT,
	input_responses     TEXT,
	input_seq           INTEGER NOT NULL,
	runner              TEXT    NOT NULL,
	attempts            INTEGER NOT NULL DEFAULT 0,
	lease_expires_at_ms INTEGER NOT NULL DEFAULT 0,
	idempotency_key     TEXT    NOT NULL DEFAULT ''
);

-- List: one owner's tasks, newest first, keyset-paginated on (created, id).
CREATE INDEX tasks_owner_created ON tasks (owner, created_at_ms, id);

-- ListActive: the few non-terminal tasks, oldest first.
CREATE INDEX tasks_active ON tasks (created_at_ms, id)
	WHERE status IN ('working', 'input_required');

-- Claim: the non-terminal tasks by end of lease (0, no lease, first).
CREATE INDEX tasks_claim ON tasks (lease_expires_at_ms, created_at_ms, id)
	WHERE status IN ('working', 'input_required');

-- Create: an idempotency key is unique per owner; the lookup of the
-- existing task uses this index too.
CREATE UNIQUE INDEX tasks_idempotency ON tasks (owner, idempotency_key)
	WHERE idempotency_key <> '';

-- DeleteExpired: terminal tasks by end of retention.
CREATE INDEX tasks_expires ON tasks (expires_at_ns)
	WHERE expires_at_ns IS NOT NULL;

-- Store-wide settings, e.g. the key that signs List cursors.
CREATE TABLE meta (
	key   TEXT NOT NULL PRIMARY KEY,
	value BLOB NOT NULL
);
`

func migrateV1(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, schemaV1); err != nil {
		return err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('cursor_key', ?)`, key)
	return err
}

// schemaV2 serves the quota count of Create (an owner's unfinished tasks):
// without it the count would read every task of the owner through
// tasks_owner_created, finished ones included, and an owner's finished
// tasks can outnumber the unfinished ones by far (they stay until their
// retention ends). The condition must stay word for word the one of
// countActiveSQL.
const schemaV2 = `
CREATE INDEX tasks_owner_active ON tasks (owner)
	WHERE status IN ('working', 'input_required');
`

func migrateV2(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, schemaV2)
	return err
}

// schemaV3 makes an idempotency key unique per key owner
// (task.Owner.KeyScope: the owner, or one scope for every anonymous
// owner) instead of per owner. Tasks made before keep their owner as key
// owner, so no existing pair of tasks can conflict.
const schemaV3 = `
ALTER TABLE tasks ADD COLUMN key_owner TEXT NOT NULL DEFAULT '';
UPDATE tasks SET key_owner = owner;
DROP INDEX tasks_idempotency;
CREATE UNIQUE INDEX tasks_idempotency ON tasks (key_owner, idempotency_key)
	WHERE idempotency_key <> '';
`

func migrateV3(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, schemaV3)
	return err
}

// schemaV4 adds the concurrency queues (a task's queue, and whether it
// waits in it) and the external reference a task's work records. The
// index serves both questions a queue asks, in one range each: how many
// of its tasks run (queued = 0), and which wait, oldest first (queued =
// 1). Claim skips the waiting tasks (they have no work to take over), so
// its index leaves them out.
const schemaV4 = `
ALTER TABLE tasks ADD COLUMN queue TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN queued INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN external_ref TEXT NOT NULL DEFAULT '';
CREATE INDEX tasks_queue ON tasks (queue, queued, created_at_ms, id)
	WHERE queue <> '' AND status IN ('working', 'input_required');
DROP INDEX tasks_claim;
CREATE INDEX tasks_claim ON tasks (lease_expires_at_ms, created_at_ms, id)
	WHERE status IN ('working', 'input_required') AND queued = 0;
`

func migrateV4(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, schemaV4)
	return err
}

// schemaV5 adds the domain operation ledger (see store.Ledger): one row per
// operation, kept apart from the tasks (no foreign key: a task's expiry or
// deletion leaves its operations). reconciled_at_ms is 0 when no
// reconciliation asked. The indexes serve the queries of Operations (an
// owner's operations, by state or not, and a task's, newest first) and
// the retention delete (by last update).
const schemaV5 = `
CREATE TABLE operations (
	key              TEXT    NOT NULL PRIMARY KEY,
	task_id          TEXT    NOT NULL,
	tool             TEXT    NOT NULL,
	owner            TEXT    NOT NULL,
	object           TEXT    NOT NULL,
	object_version   TEXT    NOT NULL,
	effect           TEXT    NOT NULL,
	state            TEXT    NOT NULL,
	receipt          TEXT    NOT NULL,
	detail           TEXT    NOT NULL,
	created_at_ms    INTEGER NOT NULL,
	updated_at_ms    INTEGER NOT NULL,
	reconciled_at_ms INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX operations_owner_state ON operations (owner, state, created_at_ms, key);
CREATE INDEX operations_owner ON operations (owner, created_at_ms, key);
CREATE INDEX operations_task ON operations (task_id, created_at_ms, key);
CREATE INDEX operations_updated ON operations (updated_at_ms);
`

func migrateV5(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, schemaV5)
	return err
}

// schemaV6 adds the task logs (see store.TaskLogs): one row per kept
// line, keyed by task and sequence number, and one head row per task that
// has a log (the latest sequence number, what the log holds, how many
// lines it dropped). A trigger deletes a task's log with the task, in the
// same transaction, whichever statement deletes it (Delete,
// DeleteExpired).
const schemaV6 = `
CREATE TABLE task_log_heads (
	task_id  TEXT    NOT NULL PRIMARY KEY,
	last_seq INTEGER NOT NULL,
	lines    INTEGER NOT NULL,
	bytes    INTEGER NOT NULL,
	dropped  INTEGER NOT NULL
);
CREATE TABLE task_log_lines (
	task_id TEXT    NOT NULL,
	seq     INTEGER NOT NULL,
	at_ms   INTEGER NOT NULL,
	stream  TEXT    NOT NULL,
	text    TEXT    NOT NULL,
	PRIMARY KEY (task_id, seq)
) WITHOUT ROWID;
CREATE TRIGGER tasks_delete_log AFTER DELETE ON tasks BEGIN
	DELETE FROM task_log_lines WHERE task_id = old.id;
	DELETE FROM task_log_heads WHERE task_id = old.id;
END;
`

func migrateV6(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, schemaV6)
	return err
}

// schemaV7 adds the task histories (see store.Historian): one row per
// event, keyed by task and sequence number, deleted with the task by a
// trigger (as the task logs are); and the indexes of store.Browser, read
// newest first: every task by creation (with the status, so that
// CountByStatus without a tool or owner reads the index only), a tool's
// tasks by creation (likewise), and the finished tasks by creation (with
// the status, so that a rare one is filtered in the index; the
// unfinished tasks have tasks_active, an owner's tasks_owner_created).
// The index by status and creation serves the counts without filters (in
// status order, reading the index only) and the pages of one status. It
// is partial on a condition that every task meets (a status not empty), which
// only Browse and CountByStatus state: SQLite uses a partial index only
// for a query that states its condition, and without statistics it would
// prefer an index that leads with the status to the partial indexes of
// Claim, ListActive and the quota count.
const schemaV7 = `
CREATE TABLE task_events (
	task_id     TEXT    NOT NULL,
	seq         INTEGER NOT NULL,
	kind        TEXT    NOT NULL,
	at_ms       INTEGER NOT NULL,
	from_status TEXT    NOT NULL,
	to_status   TEXT    NOT NULL,
	instance    TEXT    NOT NULL,
	attempt     INTEGER NOT NULL,
	message     TEXT    NOT NULL,
	PRIMARY KEY (task_id, seq)
) WITHOUT ROWID;
CREATE TRIGGER tasks_delete_events AFTER DELETE ON tasks BEGIN
	DELETE FROM task_events WHERE task_id = old.id;
END;
CREATE INDEX tasks_created ON tasks (created_at_ms, id, status);
CREATE INDEX tasks_tool_created ON tasks (tool, created_at_ms, id, status);
CREATE INDEX tasks_finished ON tasks (created_at_ms, id, status)
	WHERE status IN ('completed', 'failed', 'cancelled');
CREATE INDEX tasks_status_created ON tasks (status, created_at_ms, id)
	WHERE status <> '';
`

func migrateV7(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, schemaV7)
	return err
}

// schemaV8 replaces the queue index by one that leads, after the queue
// and whether a task waits, with its owner: StartQueued takes turns
// between the owners of a queue's waiting tasks, walking the distinct
// owners (a seek each) and reading the oldest waiting tasks of each, and
// counts each owner's running tasks. The counts of a queue read the same
// ranges as before. queue_turns orders the owners served: seq, per queue,
// grows with each start; an owner's row goes once none of its tasks waits.
const schemaV8 = `
CREATE TABLE queue_turns (
	queue TEXT    NOT NULL,
	owner TEXT    NOT NULL,
	seq   INTEGER NOT NULL,
	PRIMARY KEY (queue, owner)
) WITHOUT ROWID;
DROP INDEX tasks_queue;
CREATE INDEX tasks_queue_owner ON tasks (queue, queued, owner, created_at_ms, id)
	WHERE queue <> '' AND status IN ('working', 'input_required');
`

func migrateV8(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, schemaV8)
	return err
}

// schemaV9 adds the host correlation keys of the call that created a task
// (task.Task.Correlation), kept with the task and copied to the operations
// its work records: a JSON object of strings, empty when none. Existing rows
// get none.
const schemaV9 = `
ALTER TABLE tasks ADD COLUMN correlation TEXT NOT NULL DEFAULT '';
ALTER TABLE operations ADD COLUMN correlation TEXT NOT NULL DEFAULT '';
`

func migrateV9(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, schemaV9)
	return err
}

// schemaV10 keeps whether a completed task's result is a tool error
// (task.Task.ToolError: it says isError: true), so that operators can
// find and count tool errors apart from successes, and when the task's
// work first started (task.Task.StartedAt, 0 while it waits), so that a
// task's wait and its run can be told apart. The index serves the
// listings and counts of tool errors: they are few among the completed
// tasks, and it holds the filters of browsing (tool, owner). Existing
// tasks get their start from their history (or their creation when they
// did not wait in a queue); their tool errors are found by
// backfillToolErrors.
const schemaV10 = `
ALTER TABLE tasks ADD COLUMN tool_error INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN started_at_ms INTEGER NOT NULL DEFAULT 0;
UPDATE tasks SET started_at_ms = coalesce(
	(SELECT min(e.at_ms) FROM task_events e WHERE e.task_id = tasks.id AND e.kind = 'started'),
	CASE WHEN queued = 0 THEN created_at_ms ELSE 0 END);
CREATE INDEX tasks_tool_errors ON tasks (created_at_ms, id, tool, owner) WHERE tool_error = 1;
`

func migrateV10(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, schemaV10); err != nil {
		return err
	}
	return backfillToolErrors(ctx, tx)
}

// backfillToolErrors marks the completed tasks whose result is a tool
// error, as task.ToolError reads a result (the results that do not hold
// the literal true cannot be one).
func backfillToolErrors(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, result FROM tasks
		WHERE status = 'completed' AND result IS NOT NULL AND instr(result, 'true') > 0`)
	if err != nil {
		return err
	}
	var ids []string
	for rows.Next() {
		var id string
		var result []byte
		if err := rows.Scan(&id, &result); err != nil {
			rows.Close()
			return err
		}
		if task.ToolError(result) {
			ids = append(ids, id)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET tool_error = 1 WHERE id = ?`, id); err != nil {
			return err
		}
	}
	return nil
}

// schemaV11 keeps the requesters' event logs (store.Events) and the
// webhook outbox. A status event is appended by a trigger on the task
// history, so in the transaction of every status change on every write
// path; every event queues, by a trigger too, a delivery per matching
// webhook subscription. The event's seq is its position (the single
// writer commits in seq order); events_floor in meta is the newest seq
// pruned, so that a reader behind it learns it missed some. A task's
// events go with it (its outputs are its data).
const schemaV11 = `
CREATE TABLE events (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	owner   TEXT    NOT NULL,
	task_id TEXT    NOT NULL,
	tool    TEXT    NOT NULL,
	kind    TEXT    NOT NULL,
	at_ms   INTEGER NOT NULL,
	status  TEXT    NOT NULL DEFAULT '',
	outcome TEXT    NOT NULL DEFAULT '',
	stream  TEXT    NOT NULL DEFAULT '',
	text    TEXT    NOT NULL DEFAULT '',
	data    TEXT
);
CREATE INDEX events_owner ON events (owner, seq);
CREATE INDEX events_task ON events (task_id);
CREATE TRIGGER tasks_delete_published AFTER DELETE ON tasks BEGIN
	DELETE FROM events WHERE task_id = old.id;
END;
CREATE TRIGGER task_events_publish AFTER INSERT ON task_events
WHEN new.kind IN ('created', 'status') BEGIN
	INSERT INTO events (owner, task_id, tool, kind, at_ms, status, outcome, text)
	SELECT t.owner, t.id, t.tool, 'status', new.at_ms, new.to_status,
		CASE new.to_status WHEN 'completed' THEN CASE WHEN t.tool_error = 1 THEN 'tool_error' ELSE 'ok' END
			WHEN 'failed' THEN 'failed' WHEN 'cancelled' THEN 'cancelled' ELSE '' END,
		new.message
	FROM tasks t WHERE t.id = new.task_id;
END;
CREATE TABLE event_subscriptions (
	id              TEXT    NOT NULL PRIMARY KEY,
	owner           TEXT    NOT NULL,
	name            TEXT    NOT NULL,
	args            TEXT    NOT NULL,
	kind            TEXT    NOT NULL,
	task_id         TEXT    NOT NULL,
	tool            TEXT    NOT NULL,
	url             TEXT    NOT NULL,
	secret          TEXT    NOT NULL,
	old_secret      TEXT    NOT NULL,
	old_until_ms    INTEGER NOT NULL,
	expires_ms      INTEGER NOT NULL,
	created_ms      INTEGER NOT NULL,
	refreshed_ms    INTEGER NOT NULL,
	active          INTEGER NOT NULL,
	last_delivery_ms INTEGER NOT NULL DEFAULT 0,
	last_error      TEXT    NOT NULL DEFAULT '',
	failed_since_ms INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX event_subscriptions_owner ON event_subscriptions (owner, kind);
CREATE TABLE event_deliveries (
	sub_id         TEXT    NOT NULL,
	event_seq      INTEGER NOT NULL,
	state          TEXT    NOT NULL DEFAULT 'pending',
	attempts       INTEGER NOT NULL DEFAULT 0,
	next_at_ms     INTEGER NOT NULL,
	lease_until_ms INTEGER NOT NULL DEFAULT 0,
	created_ms     INTEGER NOT NULL,
	last_error     TEXT    NOT NULL DEFAULT '',
	done_at_ms     INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (sub_id, event_seq)
) WITHOUT ROWID;
CREATE INDEX event_deliveries_due ON event_deliveries (next_at_ms) WHERE state = 'pending';
CREATE INDEX event_deliveries_dead ON event_deliveries (done_at_ms) WHERE state = 'dead';
CREATE INDEX event_deliveries_event ON event_deliveries (event_seq);
CREATE TRIGGER events_fan_out AFTER INSERT ON events BEGIN
	INSERT INTO event_deliveries (sub_id, event_seq, next_at_ms, created_ms)
	SELECT s.id, new.seq, new.at_ms, new.at_ms FROM event_subscriptions s
	WHERE s.owner = new.owner AND s.kind = new.kind
		AND (s.task_id = '' OR s.task_id = new.task_id) AND (s.tool = '' OR s.tool = new.tool)
		AND (s.expires_ms = 0 OR s.expires_ms > new.at_ms);
END;
CREATE TRIGGER event_subscriptions_delete AFTER DELETE ON event_subscriptions BEGIN
	DELETE FROM event_deliveries WHERE sub_id = old.id;
END;
INSERT INTO meta (key, value) VALUES ('events_floor', 0);
`

func migrateV11(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, schemaV11)
	return err
}

// migrate brings the database to the latest schema version in one write transaction, so
// that processes opening the same file at once migrate it exactly once.
func migrate(ctx context.Context, db *sql.DB, log *slog.Logger) (err error) {
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: see the writer DSN
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, rollback(tx))
		}
	}()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v > len(migrations) {
		return fmt.Errorf("database schema version %d is newer than this program's %d", v, len(migrations))
	}
	if v < 0 {
		return fmt.Errorf("database schema version %d is not an mcptask schema", v)
	}
	if v == 0 {
		// A brand-new schema must not land on top of someone else's tables.
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'").Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return errors.New("the database has tables but no mcptask schema version")
		}
	}
	for ; v < len(migrations); v++ {
		m := migrations[v]
		if err := m.up(ctx, tx); err != nil {
			return fmt.Errorf("schema migration %d (%s): %w", v+1, m.name, err)
		}
		// PRAGMA takes no bound parameters; v+1 is an int we control.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v+1)); err != nil {
			return err
		}
		log.Info("sqlite store: applied schema migration", "version", v+1, "name", m.name)
	}
	return tx.Commit()
}

func rollback(tx *sql.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

const schemaV12 = `
CREATE TABLE controls (
	name    TEXT    NOT NULL PRIMARY KEY,
	value   TEXT,
	set_by  TEXT    NOT NULL,
	reason  TEXT    NOT NULL,
	at_ms   INTEGER NOT NULL,
	version INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX controls_version ON controls (version);
`

func migrateV12(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, schemaV12)
	return err
}

// schemaV13 keeps task trees: parent_id and root_id are "" for a task
// with no parent; the partial indexes hold only children, so that tasks
// with no parent cost nothing more.
const schemaV13 = `
ALTER TABLE tasks ADD COLUMN parent_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN root_id TEXT NOT NULL DEFAULT '';
CREATE INDEX tasks_parent ON tasks (parent_id, created_at_ms, id) WHERE parent_id <> '';
CREATE INDEX tasks_root ON tasks (root_id) WHERE root_id <> '';
`

func migrateV13(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, schemaV13)
	return err
}
