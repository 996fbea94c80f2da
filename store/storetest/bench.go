package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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

// BrowseTasks returns n tasks for the browsing benchmarks, as a busy
// store holds them: created one second apart, of 1000 owners and 20
// tools, most of them finished (90% completed, 2% of them tool errors;
// 5% failed, 3% cancelled, 1.5% working, 0.5% input_required), with a
// typical small request and result.
func BrowseTasks(n int) []*task.Task { return BrowseTasksFrom(0, n) }

// BrowseTasksFrom returns tasks from to from+n-1 of the series
// BrowseTasks starts, so that a large store is loaded in parts.
func BrowseTasksFrom(from, n int) []*task.Task {
	out := make([]*task.Task, n)
	for k := range out {
		i := from + k
		tk := newTask(task.Owner(fmt.Sprintf("user-%d", i%1000)), base.Add(time.Duration(i)*time.Second))
		tk.Tool = fmt.Sprintf("tool-%d", (i*7)%20)
		switch r := i % 200; {
		case r < 180:
			tk.Status = task.Completed
			tk.Result = json.RawMessage(`{"content":[{"type":"text","text":"a typical small result"}]}`)
			if (i/7)%50 == 3 {
				// About 2% of the completed tasks, spread over the tools.
				tk.Result, tk.ToolError = json.RawMessage(`{"content":[{"type":"text","text":"3 tests failed"}],"isError":true}`), true
			}
		case r < 190:
			tk.Status = task.Failed
			tk.Error = &task.Error{Code: task.CodeInternalError, Message: "it broke"}
		case r < 196:
			tk.Status = task.Cancelled
		case r < 199:
			tk.Status = task.Working
		default:
			tk.Status = task.InputRequired
		}
		out[k] = tk
	}
	return out
}

