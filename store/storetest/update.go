package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runUpdate checks Update: what fn leaves is written and returned, a
// failing fn writes nothing, and concurrent Updates of one task never lose
// one another's changes.
func (s *suite) runUpdate(t *testing.T) {
	run(t, []testCase{
		{"Update", s.update},
		{"FnError", s.updateFnError},
		{"Unknown", s.updateUnknown},
		{"Concurrent", s.updateConcurrent},
		{"InputCap", s.updateInputCap},
	})
}

func (s *suite) update(t *testing.T) {
	st := s.store(t)
	tk := newTask("alice", base)
	other := newTask("alice", base)
	mustCreate(t, st, tk, other)

	expected := want(tk)
	now := base.Add(time.Minute)
	calls := 0
	got, err := st.Update(t.Context(), tk.ID, func(cur *task.Task) error {
		calls++
		checkTask(t, "task passed to fn", cur, expected)
		if _, err := cur.AddInputRequest(json.RawMessage(`{"method":"elicitation/create"}`), now); err != nil {
			return err
		}
		cur.Runner = "engine-1"
		cur.LeaseExpiresAt = now.Add(30 * time.Second)
		return cur.SetStatusMessage("need input", now)
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if calls != 1 {
		t.Errorf("fn called %d times, want 1", calls)
	}
	expected.Status = task.InputRequired
	expected.StatusMessage = "need input"
	expected.LastUpdatedAt = now.Truncate(time.Millisecond).UTC()
	expected.InputSeq = 1
	expected.InputRequests = map[string]json.RawMessage{"input-1": json.RawMessage(`{"method":"elicitation/create"}`)}
	expected.Runner = "engine-1"
	expected.LeaseExpiresAt = ms(now.Add(30 * time.Second))
	checkTask(t, "task returned by Update", got, expected)
	checkTask(t, "Get after Update", mustGet(t, st, tk.ID), expected)
	checkTask(t, "another task after Update", mustGet(t, st, other.ID), want(other))

	// A second update sees the first one's result and can end the task.
	later := base.Add(2 * time.Minute)
	got, err = st.Update(t.Context(), tk.ID, func(cur *task.Task) error {
		if cur.Status != task.InputRequired || cur.InputSeq != 1 {
			return fmt.Errorf("fn saw %s, seq %d", cur.Status, cur.InputSeq)
		}
		return cur.Complete(json.RawMessage(`{"content":[]}`), later)
	})
	if err != nil {
		t.Fatalf("second Update: %v", err)
	}
	expected.Status = task.Completed
	expected.LastUpdatedAt = later.Truncate(time.Millisecond).UTC()
	expected.InputRequests = nil
	expected.Runner = ""
	expected.LeaseExpiresAt = time.Time{}
	expected.Result = json.RawMessage(`{"content":[]}`)
	checkTask(t, "task returned by the second Update", got, expected)
	checkTask(t, "Get after the second Update", mustGet(t, st, tk.ID), expected)
}

var errFn = errors.New("storetest: fn refuses")

func (s *suite) updateFnError(t *testing.T) {
	st := s.store(t)
	tk := fullTask()
	mustCreate(t, st, tk)
	got, err := st.Update(t.Context(), tk.ID, func(cur *task.Task) error {
		// Change everything, then refuse.
		cur.Status = task.Cancelled
		cur.StatusMessage = "should not be written"
		cur.Result = json.RawMessage(`{"no":1}`)
		cur.InputRequests = nil
		cur.InputSeq = 99
		cur.LastUpdatedAt = base.Add(time.Hour)
		return fmt.Errorf("wrapped: %w", errFn)
	})
	if !errors.Is(err, errFn) {
		t.Fatalf("Update with a failing fn: err = %v, want fn's error", err)
	}
	if got != nil {
		t.Errorf("Update with a failing fn returned a task: %+v", got)
	}
	checkTask(t, "task after a refused Update", mustGet(t, st, tk.ID), want(tk))

	// A domain error from fn (a forbidden transition) is returned as is.
	done := newTask("alice", base)
	if err := done.Complete(json.RawMessage(`{}`), base); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, st, done)
	_, err = st.Update(t.Context(), done.ID, func(cur *task.Task) error { return cur.Cancel("late", base.Add(time.Second)) })
	var te *task.TransitionError
	if !errors.As(err, &te) {
		t.Fatalf("Update cancelling a completed task: err = %v, want *task.TransitionError", err)
	}
	checkTask(t, "completed task after a refused cancel", mustGet(t, st, done.ID), want(done))
}

func (s *suite) updateUnknown(t *testing.T) {
	st := s.store(t)
	mustCreate(t, st, newTask("alice", base))
	called := false
	got, err := st.Update(t.Context(), task.NewID(), func(*task.Task) error { called = true; return nil })
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Update of an unknown task: err = %v, want store.ErrNotFound", err)
	}
	if called {
		t.Error("Update called fn for an unknown task")
	}
	if got != nil {
		t.Errorf("Update of an unknown task returned %+v", got)
	}
}

