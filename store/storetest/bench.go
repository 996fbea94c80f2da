package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// NewTask returns a working task of owner created at created, as the
// suite makes them: tool "echo" on the 2026-07-28 wire, with a small
// request. Backends' own tests use it too.
func NewTask(owner task.Owner, created time.Time) *task.Task { return newTask(owner, created) }

// The benchmarks every backend runs, from Benchmark functions of its own
// tests that give them a fresh store (e.g. BenchmarkCreate calls
// BenchCreate). They measure one operation of a store, outside any
// server.

// BenchCreate measures Create of new tasks, one caller at a time.
func BenchCreate(b *testing.B, st store.Store) {
	ctx := context.Background()
	for b.Loop() {
		if err := st.Create(ctx, newTask("alice", base), store.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchCreateParallel measures Create with many more callers than CPUs,
// as in a busy server (group commit, connection pools).
func BenchCreateParallel(b *testing.B, st store.Store) {
	ctx := context.Background()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := st.Create(ctx, newTask("alice", base), store.CreateOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchGet measures Get of completed tasks with a typical small result,
// among 1000.
func BenchGet(b *testing.B, st store.Store) {
	ctx := context.Background()
	ids := make([]task.ID, 1000)
	for i := range ids {
		tk := newTask("alice", base)
		if err := tk.Complete(json.RawMessage(`{"content":[{"type":"text","text":"a typical small result"}]}`), base); err != nil {
			b.Fatal(err)
		}
		if err := st.Create(ctx, tk, store.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		ids[i] = tk.ID
	}
	i := 0
	for b.Loop() {
		if _, err := st.Get(ctx, ids[i%len(ids)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchUpdate measures Update of one task's status message.
func BenchUpdate(b *testing.B, st store.Store) {
	ctx := context.Background()
	tk := newTask("alice", base)
	if err := st.Create(ctx, tk, store.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := st.Update(ctx, tk.ID, func(t *task.Task) error { return t.SetStatusMessage("progress", base) }); err != nil {
			b.Fatal(err)
		}
	}
}
