package sqlite

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// onDisk returns the bytes of the database file at path and of its -wal
// file (absent counts as empty).
func onDisk(t *testing.T, path string) []byte {
	t.Helper()
	var all []byte
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// TestDeleteErasesFromDisk checks that a deleted task's result is gone
// from the database file and its -wal, both right after Delete and after
// Close, while a neighbour's result stays: for a small result (in the
// row's page, zeroed by secure_delete) and a large one (in overflow pages
// that go to the free list, zeroed too), the WAL's older copies being
// removed by the checkpoint Delete makes.
func TestDeleteErasesFromDisk(t *testing.T) {
	for _, size := range []int{1, 2000} {
		t.Run(map[int]string{1: "small", 2000: "large"}[size], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tasks.db")
			s := openTest(t, path)
			gone, kept := newTask("alice", now), newTask("alice", now)
			if err := s.Create(t.Context(), gone, store.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := s.Create(t.Context(), kept, store.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			goneMarker := "deleted-marker-" + string(gone.ID)
			keptMarker := "kept-marker-" + string(kept.ID)
			for id, marker := range map[task.ID]string{gone.ID: goneMarker, kept.ID: keptMarker} {
				res, _ := json.Marshal(map[string]string{"text": strings.Repeat(marker+" ", size)})
				if _, err := s.Update(t.Context(), id, func(tk *task.Task) error { return tk.Complete(res, now) }); err != nil {
					t.Fatal(err)
				}
			}
			if b := onDisk(t, path); !bytes.Contains(b, []byte(goneMarker)) || !bytes.Contains(b, []byte(keptMarker)) {
				t.Fatal("the results are not on disk before the deletion: the test checks nothing")
			}
			// The deleted task recorded a domain operation: the ledger's
			// evidence outlives it.
			op := &task.Operation{Key: "op-" + string(gone.ID), TaskID: gone.ID, Tool: gone.Tool, Owner: gone.Owner,
				Effect: "deploy api to production", State: task.OpSubmitted, Receipt: "rollout-42", CreatedAt: now, UpdatedAt: now}
			if _, err := s.RecordOperation(t.Context(), op); err != nil {
				t.Fatal(err)
			}

			if err := s.Delete(t.Context(), gone.ID); err != nil {
				t.Fatal(err)
			}
			b := onDisk(t, path)
			if bytes.Contains(b, []byte(goneMarker)) {
				t.Error("the deleted task's result is still in the database file or its WAL after Delete")
			}
			if !bytes.Contains(b, []byte(keptMarker)) {
				t.Error("the neighbour's result is gone from disk")
			}
			if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() != 0 {
				t.Errorf("the WAL holds %d bytes after Delete, want it truncated", fi.Size())
			}

			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			b = onDisk(t, path)
			if bytes.Contains(b, []byte(goneMarker)) || !bytes.Contains(b, []byte(keptMarker)) {
				t.Errorf("after Close: deleted result on disk %v, neighbour's %v; want false, true",
					bytes.Contains(b, []byte(goneMarker)), bytes.Contains(b, []byte(keptMarker)))
			}
			s2 := openTest(t, path)
			if _, err := s2.Get(t.Context(), gone.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get of the deleted task after reopening: %v", err)
			}
			if ops, _, err := s2.Operations(t.Context(), store.OperationQuery{TaskID: gone.ID}); err != nil || len(ops) != 1 || ops[0].Receipt != "rollout-42" {
				t.Errorf("the deleted task's operation on the ledger: %+v, %v; want it kept", ops, err)
			}
			if got, err := s2.Get(t.Context(), kept.ID); err != nil || !strings.Contains(string(got.Result), keptMarker) {
				t.Errorf("the neighbour after reopening: %v", err)
			}
		})
	}
}
