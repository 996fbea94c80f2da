package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/mcptask/mcptask/task"
)

// migrationLockKey is the key of the transaction-level advisory lock that
// every Open holds while it checks and migrates its schema, whatever the
// schema: instances starting at once on an empty database take turns, so
// exactly one creates the schema and the others find it done. ("mcptask"
// in ASCII.)
const migrationLockKey int64 = 0x6d6370_7461736b

// migration brings the schema from one version to the next inside the
// transaction tx. migrations[i] takes the schema from version i to i+1;
// the version applied is recorded in the schema_migrations table in the
// same transaction. The SQL texts name the schema as %[1]s (quoted). To
// change the schema, append a migration; never edit one that has shipped.
type migration struct {
	name string
	up   func(ctx context.Context, tx pgx.Tx, m *migrator) error
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

// Units are part of the column names: timestamps are bigint Unix
// milliseconds in UTC, durations bigint nanoseconds, exactly as the SQLite
// backend keeps them, so that every value round-trips exactly.
// expires_at_ns is updated_at + TTL, stored only while the task is
// terminal (NULL otherwise), so that DeleteExpired can never touch a
// running task. lease_expires_at_ms is NULL when no engine holds the task,
// idempotency_key NULL when the client chose none. JSON values are stored
// as text exactly as given (jsonb would reorder keys and refuses \u0000);
// NULL means absent. IDs sort bytewise (COLLATE "C"), as in SQLite,
// whatever the database's collation.
const schemaV1 = `
CREATE TABLE %[1]s.tasks (
	id                  text   COLLATE "C" NOT NULL PRIMARY KEY,
	owner               text   NOT NULL,
	tool                text   NOT NULL,
	wire                text   NOT NULL,
	status              text   NOT NULL
		CHECK (status IN ('working', 'input_required', 'completed', 'failed', 'cancelled')),
	status_message      text   NOT NULL,
	created_at_ms       bigint NOT NULL,
	updated_at_ms       bigint NOT NULL,
	ttl_ns              bigint NOT NULL,
	poll_ns             bigint NOT NULL,
	expires_at_ns       bigint,
	request             text,
	result              text,
	error               text,
	input_requests      text,
	input_responses     text,
	input_seq           bigint NOT NULL,
	runner              text   NOT NULL,
	attempts            bigint NOT NULL DEFAULT 0,
	lease_expires_at_ms bigint,
	idempotency_key     text
);

-- List: one owner's tasks, newest first, keyset-paginated on (created, id).
CREATE INDEX tasks_owner_created ON %[1]s.tasks (owner, created_at_ms, id);

-- ListActive: the few non-terminal tasks, oldest first.
CREATE INDEX tasks_active ON %[1]s.tasks (created_at_ms, id)
	WHERE status IN ('working', 'input_required');

-- Claim: the same tasks, never held first, then by end of lease.
CREATE INDEX tasks_claim ON %[1]s.tasks (lease_expires_at_ms NULLS FIRST, created_at_ms, id)
	WHERE status IN ('working', 'input_required');

-- DeleteExpired: terminal tasks by end of retention.
CREATE INDEX tasks_expires ON %[1]s.tasks (expires_at_ns)
	WHERE expires_at_ns IS NOT NULL;

-- Create: one task per (owner, idempotency key).
CREATE UNIQUE INDEX tasks_idempotency ON %[1]s.tasks (owner, idempotency_key)
	WHERE idempotency_key IS NOT NULL;

-- Schema-wide settings: the key that signs List cursors, the channel of
-- the change feed.
CREATE TABLE %[1]s.meta (
	key   text  NOT NULL PRIMARY KEY,
	value bytea NOT NULL
);
`

func migrateV1(ctx context.Context, tx pgx.Tx, m *migrator) error {
	if _, err := tx.Exec(ctx, fmt.Sprintf(schemaV1, m.quoted)); err != nil {
		return err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %[1]s.meta (key, value) VALUES ('cursor_key', $1), ('channel', $2)`, m.quoted),
		key, []byte(channelName(m.schema)))
	return err
}

// schemaV2 serves the quota count of Create (an owner's unfinished tasks):
// without it the count would read every task of the owner through
// tasks_owner_created, finished ones included, and an owner's finished
// tasks can outnumber the unfinished ones by far (they stay until their
// retention ends). Its condition is the one of countActiveSQL, so that the
// planner can prove the index applies. The index is built inside the
// migration's transaction (CREATE INDEX CONCURRENTLY cannot be): writes to
// the tasks table wait while an existing table is indexed.
const schemaV2 = `
CREATE INDEX tasks_owner_active ON %[1]s.tasks (owner)
	WHERE status IN ('working', 'input_required');
`

func migrateV2(ctx context.Context, tx pgx.Tx, m *migrator) error {
	_, err := tx.Exec(ctx, fmt.Sprintf(schemaV2, m.quoted))
	return err
}

// schemaV3 makes an idempotency key unique per key owner
// (task.Owner.KeyScope: the owner, or one scope for every anonymous
// owner) instead of per owner. Tasks made before keep their owner as key
// owner, so no existing pair of tasks can conflict.
const schemaV3 = `
ALTER TABLE %[1]s.tasks ADD COLUMN key_owner text NOT NULL DEFAULT '';
UPDATE %[1]s.tasks SET key_owner = owner;
DROP INDEX %[1]s.tasks_idempotency;
CREATE UNIQUE INDEX tasks_idempotency ON %[1]s.tasks (key_owner, idempotency_key)
	WHERE idempotency_key IS NOT NULL;
`

func migrateV3(ctx context.Context, tx pgx.Tx, m *migrator) error {
	_, err := tx.Exec(ctx, fmt.Sprintf(schemaV3, m.quoted))
	return err
}

// schemaV4 adds the concurrency queues (a task's queue, and whether it
// waits in it) and the external reference a task's work records. The
// index serves both questions a queue asks, in one range each: how many
// of its tasks run (not queued), and which wait, oldest first (queued).
// Claim skips the waiting tasks (they have no work to take over), so its
// index leaves them out.
const schemaV4 = `
ALTER TABLE %[1]s.tasks ADD COLUMN queue text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE %[1]s.tasks ADD COLUMN queued boolean NOT NULL DEFAULT false;
ALTER TABLE %[1]s.tasks ADD COLUMN external_ref text NOT NULL DEFAULT '';
CREATE INDEX tasks_queue ON %[1]s.tasks (queue, queued, created_at_ms, id)
	WHERE queue <> '' AND status IN ('working', 'input_required');
DROP INDEX %[1]s.tasks_claim;
CREATE INDEX tasks_claim ON %[1]s.tasks (lease_expires_at_ms NULLS FIRST, created_at_ms, id)
	WHERE status IN ('working', 'input_required') AND NOT queued;
`

func migrateV4(ctx context.Context, tx pgx.Tx, m *migrator) error {
	_, err := tx.Exec(ctx, fmt.Sprintf(schemaV4, m.quoted))
	return err
}

// schemaV5 adds the domain operation ledger (see store.Ledger), as the
// SQLite backend keeps it: one row per operation, no foreign key to the
// tasks (a task's expiry or deletion leaves its operations),
// reconciled_at_ms 0 when no reconciliation asked; indexes for an owner's
// operations (by state or not), a task's, and the retention delete.
const schemaV5 = `
CREATE TABLE %[1]s.operations (
	key              text COLLATE "C" NOT NULL PRIMARY KEY,
	task_id          text COLLATE "C" NOT NULL,
	tool             text   NOT NULL,
	owner            text COLLATE "C" NOT NULL,
	object           text   NOT NULL,
	object_version   text   NOT NULL,
	effect           text   NOT NULL,
	state            text COLLATE "C" NOT NULL,
	receipt          text   NOT NULL,
	detail           text   NOT NULL,
	created_at_ms    bigint NOT NULL,
	updated_at_ms    bigint NOT NULL,
	reconciled_at_ms bigint NOT NULL DEFAULT 0
);
CREATE INDEX operations_owner_state ON %[1]s.operations (owner, state, created_at_ms, key);
CREATE INDEX operations_owner ON %[1]s.operations (owner, created_at_ms, key);
CREATE INDEX operations_task ON %[1]s.operations (task_id, created_at_ms, key);
CREATE INDEX operations_updated ON %[1]s.operations (updated_at_ms);
`

func migrateV5(ctx context.Context, tx pgx.Tx, m *migrator) error {
	_, err := tx.Exec(ctx, fmt.Sprintf(schemaV5, m.quoted))
	return err
}

// schemaV6 adds the task logs (see store.TaskLogs), as the SQLite backend
// keeps them: one head row per task that has a log (the latest sequence
// number, what the log holds, how many lines it dropped), one row per
// kept line. Foreign keys delete a task's log with the task, in the same
// transaction, whichever statement deletes it, and keep an append from
// leaving lines of a task deleted meanwhile.
const schemaV6 = `
CREATE TABLE %[1]s.task_log_heads (
	task_id  text COLLATE "C" NOT NULL PRIMARY KEY
		REFERENCES %[1]s.tasks (id) ON DELETE CASCADE,
	last_seq bigint NOT NULL,
	lines    bigint NOT NULL,
	bytes    bigint NOT NULL,
	dropped  bigint NOT NULL
);
CREATE TABLE %[1]s.task_log_lines (
	task_id text COLLATE "C" NOT NULL
		REFERENCES %[1]s.task_log_heads (task_id) ON DELETE CASCADE,
	seq     bigint NOT NULL,
	at_ms   bigint NOT NULL,
	stream  text   NOT NULL,
	text    text   NOT NULL,
	PRIMARY KEY (task_id, seq)
);
`

func migrateV6(ctx context.Context, tx pgx.Tx, m *migrator) error {
	_, err := tx.Exec(ctx, fmt.Sprintf(schemaV6, m.quoted))
	return err
}

// schemaV7 adds the task histories (see store.Historian), as the SQLite
// backend keeps them: one row per event, keyed by task and sequence
// number, deleted with the task by a foreign key whichever statement
// deletes it; and the indexes of store.Browser, each read newest first:
// every task by creation; a status's, a tool's and an owner's tasks by
// creation. The tool's and the owner's indexes include the status, so
// that CountByStatus under those filters can scan the index only;
// tasks_owner_created gives way to the owner's, which serves List just
// as well.
const schemaV7 = `
CREATE TABLE %[1]s.task_events (
	task_id     text COLLATE "C" NOT NULL
		REFERENCES %[1]s.tasks (id) ON DELETE CASCADE,
	seq         bigint NOT NULL,
	kind        text   NOT NULL,
	at_ms       bigint NOT NULL,
	from_status text   NOT NULL,
	to_status   text   NOT NULL,
	instance    text   NOT NULL,
	attempt     bigint NOT NULL,
	message     text   NOT NULL,
	PRIMARY KEY (task_id, seq)
);
CREATE INDEX tasks_created ON %[1]s.tasks (created_at_ms, id);
CREATE INDEX tasks_status_created ON %[1]s.tasks (status, created_at_ms, id);
CREATE INDEX tasks_tool_created ON %[1]s.tasks (tool, created_at_ms, id) INCLUDE (status);
CREATE INDEX tasks_owner_created_status ON %[1]s.tasks (owner, created_at_ms, id) INCLUDE (status);
DROP INDEX %[1]s.tasks_owner_created;
`

func migrateV7(ctx context.Context, tx pgx.Tx, m *migrator) error {
	_, err := tx.Exec(ctx, fmt.Sprintf(schemaV7, m.quoted))
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
CREATE TABLE %[1]s.queue_turns (
	queue text COLLATE "C" NOT NULL,
	owner text   NOT NULL,
	seq   bigint NOT NULL,
	PRIMARY KEY (queue, owner)
);
DROP INDEX %[1]s.tasks_queue;
CREATE INDEX tasks_queue_owner ON %[1]s.tasks (queue, queued, owner, created_at_ms, id)
	WHERE queue <> '' AND status IN ('working', 'input_required');
`

func migrateV8(ctx context.Context, tx pgx.Tx, m *migrator) error {
	_, err := tx.Exec(ctx, fmt.Sprintf(schemaV8, m.quoted))
	return err
}

// schemaV9 adds the host correlation keys of the call that created a task
// (task.Task.Correlation), kept with the task and copied to the operations
// its work records, as the SQLite backend does: a JSON object of strings,
// empty when none. Existing rows get none.
const schemaV9 = `
ALTER TABLE %[1]s.tasks ADD COLUMN correlation text NOT NULL DEFAULT '';
ALTER TABLE %[1]s.operations ADD COLUMN correlation text NOT NULL DEFAULT '';
`

func migrateV9(ctx context.Context, tx pgx.Tx, m *migrator) error {
	_, err := tx.Exec(ctx, fmt.Sprintf(schemaV9, m.quoted))
	return err
}

// schemaV10 keeps whether a completed task's result is a tool error
// (task.Task.ToolError) and when its work first started
// (task.Task.StartedAt, 0 while it waits), as the SQLite backend does;
// the partial index serves the listings and counts of tool errors.
// Existing tasks get their start from their history (or their creation
// when they did not wait in a queue); their tool errors are found by
// reading their results as task.ToolError does.
const schemaV10 = `
ALTER TABLE %[1]s.tasks ADD COLUMN tool_error boolean NOT NULL DEFAULT false;
ALTER TABLE %[1]s.tasks ADD COLUMN started_at_ms bigint NOT NULL DEFAULT 0;
UPDATE %[1]s.tasks AS t SET started_at_ms = coalesce(
	(SELECT min(e.at_ms) FROM %[1]s.task_events e WHERE e.task_id = t.id AND e.kind = 'started'),
	CASE WHEN NOT t.queued THEN t.created_at_ms ELSE 0 END);
CREATE INDEX tasks_tool_errors ON %[1]s.tasks (created_at_ms, id, tool, owner) WHERE tool_error;
`

func migrateV10(ctx context.Context, tx pgx.Tx, m *migrator) error {
	if _, err := tx.Exec(ctx, fmt.Sprintf(schemaV10, m.quoted)); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, fmt.Sprintf(`SELECT id, result FROM %[1]s.tasks
		WHERE status = 'completed' AND result IS NOT NULL AND strpos(result, 'true') > 0`, m.quoted))
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
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, fmt.Sprintf(`UPDATE %[1]s.tasks SET tool_error = true WHERE id = ANY($1)`, m.quoted), ids)
	return err
}

// schemaV11 keeps the requesters' event logs (store.Events) and the
// webhook outbox, as the SQLite backend does: a status event is appended
// by a trigger on the task history (so in the transaction of every status
// change, on every write path), and every event queues, by a trigger too,
// a delivery per matching webhook subscription. An event's position is
// (tx, seq): tx is the writing transaction's ID, so that a reader that
// reads only the events of transactions older than every one still
// running (pg_snapshot_xmin) reads a prefix that later commits never
// extend before. Event writers of one owner hold a shared advisory lock
// that a new subscription of the owner takes exclusively, so that its
// replay sees every event committed before it and every later event sees
// it. meta's events_floor is the newest position pruned. A
// task's events go with it (its outputs are its data).
const schemaV11 = `
CREATE TABLE %[1]s.events (
	seq     bigserial NOT NULL PRIMARY KEY,
	tx      xid8      NOT NULL DEFAULT pg_current_xact_id(),
	owner   text      NOT NULL,
	task_id text      COLLATE "C" NOT NULL REFERENCES %[1]s.tasks (id) ON DELETE CASCADE,
	tool    text      NOT NULL,
	kind    text      NOT NULL,
	at_ms   bigint    NOT NULL,
	status  text      NOT NULL DEFAULT '',
	outcome text      NOT NULL DEFAULT '',
	stream  text      NOT NULL DEFAULT '',
	text    text      NOT NULL DEFAULT '',
	data    text
);
CREATE INDEX events_owner ON %[1]s.events (owner, tx, seq);
CREATE INDEX events_at ON %[1]s.events (at_ms);
CREATE INDEX events_task ON %[1]s.events (task_id);
CREATE FUNCTION %[1]s.task_events_publish() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO %[1]s.events (owner, task_id, tool, kind, at_ms, status, outcome, text)
	SELECT t.owner, t.id, t.tool, 'status', NEW.at_ms, NEW.to_status,
		CASE NEW.to_status WHEN 'completed' THEN CASE WHEN t.tool_error THEN 'tool_error' ELSE 'ok' END
			WHEN 'failed' THEN 'failed' WHEN 'cancelled' THEN 'cancelled' ELSE '' END,
		NEW.message
	FROM %[1]s.tasks t WHERE t.id = NEW.task_id;
	RETURN NULL;
END $$;
CREATE TRIGGER task_events_publish AFTER INSERT ON %[1]s.task_events
	FOR EACH ROW WHEN (NEW.kind IN ('created', 'status')) EXECUTE FUNCTION %[1]s.task_events_publish();
CREATE TABLE %[1]s.event_subscriptions (
	id               text    COLLATE "C" NOT NULL PRIMARY KEY,
	owner            text    NOT NULL,
	name             text    NOT NULL,
	args             text    NOT NULL,
	kind             text    NOT NULL,
	task_id          text    NOT NULL,
	tool             text    NOT NULL,
	url              text    NOT NULL,
	secret           text    NOT NULL,
	old_secret       text    NOT NULL,
	old_until_ms     bigint  NOT NULL,
	expires_ms       bigint  NOT NULL,
	created_ms       bigint  NOT NULL,
	refreshed_ms     bigint  NOT NULL,
	active           boolean NOT NULL,
	last_delivery_ms bigint  NOT NULL DEFAULT 0,
	last_error       text    NOT NULL DEFAULT '',
	failed_since_ms  bigint  NOT NULL DEFAULT 0
);
CREATE INDEX event_subscriptions_owner ON %[1]s.event_subscriptions (owner, kind);
CREATE TABLE %[1]s.event_deliveries (
	sub_id         text   COLLATE "C" NOT NULL REFERENCES %[1]s.event_subscriptions (id) ON DELETE CASCADE,
	event_seq      bigint NOT NULL,
	event_tx       xid8   NOT NULL,
	state          text   NOT NULL DEFAULT 'pending',
	attempts       int    NOT NULL DEFAULT 0,
	next_at_ms     bigint NOT NULL,
	lease_until_ms bigint NOT NULL DEFAULT 0,
	created_ms     bigint NOT NULL,
	last_error     text   NOT NULL DEFAULT '',
	done_at_ms     bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (sub_id, event_seq)
);
CREATE INDEX event_deliveries_due ON %[1]s.event_deliveries (next_at_ms) WHERE state = 'pending';
CREATE INDEX event_deliveries_dead ON %[1]s.event_deliveries (done_at_ms) WHERE state = 'dead';
CREATE INDEX event_deliveries_event ON %[1]s.event_deliveries (event_seq);
CREATE INDEX event_deliveries_sub_pending ON %[1]s.event_deliveries (sub_id, event_tx, event_seq) WHERE state = 'pending';
CREATE INDEX event_deliveries_done ON %[1]s.event_deliveries (done_at_ms) WHERE state = 'done';
CREATE FUNCTION %[1]s.events_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	-- Event writers of one owner share this lock; a new subscription of
	-- the owner takes it alone (PutSubscription): it waits for the
	-- writers under way, and later ones see it.
	PERFORM pg_advisory_xact_lock_shared(1702258035, hashtext(NEW.owner));
	INSERT INTO %[1]s.event_deliveries (sub_id, event_seq, event_tx, next_at_ms, created_ms)
	SELECT s.id, NEW.seq, NEW.tx, NEW.at_ms, NEW.at_ms FROM %[1]s.event_subscriptions s
	WHERE s.owner = NEW.owner AND s.kind = NEW.kind
		AND (s.task_id = '' OR s.task_id = NEW.task_id) AND (s.tool = '' OR s.tool = NEW.tool)
		AND (s.expires_ms = 0 OR s.expires_ms > NEW.at_ms);
	-- The change feed wakes the other instances' deliverers when a
	-- delivery was queued, and their streams on an output (a task
	-- created already ended, or an output, updates no task).
	IF FOUND OR NEW.kind = 'output' THEN
		PERFORM pg_notify(convert_from(m.value, 'UTF8'), NEW.task_id) FROM %[1]s.meta m WHERE m.key = 'channel';
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER events_fan_out AFTER INSERT ON %[1]s.events
	FOR EACH ROW EXECUTE FUNCTION %[1]s.events_fan_out();
INSERT INTO %[1]s.meta (key, value) VALUES ('events_floor', '0.0');
`

func migrateV11(ctx context.Context, tx pgx.Tx, m *migrator) error {
	_, err := tx.Exec(ctx, fmt.Sprintf(schemaV11, m.quoted))
	return err
}

// channelName is the LISTEN/NOTIFY channel of the schema: "mcptask_"
// followed by the schema's name when that fits PostgreSQL's 63-byte limit
// on identifiers, or by a hash of it otherwise. It is chosen once, when
// the schema is created, and kept in the meta table, so renaming the
// schema later does not split its instances over two channels.
func channelName(schema string) string {
	const prefix = "mcptask_"
	if len(prefix)+len(schema) <= maxIdentifierLen {
		return prefix + schema
	}
	sum := sha256.Sum256([]byte(schema))
	return prefix + hex.EncodeToString(sum[:16])
}

// maxIdentifierLen is PostgreSQL's limit on identifiers (NAMEDATALEN-1),
// schema and channel names included.
const maxIdentifierLen = 63

// migrator migrates one schema.
type migrator struct {
	schema string // as given
	quoted string // quoted for SQL text
	log    *slog.Logger
}

// migrate creates the schema if it is missing and brings it to the latest
// version, in one transaction that holds the advisory lock
// migrationLockKey: of several instances starting at once, one migrates
// and the others then find the schema current.
func (m *migrator) migrate(ctx context.Context, conn *pgx.Conn) (err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tx.Rollback(context.WithoutCancel(ctx)))
		}
	}()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey); err != nil {
		return fmt.Errorf("taking the migration lock: %w", err)
	}
	// Only create what is missing: CREATE SCHEMA needs the CREATE
	// privilege on the database even with IF NOT EXISTS, which a role
	// given an existing schema may lack.
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, m.schema).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if _, err := tx.Exec(ctx, `CREATE SCHEMA `+m.quoted); err != nil {
			return fmt.Errorf("creating schema %s: %w", m.quoted, err)
		}
		m.log.Info("postgres store: created schema", "schema", m.schema)
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %[1]s.schema_migrations (
		version    integer     NOT NULL PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`, m.quoted)); err != nil {
		return err
	}
	var v int
	if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(max(version), 0) FROM %s.schema_migrations`, m.quoted)).Scan(&v); err != nil {
		return err
	}
	if v > len(migrations) {
		return fmt.Errorf("schema %s has version %d, newer than this program's %d", m.quoted, v, len(migrations))
	}
	for ; v < len(migrations); v++ {
		mg := migrations[v]
		if err := mg.up(ctx, tx, m); err != nil {
			return fmt.Errorf("schema migration %d (%s): %w", v+1, mg.name, err)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.schema_migrations (version, name) VALUES ($1, $2)`, m.quoted), v+1, mg.name); err != nil {
			return err
		}
		m.log.Info("postgres store: applied schema migration", "schema", m.schema, "version", v+1, "name", mg.name)
	}
	return tx.Commit(ctx)
}

// checkSchemaName refuses a schema name PostgreSQL cannot hold.
func checkSchemaName(s string) error {
	switch {
	case s == "":
		return errors.New("empty schema name")
	case len(s) > maxIdentifierLen:
		return fmt.Errorf("schema name %q is longer than %d bytes", s, maxIdentifierLen)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("schema name %q contains a NUL byte", s)
	case strings.HasPrefix(s, "pg_"):
		return fmt.Errorf("schema name %q: names starting with pg_ are reserved by PostgreSQL", s)
	}
	return nil
}

const schemaV12 = `
CREATE TABLE %[1]s.controls (
	name    text   COLLATE "C" NOT NULL PRIMARY KEY,
	value   text,
	set_by  text   NOT NULL,
	reason  text   NOT NULL,
	at_ms   bigint NOT NULL,
	version bigint NOT NULL
);
CREATE INDEX controls_version ON %[1]s.controls (version);
`

func migrateV12(ctx context.Context, tx pgx.Tx, m *migrator) error {
	_, err := tx.Exec(ctx, fmt.Sprintf(schemaV12, m.quoted))
	return err
}

// schemaV13 keeps task trees: parent_id and root_id are ” for a task
// with no parent; the partial indexes hold only children, so that tasks
// with no parent cost nothing more.
const schemaV13 = `
ALTER TABLE %[1]s.tasks ADD COLUMN parent_id text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE %[1]s.tasks ADD COLUMN root_id text COLLATE "C" NOT NULL DEFAULT '';
CREATE INDEX tasks_parent ON %[1]s.tasks (parent_id, created_at_ms, id) WHERE parent_id <> '';
CREATE INDEX tasks_root ON %[1]s.tasks (root_id) WHERE root_id <> '';
`

func migrateV13(ctx context.Context, tx pgx.Tx, m *migrator) error {
	_, err := tx.Exec(ctx, fmt.Sprintf(schemaV13, m.quoted))
	return err
}