// BenchBrowse100k measures [store.Browser] on a store holding 100,000
// tasks, which load inserts (with BrowseTasks(100_000); a backend loads
// them in bulk, on its real schema): the dashboard's first page (50
// tasks) with its counts per status, a tool's first page (with and
// without its counts), a rare status's first page, and a page deep in
// the listing.
func BenchBrowse100k(b *testing.B, st store.Store, load func(tasks []*task.Task)) {
	br := st
	ctx := context.Background()
	load(BrowseTasks(100_000))
	// A cursor 500 pages in.
	var deep string
	for range 500 {
		_, next, err := br.Browse(ctx, store.BrowseQuery{Cursor: deep, Limit: 100})
		if err != nil || next == "" {
			b.Fatalf("Browse: %q, %v", next, err)
		}
		deep = next
	}
	page := func(b *testing.B, q store.BrowseQuery, counts bool) {
		for b.Loop() {
			got, _, err := br.Browse(ctx, q)
			if err != nil || len(got) != 50 {
				b.Fatalf("Browse(%+v) = %d tasks, %v", q, len(got), err)
			}
			if counts {
				q := q
				q.Statuses = nil
				if _, err := br.CountByStatus(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("FirstPageAndCounts", func(b *testing.B) { page(b, store.BrowseQuery{Limit: 50}, true) })
	b.Run("FirstPage", func(b *testing.B) { page(b, store.BrowseQuery{Limit: 50}, false) })
	b.Run("Counts", func(b *testing.B) {
		for b.Loop() {
			if _, err := br.CountByStatus(ctx, store.BrowseQuery{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ToolPage", func(b *testing.B) { page(b, store.BrowseQuery{Tool: "tool-7", Limit: 50}, false) })
	b.Run("ToolPageAndCounts", func(b *testing.B) { page(b, store.BrowseQuery{Tool: "tool-7", Limit: 50}, true) })
	b.Run("FailedPage", func(b *testing.B) { page(b, store.BrowseQuery{Statuses: []task.Status{task.Failed}, Limit: 50}, false) })
	b.Run("InputRequiredPage", func(b *testing.B) {
		page(b, store.BrowseQuery{Statuses: []task.Status{task.InputRequired}, Limit: 50}, false)
	})
	b.Run("DeepPage", func(b *testing.B) { page(b, store.BrowseQuery{Cursor: deep, Limit: 50}, false) })
	tooErrors := []task.Outcome{task.OutcomeToolError}
	b.Run("ToolErrorPage", func(b *testing.B) { page(b, store.BrowseQuery{Outcomes: tooErrors, Limit: 50}, false) })
	b.Run("ToolToolErrorPage", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := br.Browse(ctx, store.BrowseQuery{Tool: "tool-7", Outcomes: tooErrors, Limit: 50}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ProblemsPageAndCounts", func(b *testing.B) {
		page(b, store.BrowseQuery{Statuses: []task.Status{task.Failed}, Outcomes: tooErrors, Limit: 50}, true)
	})
}

// BenchView measures what a tasks/get reads of a completed task (among
// 1000, each with a request of about 1 KiB, a small result, two
// operations on the ledger and a few log lines): the three reads of a
// store that is no [store.Viewer] (Get, the ledger's newest operation,
// the log's position) against one View with the payloads the 2026-07-28
// tasks/get shows. The store must be a Ledger and TaskLogs, and the
// View sub-benchmark needs a Viewer.
func BenchView(b *testing.B, st store.Store) {
	ctx := context.Background()
	l, logs := st, st
	ids := make([]task.ID, 1000)
	args := strings.Repeat("x", 1000)
	for i := range ids {
		tk := newTask("alice", base)
		tk.Request = json.RawMessage(`{"name":"echo","arguments":{"text":"` + args + `"}}`)
		if err := tk.Complete(json.RawMessage(`{"content":[{"type":"text","text":"a typical small result"}]}`), base); err != nil {
			b.Fatal(err)
		}
		if err := st.Create(ctx, tk, store.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		for j := range 2 {
			if _, err := l.RecordOperation(ctx, newOp(fmt.Sprintf("%s-%d", tk.ID, j), tk.ID, "alice", base.Add(time.Duration(j)*time.Second))); err != nil {
				b.Fatal(err)
			}
		}
		if err := logs.AppendLog(ctx, tk.ID, store.LogBatch{Lines: textLines("one", "two", "three")}); err != nil {
			b.Fatal(err)
		}
		ids[i] = tk.ID
	}
	b.Run("ThreeReads", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			id := ids[i%len(ids)]
			if _, err := st.Get(ctx, id); err != nil {
				b.Fatal(err)
			}
			if ops, _, err := l.Operations(ctx, store.OperationQuery{TaskID: id, Limit: 1}); err != nil || len(ops) != 1 {
				b.Fatal(len(ops), err)
			}
			if p, err := logs.ReadLog(ctx, id, 0, 0); err != nil || p.Last != 3 {
				b.Fatal(p, err)
			}
			i++
		}
	})
	b.Run("View", func(b *testing.B) {
		v := st
		b.ReportAllocs()
		opts := store.ViewOptions{Result: true, Error: true, InputRequests: true}
		i := 0
		for b.Loop() {
			got, err := v.View(ctx, ids[i%len(ids)], opts)
			if err != nil || got.Operation == nil || got.Log.Last != 3 {
				b.Fatal(got, err)
			}
			i++
		}
	})
}

// BenchStartQueued measures one turn of a busy queue with a cap of 4:
// a running task ends and StartQueued starts the next, while 1000 tasks of
// 10 owners wait (one more is enqueued each turn, off the clock, so the
// depth holds). The store must be a [store.Queuer].
func BenchStartQueued(b *testing.B, st store.Store) {
	qr := st
	ctx := context.Background()
	const capN, depth, owners = 4, 1000, 10
	n := 0
	var running []task.ID
	enqueue := func() {
		tk := queueTask("bench", base.Add(time.Duration(n)*time.Millisecond), "engine-a")
		tk.Owner = task.Owner(fmt.Sprintf("owner-%d", n%owners))
		n++
		if err := st.Create(ctx, tk, store.CreateOptions{MaxConcurrent: capN}); err != nil {
			b.Fatal(err)
		}
		if !tk.Queued {
			running = append(running, tk.ID)
		}
	}
	for range capN + depth {
		enqueue()
	}
	req := store.QueueRequest{Runner: "engine-b", Queue: "bench", Max: capN, Now: base.Add(time.Hour), Lease: time.Minute}
	b.ResetTimer()
	for range b.N {
		if _, err := st.Update(ctx, running[0], func(tk *task.Task) error { return tk.Complete(nil, req.Now) }); err != nil {
			b.Fatal(err)
		}
		running = running[1:]
		got, err := qr.StartQueued(ctx, req)
		if err != nil || len(got) != 1 {
			b.Fatalf("StartQueued: %d started, %v", len(got), err)
		}
		running = append(running, got[0].ID)
		b.StopTimer()
		enqueue()
		b.StartTimer()
	}
}
