package client_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mcptask/mcptask/client"
)

// TestReadJournal reads the journal two clients of two servers share: it
// lists the tasks of both targets while they are in flight, and none once
// they have been waited for.
func TestReadJournal(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "journal.json")
	if es, err := client.ReadJournal(path); err != nil || len(es) != 0 {
		t.Fatalf("missing journal: %+v %v", es, err)
	}
	s1, s2 := newServer(t, serverOpts{}), newServer(t, serverOpts{})
	c1 := dial(t, s1.URL, &client.Options{Journal: path, ProtocolVersion: client.Wire20260728})
	c2 := dial(t, s2.URL, &client.Options{Journal: path, ProtocolVersion: client.Wire20251125})
	t1 := startTask(t, c1, "counted", nil)
	t2 := startTask(t, c2, "counted", nil)

	es, err := client.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]client.JournalEntry{
		t1.ID: {TaskID: t1.ID, Target: s1.URL, Wire: client.Wire20260728, Tool: "counted"},
		t2.ID: {TaskID: t2.ID, Target: s2.URL, Wire: client.Wire20251125, Tool: "counted"},
	}
	if len(es) != len(want) {
		t.Fatalf("journal: %+v, want %+v", es, want)
	}
	for _, got := range es {
		if got.CreatedAt.IsZero() {
			t.Errorf("entry %s has no creation time", got.TaskID)
		}
		w := want[got.TaskID]
		w.CreatedAt = got.CreatedAt
		// Each call was sent with a key of its own (the server honours
		// keys), and its arguments are forgotten once the task is known.
		if got.IdempotencyKey == "" || got.Arguments != nil {
			t.Errorf("entry %s: idempotency key %q, arguments %s; want a key and no arguments", got.TaskID, got.IdempotencyKey, got.Arguments)
		}
		w.IdempotencyKey = got.IdempotencyKey
		if !reflect.DeepEqual(got, w) {
			t.Errorf("entry %+v, want %+v", got, want[got.TaskID])
		}
	}

	s1.Release()
	s2.Release()
	for _, w := range []struct {
		c  *client.Client
		id string
	}{{c1, t1.ID}, {c2, t2.ID}} {
		if _, err := w.c.Wait(testCtx(t), w.id, nil); err != nil {
			t.Fatalf("Wait %s: %v", w.id, err)
		}
	}
	if es, err := client.ReadJournal(path); err != nil || len(es) != 0 {
		t.Fatalf("journal after the waits: %+v %v", es, err)
	}
}

// TestReadJournalFormat reads hand-written files: the format's one shape is
// read, anything else is ErrJournalCorrupt and left as it is.
func TestReadJournalFormat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	es, err := client.ReadJournal(write("j.json", `{"version":1,"tasks":[
		{"taskId":"a","target":"http://x/mcp","wire":"2026-07-28","tool":"t1"},
		{"taskId":"b","target":"stdio:srv -stdio","tool":"t2"}]}`))
	if err != nil || len(es) != 2 || es[0].TaskID != "a" || es[0].Target != "http://x/mcp" || es[0].Wire != "2026-07-28" || es[1].Tool != "t2" {
		t.Errorf("journal: %+v %v", es, err)
	}
	if es, err := client.ReadJournal(write("empty.json", " \n")); err != nil || len(es) != 0 {
		t.Errorf("empty file: %+v %v", es, err)
	}
	for i, junk := range []string{
		"{not json",
		`{"version":99,"tasks":[]}`,
		`{"version":1,"tasks":[{"taskId":""}]}`,
		"[]",
		"{\"taskId\":\"a\",\"target\":\"u\"}\n{\"taskId\":\"b\",\"target\":\"u\"}\n", // JSON Lines
	} {
		p := write("bad.json", junk)
		if _, err := client.ReadJournal(p); !errors.Is(err, client.ErrJournalCorrupt) {
			t.Errorf("junk %d %q: %v", i, junk, err)
		}
		if b, _ := os.ReadFile(p); string(b) != junk {
			t.Errorf("junk %d: the file was changed to %q", i, b)
		}
	}
	if _, err := client.ReadJournal(""); err == nil {
		t.Error("no path: no error")
	}
}

// TestDefaultJournalPath checks the default journal is mcptask's file under
// the user's cache directory.
func TestDefaultJournalPath(t *testing.T) {
	dir, err := os.UserCacheDir()
	if err != nil {
		t.Skip("no user cache directory:", err)
	}
	if p, err := client.DefaultJournalPath(); err != nil || p != filepath.Join(dir, "mcptask", "journal.json") {
		t.Errorf("DefaultJournalPath: %q %v", p, err)
	}
}
