package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDelete: through a real mcptaskd with two principals, on both wires,
// 'mcptask delete' deletes alice's finished task (its result then gone
// from the SQLite file and its WAL, while a neighbour's stays), bob's
// attempt answers as for an unknown task (exit 4), a running task is
// refused (exit 2, "cancel it first") until cancelled, --json prints the
// deletion, the journal forgets the task, and the audit trail records
// task.deleted without the result.
func TestDelete(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokens, []byte(`[{"token": "alice-token-5b1e0c7a93d2f846", "principal": "alice", "tenant": "acme"},
{"token": "bob-token-8e24c6a1f07b39d5", "principal": "bob", "tenant": "acme"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for who, tok := range map[string]string{"alice": "alice-token-5b1e0c7a93d2f846", "bob": "bob-token-8e24c6a1f07b39d5"} {
		if err := os.WriteFile(filepath.Join(dir, who), []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dir, "tasks.db")
	d := startDaemon(t, "-tokens", tokens, "-db", db)
	onDisk := func() []byte {
		var all []byte
		for _, p := range []string{db, db + "-wal"} {
			b, _ := os.ReadFile(p)
			all = append(all, b...)
		}
		return all
	}
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			alice, bob := newCLI(t, d.URL), newCLI(t, d.URL)
			as := func(c *cli, who string, args ...string) result {
				return c.run(append([]string{"--wire", wire, "--token-file", filepath.Join(dir, who)}, args...)...)
			}
			callID := func(n string) string {
				t.Helper()
				r := as(alice, "alice", "--json", "call", "long_computation", "n="+n, "steps=1", "step_delay_ms=0")
				expect(t, r, exitOK, nil, nil)
				var out struct {
					TaskID string `json:"taskId"`
				}
				if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil || out.TaskID == "" {
					t.Fatalf("call --json printed no task ID: %v\n%s", err, r)
				}
				return out.TaskID
			}
			// Unique results: n differs per wire.
			n, neighbourN := "1009", "1013"
			if wire == "2025-11-25" {
				n, neighbourN = "2003", "2011"
			}
			id := callID(n)
			callID(neighbourN)
			marker := []byte("primes up to " + n + " ")
			neighbour := []byte("primes up to " + neighbourN + " ")
			if b := onDisk(); !bytes.Contains(b, marker) || !bytes.Contains(b, neighbour) {
				t.Fatal("the results are not in the database file: the on-disk check would check nothing")
			}

			expect(t, as(bob, "bob", "delete", id), exitConnection, nil, []string{"not found"})
			expect(t, as(alice, "alice", "status", id), exitOK, []string{"completed"}, nil)
			r := as(alice, "alice", "--json", "delete", id)
			expect(t, r, exitOK, nil, nil)
			var js map[string]any
			if err := json.Unmarshal([]byte(r.Stdout), &js); err != nil || js["taskId"] != id || js["status"] != "deleted" {
				t.Errorf("delete --json printed %q (%v)", r.Stdout, err)
			}
			expect(t, as(alice, "alice", "status", id), exitConnection, nil, []string{"not found"})
			expect(t, as(alice, "alice", "delete", id), exitConnection, nil, []string{"not found"})
			if b := onDisk(); bytes.Contains(b, marker) || !bytes.Contains(b, neighbour) {
				t.Errorf("after delete: deleted result on disk %v, neighbour's %v; want false, true", bytes.Contains(b, marker), bytes.Contains(b, neighbour))
			}

			r = as(alice, "alice", "call", "--detach", "long_computation", "n=1000", "steps=100", "step_delay_ms=200")
			expect(t, r, exitOK, nil, nil)
			running := strings.TrimSpace(r.Stdout)
			expect(t, as(alice, "alice", "delete", running), exitFailed, nil, []string{"delete refused: task " + running + " is still running; cancel it first (", "cancel " + running + "), then delete it"})
			expect(t, as(alice, "alice", "status", running), exitOK, []string{"working"}, nil)
			expect(t, as(alice, "alice", "cancel", running), exitOK, []string{"cancelled"}, nil)
			expect(t, as(alice, "alice", "delete", running), exitOK, []string{"task " + running + ": deleted"}, nil)
			expect(t, as(alice, "alice", "list"), exitOK, nil, nil)
			if j, _ := os.ReadFile(alice.journal); strings.Contains(string(j), running) || strings.Contains(string(j), id) {
				t.Errorf("the journal still holds a deleted task:\n%s", j)
			}

			var deleted []map[string]any
			for _, rec := range d.LogRecords("audit") {
				if rec["event"] == "task.deleted" && (rec["task"] == id || rec["task"] == running) {
					deleted = append(deleted, rec)
				}
			}
			if len(deleted) != 2 || deleted[0]["principal"] != "alice" || deleted[0]["tool"] != "long_computation" {
				t.Errorf("task.deleted records: %v", deleted)
			}
			if strings.Contains(d.Logs(), "primes up to "+n+" ") {
				t.Error("the daemon's log holds the deleted result")
			}
		})
	}
}