func (s *suite) updateConcurrent(t *testing.T) {
	st := s.store(t)
	tk := newTask("alice", base)
	bystander := newTask("alice", base)
	mustCreate(t, st, tk, bystander)
	const n = task.MaxPendingInputRequests // the most a task holds
	keys := make(chan string, n)
	errs := make(chan error, 3*n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var key string
			_, err := st.Update(t.Context(), tk.ID, func(cur *task.Task) error {
				k, err := cur.AddInputRequest(json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), base.Add(time.Second))
				key = k
				return err
			})
			if err != nil {
				errs <- err
				return
			}
			keys <- key
		})
		// Readers and writers of another task run alongside.
		wg.Go(func() {
			if _, err := st.Get(t.Context(), tk.ID); err != nil {
				errs <- err
			}
			if _, err := st.Update(t.Context(), bystander.ID, func(cur *task.Task) error {
				return cur.SetStatusMessage(fmt.Sprintf("tick %d", i), base)
			}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(keys)
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Update: %v", err)
	}
	seen := map[string]bool{}
	for k := range keys {
		if seen[k] {
			t.Errorf("two Updates minted the key %q", k)
		}
		seen[k] = true
	}
	got := mustGet(t, st, tk.ID)
	if got.InputSeq != n || len(got.InputRequests) != n {
		t.Errorf("after %d concurrent Updates: InputSeq = %d, %d requests; lost updates", n, got.InputSeq, len(got.InputRequests))
	}
	for k := range seen {
		if _, ok := got.InputRequests[k]; !ok {
			t.Errorf("request %q missing from the stored task", k)
		}
	}
}

// updateInputCap: a task holds at most task.MaxPendingInputRequests
// outstanding input requests, of at most task.MaxPendingInputBytes in
// all; an Update whose fn adds one more gets task.ErrTooManyInputRequests
// and writes nothing: the stored requests are unchanged. Answering one
// makes room again.
func (s *suite) updateInputCap(t *testing.T) {
	st := s.store(t)
	tk := newTask("alice", base)
	big := newTask("alice", base)
	mustCreate(t, st, tk, big)
	add := func(id task.ID, req string) (string, error) {
		var key string
		_, err := st.Update(t.Context(), id, func(cur *task.Task) error {
			k, err := cur.AddInputRequest(json.RawMessage(req), base.Add(time.Second))
			key = k
			return err
		})
		return key, err
	}
	refused := func(id task.ID, req string) {
		t.Helper()
		before := mustGet(t, st, id)
		if _, err := add(id, req); !errors.Is(err, task.ErrTooManyInputRequests) {
			t.Fatalf("an input request over the cap: %v, want ErrTooManyInputRequests", err)
		}
		after := mustGet(t, st, id)
		if after.InputSeq != before.InputSeq || !reflect.DeepEqual(after.InputRequests, before.InputRequests) || !after.LastUpdatedAt.Equal(before.LastUpdatedAt) {
			t.Errorf("a refused input request changed the task: seq %d -> %d, %d -> %d requests",
				before.InputSeq, after.InputSeq, len(before.InputRequests), len(after.InputRequests))
		}
	}
	var first string
	for i := range task.MaxPendingInputRequests {
		k, err := add(tk.ID, fmt.Sprintf(`{"n":%d}`, i))
		if err != nil {
			t.Fatalf("input request %d of %d: %v", i+1, task.MaxPendingInputRequests, err)
		}
		if i == 0 {
			first = k
		}
	}
	refused(tk.ID, `{"n":"one too many"}`)
	if got := mustGet(t, st, tk.ID); len(got.InputRequests) != task.MaxPendingInputRequests {
		t.Fatalf("%d requests stored, want %d", len(got.InputRequests), task.MaxPendingInputRequests)
	}
	// An answer makes room for one more.
	if _, err := st.Update(t.Context(), tk.ID, func(cur *task.Task) error {
		_, _, err := cur.Answer(map[string]json.RawMessage{first: json.RawMessage(`{"action":"accept"}`)}, base.Add(2*time.Second))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := add(tk.ID, `{"n":"after an answer"}`); err != nil {
		t.Errorf("an input request after an answer made room: %v", err)
	}

	// The size: requests that fit one by one, not together.
	chunk := `{"q":"` + strings.Repeat("x", task.MaxPendingInputBytes/3) + `"}`
	for range 2 {
		if _, err := add(big.ID, chunk); err != nil {
			t.Fatal(err)
		}
	}
	refused(big.ID, chunk)
}
