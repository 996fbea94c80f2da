package postgres

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/mcptask/mcptask/store"
)

// TestEventsCommitOrder holds a transaction that appended an event open
// while a later one commits its own: a reader sees neither until the
// older commits (no position it continues after can be overtaken by a
// later commit), then both, the older first.
func TestEventsCommitOrder(t *testing.T) {
	schema := newSchema(t)
	quoted := pgx.Identifier{schema}.Sanitize()
	s := openTest(t, schema)
	ctx := t.Context()
	tk := newTask("alice", now)
	if err := s.Create(ctx, tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	head, err := s.EventHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	older, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer older.Rollback(ctx)
	if _, err := older.Exec(ctx, fmt.Sprintf(`INSERT INTO %[1]s.events (owner, task_id, tool, kind, at_ms, text)
		VALUES ('alice', $1, 'echo', 'output', 1, 'older')`, quoted), string(tk.ID)); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, tk.ID, []store.OutputEvent{{Text: "later"}}); err != nil {
		t.Fatal(err)
	}
	q := store.EventQuery{Owner: "alice", Kind: store.EventKindOutput, After: head}
	p, err := s.ReadEvents(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 0 {
		t.Fatalf("read %q while an older transaction was open", p.Events[0].Text)
	}
	q.After = p.Next // a reader that persisted this cursor
	if err := older.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	p, err = s.ReadEvents(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 2 || p.Events[0].Text != "older" || p.Events[1].Text != "later" {
		t.Fatalf("after the commit: %d events", len(p.Events))
	}
}
