package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mcptask/mcptask/authn"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// TestOps: 'mcptask ops' lists the caller's own operations on the
// ledger of a real mcptaskd, newest first, filtered by state and task, on
// both wires; another principal sees none of them; an invalid state is a
// usage error.
func TestOps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokens, []byte(`[{"token": "alice-token-5b1e0c7a93d2f846", "principal": "alice", "tenant": "acme"},
{"token": "bob-token-8e24c6a1f07b39d5", "principal": "bob", "tenant": "acme"},
{"token": "carol-token-3f9d2a7c61e0b485", "principal": "carol", "tenant": "acme"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for who, tok := range map[string]string{"alice": "alice-token-5b1e0c7a93d2f846", "bob": "bob-token-8e24c6a1f07b39d5", "carol": "carol-token-3f9d2a7c61e0b485"} {
		if err := os.WriteFile(filepath.Join(dir, who), []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The ledger, as tools of alice's and bob's recorded it (mcptaskd's
	// own tools record none), written before the daemon opens the file.
	db := filepath.Join(dir, "tasks.db")
	st, err := sqlite.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	alice, bob := task.TokenOwner(authn.UserID("acme", "alice")), task.TokenOwner(authn.UserID("acme", "bob"))
	base := time.Now().Add(-time.Hour).UTC()
	seed := []task.Operation{
		{Key: "op-a1", TaskID: "taskA1", Tool: "deploy", Owner: alice, Effect: "deploy api v1", Object: "service/api", State: task.OpUnknown, Receipt: "job-1", Detail: "the system of record could not tell"},
		{Key: "op-a2", TaskID: "taskA2", Tool: "deploy", Owner: alice, Effect: "deploy api v2", State: task.OpConfirmed, Receipt: "job-2"},
		{Key: "op-a3", TaskID: "taskA3", Tool: "pay", Owner: alice, Effect: "pay invoice 7", State: task.OpUnknown, Receipt: "pi-3"},
		{Key: "op-b1", TaskID: "taskB1", Tool: "deploy", Owner: bob, Effect: "deploy web", State: task.OpUnknown},
	}
	for i, op := range seed {
		op.CreatedAt = base.Add(time.Duration(i) * time.Minute)
		op.UpdatedAt = op.CreatedAt
		if _, err := st.RecordOperation(context.Background(), &op); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "-tokens", tokens, "-db", db)
	keys := func(t *testing.T, r result) []string {
		t.Helper()
		var ops []struct {
			Key, TaskID, State, Receipt, Effect, Tool string
		}
		if err := json.Unmarshal([]byte(r.Stdout), &ops); err != nil {
			t.Fatalf("ops --json printed %q: %v", r.Stdout, err)
		}
		var out []string
		for _, o := range ops {
			out = append(out, o.Key+"="+o.State)
		}
		return out
	}
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			c := newCLI(t, d.URL)
			as := func(who string, args ...string) result {
				return c.run(append([]string{"--wire", wire, "--token-file", filepath.Join(dir, who)}, args...)...)
			}
			r := as("alice", "--json", "ops")
			expect(t, r, exitOK, nil, nil)
			if got, want := keys(t, r), []string{"op-a3=unknown", "op-a2=confirmed", "op-a1=unknown"}; !slices.Equal(got, want) {
				t.Errorf("alice's operations = %v, want %v (newest first)", got, want)
			}
			r = as("alice", "--json", "ops", "--state", "unknown")
			expect(t, r, exitOK, nil, nil)
			if got, want := keys(t, r), []string{"op-a3=unknown", "op-a1=unknown"}; !slices.Equal(got, want) {
				t.Errorf("alice's unknown operations = %v, want %v", got, want)
			}
			r = as("alice", "--json", "ops", "--task", "taskA2")
			expect(t, r, exitOK, nil, nil)
			if got, want := keys(t, r), []string{"op-a2=confirmed"}; !slices.Equal(got, want) {
				t.Errorf("taskA2's operations = %v, want %v", got, want)
			}
			expect(t, as("alice", "ops", "--state", "unknown"), exitOK, []string{"STATE", "unknown", "taskA1", "deploy api v1", "job-1", "pay invoice 7"}, nil)
			r = as("bob", "--json", "ops")
			expect(t, r, exitOK, nil, nil)
			if got, want := keys(t, r), []string{"op-b1=unknown"}; !slices.Equal(got, want) {
				t.Errorf("bob's operations = %v, want %v (never alice's)", got, want)
			}
			r = as("carol", "--json", "ops")
			expect(t, r, exitOK, nil, nil)
			if got := keys(t, r); len(got) != 0 {
				t.Errorf("carol sees %v, want none", got)
			}
			expect(t, as("carol", "ops"), exitOK, nil, []string{"no operations"})
			expect(t, as("alice", "ops", "--state", "lost"), exitUsage, nil, []string{"invalid --state"})
		})
	}
}
