package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runCreate checks Create: every field comes back as stored (at
// millisecond precision, in UTC), the store keeps its own copy, a taken ID
// is refused, and concurrent creations all land.
func (s *suite) runCreate(t *testing.T) {
	run(t, []testCase{
		{"GetRoundTrip", s.createGetRoundTrip},
		{"GetMinimal", s.createGetMinimal},
		{"CopiesTask", s.createCopiesTask},
		{"Duplicate", s.createDuplicate},
		{"Concurrent", s.createConcurrent},
		{"LargeResult", s.largeResult},
		{"LeaseAndKeyRoundTrip", s.leaseAndKeyRoundTrip},
	})
}

func (s *suite) createGetRoundTrip(t *testing.T) {
	st := s.store(t)
	full := fullTask()
	mustCreate(t, st, full)
	checkTask(t, "Get after Create", mustGet(t, st, full.ID), want(full))

	// A terminal task with an error, as the engine stores failures.
	failed := newTask("bob", base)
	if err := failed.Fail(&task.Error{Code: task.CodeInvalidParams, Message: "bad input", Data: json.RawMessage(`[1,"two",{"three":3.5}]`)}, "failed", base.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	completed := newTask("bob", base)
	if err := completed.Complete(json.RawMessage(`{"content":[{"type":"text","text":"done"}],"structuredContent":{"x":1}}`), base.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, st, failed, completed)
	checkTask(t, "failed task", mustGet(t, st, failed.ID), want(failed))
	checkTask(t, "completed task", mustGet(t, st, completed.ID), want(completed))

	// A millisecond-precise UTC timestamp comes back exactly.
	exact := newTask("bob", time.Date(2030, 1, 2, 3, 4, 5, 6_000_000, time.UTC))
	mustCreate(t, st, exact)
	checkTask(t, "task with millisecond timestamps", mustGet(t, st, exact.ID), exact)
}

func (s *suite) createGetMinimal(t *testing.T) {
	st := s.store(t)
	// Every optional field empty, including the owner of an
	// unauthenticated server.
	minimal := &task.Task{
		ID:            task.NewID(),
		Status:        task.Working,
		CreatedAt:     base,
		LastUpdatedAt: base,
		TTL:           time.Hour,
		PollInterval:  time.Second,
	}
	mustCreate(t, st, minimal)
	got := mustGet(t, st, minimal.ID)
	checkTask(t, "minimal task", got, want(minimal))
	if got.Error != nil {
		t.Errorf("Error = %+v, want nil", got.Error)
	}
}

func (s *suite) createCopiesTask(t *testing.T) {
	st := s.store(t)
	tk := fullTask()
	orig := want(tk)
	mustCreate(t, st, tk)
	// The store must not keep the caller's task, nor hand out its own.
	tk.Status = task.Cancelled
	tk.Result[2] = 'X'
	tk.InputRequests["input-9"] = json.RawMessage(`{}`)
	tk.Error.Message = "changed"
	got := mustGet(t, st, orig.ID)
	checkTask(t, "task after the caller changed its copy", got, orig)
	got.Status = task.Failed
	got.InputRequests["input-10"] = json.RawMessage(`{}`)
	checkTask(t, "task after the caller changed a fetched copy", mustGet(t, st, orig.ID), orig)
}

func (s *suite) createDuplicate(t *testing.T) {
	st := s.store(t)
	first := newTask("alice", base)
	mustCreate(t, st, first)
	dup := newTask("mallory", base.Add(time.Hour))
	dup.ID = first.ID
	dup.Result = json.RawMessage(`{"evil":true}`)
	if err := st.Create(t.Context(), dup, store.CreateOptions{}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("Create of a duplicate ID: err = %v, want store.ErrExists", err)
	}
	checkTask(t, "task after a duplicate Create", mustGet(t, st, first.ID), want(first))
}

func (s *suite) createConcurrent(t *testing.T) {
	st := s.store(t)
	const n = 200
	tasks := make([]*task.Task, n)
	for i := range tasks {
		tasks[i] = newTask(task.Owner(fmt.Sprintf("owner-%d", i%4)), base.Add(time.Duration(i)*time.Millisecond))
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, tk := range tasks {
		wg.Go(func() {
			if err := st.Create(t.Context(), tk, store.CreateOptions{}); err != nil {
				errs <- fmt.Errorf("Create(%s): %w", tk.ID, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, tk := range tasks {
		checkTask(t, "concurrently created task", mustGet(t, st, tk.ID), want(tk))
	}
}

func (s *suite) largeResult(t *testing.T) {
	st := s.store(t)
	// 1 MiB of JSON with escapes and non-ASCII text.
	chunk := `{"type":"text","text":"line \"quoted\" \\ back\\slash \u00e9t\u00e9 \ud83d\ude00 \n tab\t"},`
	var b strings.Builder
	b.WriteString(`{"content":[`)
	for b.Len() < 1<<20 {
		b.WriteString(chunk)
	}
	b.WriteString(`{"type":"text","text":"end"}]}`)
	big := json.RawMessage(b.String())
	if !json.Valid(big) {
		t.Fatal("test bug: invalid JSON")
	}
	tk := newTask("alice", base)
	tk.Request = big
	mustCreate(t, st, tk)
	got, err := st.Update(t.Context(), tk.ID, func(cur *task.Task) error { return cur.Complete(big, base) })
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(got.Result, big) {
		t.Errorf("Update returned a different result (%d bytes, want %d)", len(got.Result), len(big))
	}
	got = mustGet(t, st, tk.ID)
	if !sameJSON(got.Result, big) || !sameJSON(got.Request, big) {
		t.Errorf("large result: got %d/%d bytes, want %d", len(got.Request), len(got.Result), len(big))
	}
	tasks, _, err := st.List(t.Context(), "alice", "", 10)
	if err != nil || len(tasks) != 1 || !sameJSON(tasks[0].Result, big) {
		t.Errorf("List of a large task = %d tasks, %v", len(tasks), err)
	}
	// Large input requests and responses too.
	tk2 := newTask("alice", base)
	tk2.InputRequests = map[string]json.RawMessage{"input-1": big}
	tk2.InputResponses = map[string]json.RawMessage{"input-0": big}
	mustCreate(t, st, tk2)
	got = mustGet(t, st, tk2.ID)
	if !sameJSONMap(got.InputRequests, tk2.InputRequests) || !sameJSONMap(got.InputResponses, tk2.InputResponses) {
		t.Errorf("large input maps did not round-trip: keys %v, %v", slices.Collect(maps.Keys(got.InputRequests)), slices.Collect(maps.Keys(got.InputResponses)))
	}
}

// leaseAndKeyRoundTrip checks that LeaseExpiresAt (millisecond precision,
// UTC, zero staying zero) and IdempotencyKey are kept by every method that
// writes or reads tasks.
func (s *suite) leaseAndKeyRoundTrip(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()

	// Sub-millisecond digits and a non-UTC zone: truncated, in UTC.
	held := newTask("alice", base)
	held.Runner = "engine-1"
	held.LeaseExpiresAt = base.Add(30 * time.Second)
	held.IdempotencyKey = "req-é-🙂-" + strings.Repeat("k", 300)
	// A millisecond-precise UTC lease comes back exactly.
	exact := newTask("alice", base.Add(time.Second))
	exact.Runner = "engine-2"
	exact.LeaseExpiresAt = time.Date(2026, 7, 28, 9, 0, 0, 7_000_000, time.UTC)
	exact.IdempotencyKey = "k"
	// Neither: a zero lease stays zero (not the Unix epoch), the key empty.
	none := newTask("alice", base.Add(2*time.Second))
	mustCreate(t, st, held, exact, none)

	for _, tk := range []*task.Task{held, exact, none} {
		checkTask(t, "Get", mustGet(t, st, tk.ID), want(tk))
	}
	if got := mustGet(t, st, exact.ID); !got.LeaseExpiresAt.Equal(exact.LeaseExpiresAt) {
		t.Errorf("millisecond-precise lease = %v, want %v", got.LeaseExpiresAt, exact.LeaseExpiresAt)
	}
	if got := mustGet(t, st, none.ID); !got.LeaseExpiresAt.IsZero() || got.IdempotencyKey != "" {
		t.Errorf("task without lease nor key: LeaseExpiresAt = %v (IsZero %v), IdempotencyKey = %q; want zero and empty",
			got.LeaseExpiresAt, got.LeaseExpiresAt.IsZero(), got.IdempotencyKey)
	}
	listed, _, err := st.List(ctx, "alice", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	read := map[string][]*task.Task{"List": listed}
	if al, ok := st.(activeLister); ok {
		active, err := al.ListActive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		read["ListActive"] = active
	}
	for what, got := range read {
		checkSameSet(t, what, got, []*task.Task{held, exact, none})
		for _, g := range got {
			for _, tk := range []*task.Task{held, exact, none} {
				if g.ID == tk.ID {
					checkTask(t, what, g, want(tk))
				}
			}
		}
	}

	// Update sets a lease where there was none, clears one, and keeps the
	// key; ending a task (task.Transition) drops Runner and lease.
	lease := base.Add(time.Minute)
	got, err := st.Update(ctx, none.ID, func(tk *task.Task) error {
		tk.Runner = "engine-3"
		tk.LeaseExpiresAt = lease
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w := want(none)
	w.Runner = "engine-3"
	w.LeaseExpiresAt = ms(lease)
	checkTask(t, "task returned by an Update setting a lease", got, w)
	checkTask(t, "Get after an Update setting a lease", mustGet(t, st, none.ID), w)

	got, err = st.Update(ctx, held.ID, func(tk *task.Task) error {
		tk.Runner = ""
		tk.LeaseExpiresAt = time.Time{}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w = want(held)
	w.Runner = ""
	w.LeaseExpiresAt = time.Time{}
	checkTask(t, "task returned by an Update clearing the lease", got, w)
	checkTask(t, "Get after an Update clearing the lease", mustGet(t, st, held.ID), w)

	got, err = st.Update(ctx, exact.ID, func(tk *task.Task) error {
		return tk.Complete(json.RawMessage(`{}`), base.Add(time.Hour))
	})
	if err != nil {
		t.Fatal(err)
	}
	w = want(exact)
	if err := w.Complete(json.RawMessage(`{}`), ms(base.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	checkTask(t, "task returned by an Update ending it", got, w)
	checkTask(t, "Get after an Update ending the task", mustGet(t, st, exact.ID), w)
}
