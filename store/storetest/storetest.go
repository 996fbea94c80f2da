// Package storetest is the shared test suite that every [store.Store]
// backend must pass. A backend's tests call [Run] with a function that opens
// a fresh, empty store:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := mybackend.Open(...)
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// The suite never sleeps: time is passed to the store explicitly.
package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// Run runs the suite. open must return a new store that holds no task and
// is not shared with any other call; Run closes it when the subtest ends, so
// the store's Close must tolerate being called again by cleanup code that
// open registered itself.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	s := &suite{open: open}
	for _, c := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"CreateGetRoundTrip", s.createGetRoundTrip},
		{"CreateGetMinimal", s.createGetMinimal},
		{"CreateCopiesTask", s.createCopiesTask},
		{"CreateDuplicate", s.createDuplicate},
		{"CreateConcurrent", s.createConcurrent},
		{"GetUnknown", s.getUnknown},
		{"Update", s.update},
		{"UpdateFnError", s.updateFnError},
		{"UpdateUnknown", s.updateUnknown},
		{"UpdateConcurrent", s.updateConcurrent},
		{"List", s.list},
		{"ListSameCreatedAt", s.listSameCreatedAt},
		{"ListEmpty", s.listEmpty},
		{"ListBadCursor", s.listBadCursor},
		{"ListActive", s.listActive},
		{"DeleteExpired", s.deleteExpired},
		{"DeleteExpiredFollowsUpdates", s.deleteExpiredFollowsUpdates},
		{"Delete", s.delete},
		{"LargeResult", s.largeResult},
		{"LeaseAndKeyRoundTrip", s.leaseAndKeyRoundTrip},
		{"CreateIdempotencyKey", s.createIdempotencyKey},
		{"CreateIdempotencyKeyConcurrent", s.createIdempotencyKeyConcurrent},
		{"CreateLimited", s.createLimited},
		{"CreateLimitedConcurrent", s.createLimitedConcurrent},
		{"Claim", s.claim},
		{"ClaimLeaseBoundary", s.claimLeaseBoundary},
		{"ClaimLimit", s.claimLimit},
		{"ClaimIgnoreLeases", s.claimIgnoreLeases},
		{"ClaimConcurrent", s.claimConcurrent},
		{"Heartbeat", s.heartbeat},
		{"HeartbeatTakeover", s.heartbeatTakeover},
	} {
		t.Run(c.name, c.fn)
	}
}

type suite struct {
	open func(t *testing.T) store.Store
}

func (s *suite) store(t *testing.T) store.Store {
	t.Helper()
	st := s.open(t)
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

// base is the suite's reference instant. It has sub-millisecond digits and
// a non-UTC zone: stores keep timestamps at millisecond precision in UTC.
var base = time.Date(2026, 7, 28, 9, 15, 30, 123_456_789, time.FixedZone("UTC+2", 2*3600))

// newTask returns a working task of owner created at created.
func newTask(owner task.Owner, created time.Time) *task.Task {
	tk := task.New(task.Policy{}, owner, "echo", nil, created)
	tk.Wire = "2026-07-28"
	tk.Request = json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`)
	return tk
}

// fullTask returns a task with every field set to a non-zero value.
func fullTask() *task.Task {
	return &task.Task{
		ID:            task.NewID(),
		Owner:         "alice@example.com",
		Tool:          "long_running_tool",
		Wire:          "2025-11-25",
		Status:        task.InputRequired,
		StatusMessage: "waiting for you — «quoted» \"text\"\nline two",
		CreatedAt:     base,
		LastUpdatedAt: base.Add(90*time.Second + 456_789*time.Nanosecond),
		TTL:           90*time.Minute + 1234*time.Millisecond,
		PollInterval:  1500 * time.Millisecond,
		Request:       json.RawMessage(`{"name":"long_running_tool","arguments":{"n":3,"nested":{"a":[1,2,{"b":null}]},"s":"\u00e9\"x"}}`),
		Result:        json.RawMessage(`{"content":[{"type":"text","text":"partial"}],"isError":false}`),
		Error: &task.Error{
			Code:    task.CodeInternalError,
			Message: "something broke",
			Data:    json.RawMessage(`{"retryable":true,"details":["a","b"],"n":12345678901}`),
		},
		InputRequests: map[string]json.RawMessage{
			"input-2": json.RawMessage(`{"method":"elicitation/create","params":{"message":"Name?","requestedSchema":{"type":"object"}}}`),
			"input-3": json.RawMessage(`{"method":"sampling/createMessage","params":{"maxTokens":100}}`),
		},
		InputResponses: map[string]json.RawMessage{
			"input-1": json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`),
		},
		InputSeq:       3,
		Runner:         "engine-7f3a",
		Attempts:       2,
		LeaseExpiresAt: base.Add(45*time.Second + 999_999*time.Nanosecond),
		IdempotencyKey: "retry-key: «é» \"quoted\" 🙂",
	}
}

// want returns what a store must give back for t: t with timestamps
// truncated to milliseconds, in UTC (a zero LeaseExpiresAt stays zero).
func want(t *task.Task) *task.Task {
	w := t.Clone()
	w.CreatedAt = ms(w.CreatedAt)
	w.LastUpdatedAt = ms(w.LastUpdatedAt)
	w.LeaseExpiresAt = ms(w.LeaseExpiresAt)
	return w
}

// ms is what a store keeps of the timestamp tm: millisecond precision, in
// UTC. The zero time stays zero.
func ms(tm time.Time) time.Time { return tm.Truncate(time.Millisecond).UTC() }

// diff describes how got differs from want, or returns "". JSON values are
// compared by meaning, not bytes (a store may re-encode them), and a nil
// JSON value or map equals an empty one.
func diff(got, want *task.Task) string {
	if got == nil || want == nil {
		if got == want {
			return ""
		}
		return fmt.Sprintf("got %v, want %v", got, want)
	}
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s: got %v, want %v", field, g, w)) }
	if got.ID != want.ID {
		add("ID", got.ID, want.ID)
	}
	if got.Owner != want.Owner {
		add("Owner", got.Owner, want.Owner)
	}
	if got.Tool != want.Tool {
		add("Tool", got.Tool, want.Tool)
	}
	if got.Wire != want.Wire {
		add("Wire", got.Wire, want.Wire)
	}
	if got.Status != want.Status {
		add("Status", got.Status, want.Status)
	}
	if got.StatusMessage != want.StatusMessage {
		add("StatusMessage", fmt.Sprintf("%q", got.StatusMessage), fmt.Sprintf("%q", want.StatusMessage))
	}
	for _, f := range []struct {
		name      string
		got, want time.Time
	}{
		{"CreatedAt", got.CreatedAt, want.CreatedAt},
		{"LastUpdatedAt", got.LastUpdatedAt, want.LastUpdatedAt},
		{"LeaseExpiresAt", got.LeaseExpiresAt, want.LeaseExpiresAt},
	} {
		if f.got.IsZero() != f.want.IsZero() {
			add(f.name+".IsZero()", f.got.IsZero(), f.want.IsZero())
		} else if !f.got.Equal(f.want) {
			add(f.name, f.got.Format(time.RFC3339Nano), f.want.Format(time.RFC3339Nano))
		} else if f.got.Location() != time.UTC {
			add(f.name+".Location()", f.got.Location(), "UTC")
		}
	}
	if got.TTL != want.TTL {
		add("TTL", got.TTL, want.TTL)
	}
	if got.PollInterval != want.PollInterval {
		add("PollInterval", got.PollInterval, want.PollInterval)
	}
	if !sameJSON(got.Request, want.Request) {
		add("Request", abbrev(got.Request), abbrev(want.Request))
	}
	if !sameJSON(got.Result, want.Result) {
		add("Result", abbrev(got.Result), abbrev(want.Result))
	}
	switch {
	case got.Error == nil && want.Error == nil:
	case got.Error == nil || want.Error == nil:
		add("Error", got.Error, want.Error)
	default:
		if got.Error.Code != want.Error.Code || got.Error.Message != want.Error.Message || !sameJSON(got.Error.Data, want.Error.Data) {
			add("Error", fmt.Sprintf("%d %q %s", got.Error.Code, got.Error.Message, got.Error.Data),
				fmt.Sprintf("%d %q %s", want.Error.Code, want.Error.Message, want.Error.Data))
		}
	}
	if !sameJSONMap(got.InputRequests, want.InputRequests) {
		add("InputRequests", got.InputRequests, want.InputRequests)
	}
	if !sameJSONMap(got.InputResponses, want.InputResponses) {
		add("InputResponses", got.InputResponses, want.InputResponses)
	}
	if got.InputSeq != want.InputSeq {
		add("InputSeq", got.InputSeq, want.InputSeq)
	}
	if got.Runner != want.Runner {
		add("Runner", got.Runner, want.Runner)
	}
	if got.Attempts != want.Attempts {
		add("Attempts", got.Attempts, want.Attempts)
	}
	if got.IdempotencyKey != want.IdempotencyKey {
		add("IdempotencyKey", fmt.Sprintf("%q", got.IdempotencyKey), fmt.Sprintf("%q", want.IdempotencyKey))
	}
	return strings.Join(d, "\n")
}

func abbrev(r json.RawMessage) string {
	if len(r) > 200 {
		return fmt.Sprintf("%s... (%d bytes)", r[:200], len(r))
	}
	return string(r)
}

// sameJSON reports whether a and b encode the same JSON value.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	if bytes.Equal(a, b) {
		return true
	}
	va, erra := decodeJSON(a)
	vb, errb := decodeJSON(b)
	if erra != nil || errb != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

func decodeJSON(r json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(r))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

func sameJSONMap(a, b map[string]json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || !sameJSON(va, vb) {
			return false
		}
	}
	return true
}

func mustCreate(t *testing.T, st store.Store, tasks ...*task.Task) {
	t.Helper()
	for _, tk := range tasks {
		if err := st.Create(t.Context(), tk); err != nil {
			t.Fatalf("Create(%s): %v", tk.ID, err)
		}
	}
}

func mustGet(t *testing.T, st store.Store, id task.ID) *task.Task {
	t.Helper()
	got, err := st.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	if got == nil {
		t.Fatalf("Get(%s) returned a nil task and no error", id)
	}
	return got
}

func checkTask(t *testing.T, what string, got, want *task.Task) {
	t.Helper()
	if d := diff(got, want); d != "" {
		t.Errorf("%s differs:\n%s", what, d)
	}
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
	if err := st.Create(t.Context(), dup); !errors.Is(err, store.ErrExists) {
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
			if err := st.Create(t.Context(), tk); err != nil {
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

func (s *suite) getUnknown(t *testing.T) {
	st := s.store(t)
	mustCreate(t, st, newTask("alice", base))
	for _, id := range []task.ID{task.NewID(), "no-such-task", "x"} {
		got, err := st.Get(t.Context(), id)
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%q): err = %v, want store.ErrNotFound", id, err)
		}
		if got != nil {
			t.Errorf("Get(%q) returned %+v with an error", id, got)
		}
	}
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
	const n = 50
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

// listAll pages through owner's tasks with limit, checking each page.
func listAll(t *testing.T, st store.Store, owner task.Owner, limit int) []*task.Task {
	t.Helper()
	var all []*task.Task
	cursor := ""
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatal("List never ends")
		}
		tasks, next, err := st.List(t.Context(), owner, cursor, limit)
		if err != nil {
			t.Fatalf("List(%q, page %d): %v", owner, page, err)
		}
		if len(tasks) > limit {
			t.Fatalf("List(%q, limit %d) returned %d tasks", owner, limit, len(tasks))
		}
		if next != "" && len(tasks) == 0 {
			t.Fatalf("List(%q) returned an empty page with a next cursor", owner)
		}
		all = append(all, tasks...)
		if next == "" {
			return all
		}
		if next == cursor {
			t.Fatalf("List(%q) returned the cursor it was given", owner)
		}
		cursor = next
	}
}

func ids(tasks []*task.Task) []task.ID {
	out := make([]task.ID, len(tasks))
	for i, tk := range tasks {
		out[i] = tk.ID
	}
	return out
}

// checkNewestFirst checks that got is ordered by creation time, newest
// first; tasks created in the same millisecond may come in any order.
func checkNewestFirst(t *testing.T, got []*task.Task) {
	t.Helper()
	for i := 1; i < len(got); i++ {
		if got[i].CreatedAt.After(got[i-1].CreatedAt) {
			t.Errorf("List is not newest first: %v (%s) follows %v (%s)", got[i].CreatedAt, got[i].ID, got[i-1].CreatedAt, got[i-1].ID)
		}
	}
}

func checkSameSet(t *testing.T, what string, got []*task.Task, want []*task.Task) {
	t.Helper()
	seen := map[task.ID]int{}
	for _, tk := range got {
		seen[tk.ID]++
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("%s: task %s returned %d times", what, id, n)
		}
	}
	wantIDs := map[task.ID]bool{}
	for _, tk := range want {
		wantIDs[tk.ID] = true
		if seen[tk.ID] == 0 {
			t.Errorf("%s: task %s missing", what, tk.ID)
		}
	}
	for id := range seen {
		if !wantIDs[id] {
			t.Errorf("%s: unexpected task %s", what, id)
		}
	}
}

func (s *suite) list(t *testing.T) {
	st := s.store(t)
	var alice, bob []*task.Task
	// Create out of time order, interleaving owners.
	for i := range 25 {
		created := base.Add(time.Duration((i*7)%25) * time.Second)
		a := newTask("alice", created)
		a.Result = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		alice = append(alice, a)
		mustCreate(t, st, a)
		if i%3 == 0 {
			b := newTask("bob", created)
			bob = append(bob, b)
			mustCreate(t, st, b)
		}
	}
	anon := newTask("", base)
	mustCreate(t, st, anon)

	sorted := slices.Clone(alice)
	slices.SortStableFunc(sorted, func(a, b *task.Task) int { return b.CreatedAt.Compare(a.CreatedAt) })

	// Pages of 10: 10, 10, 5.
	page1, next, err := st.List(t.Context(), "alice", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page1) != 10 || next == "" {
		t.Fatalf("first page: %d tasks, next %q; want 10 and a cursor", len(page1), next)
	}
	page2, next, err := st.List(t.Context(), "alice", next, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page2) != 10 || next == "" {
		t.Fatalf("second page: %d tasks, next %q; want 10 and a cursor", len(page2), next)
	}
	page3, next, err := st.List(t.Context(), "alice", next, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page3) != 5 || next != "" {
		t.Fatalf("third page: %d tasks, next %q; want 5 and no cursor", len(page3), next)
	}
	all := slices.Concat(page1, page2, page3)
	if !slices.Equal(ids(all), ids(sorted)) {
		t.Errorf("List order = %v, want newest first %v", ids(all), ids(sorted))
	}
	checkSameSet(t, "alice's pages", all, alice)
	checkNewestFirst(t, all)
	for _, got := range all {
		i := slices.IndexFunc(alice, func(tk *task.Task) bool { return tk.ID == got.ID })
		if i >= 0 {
			checkTask(t, "listed task", got, want(alice[i]))
		}
	}

	// Other page sizes see the same sequence.
	for _, limit := range []int{1, 3, 24, 25, 26, 100} {
		if got := listAll(t, st, "alice", limit); !slices.Equal(ids(got), ids(sorted)) {
			t.Errorf("List with limit %d = %v, want %v", limit, ids(got), ids(sorted))
		}
	}

	bobs := listAll(t, st, "bob", 4)
	checkSameSet(t, "bob's tasks", bobs, bob)
	checkNewestFirst(t, bobs)
	checkSameSet(t, "the anonymous owner's tasks", listAll(t, st, "", 10), []*task.Task{anon})

	// A page boundary survives creations and deletions in between.
	page1, next, err = st.List(t.Context(), "alice", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, st, newTask("alice", base.Add(time.Hour))) // newer than everything: not on later pages
	if err := st.Delete(t.Context(), page1[len(page1)-1].ID); err != nil {
		t.Fatal(err)
	}
	rest, _, err := st.List(t.Context(), "alice", next, 100)
	if err != nil {
		t.Fatalf("List after the cursor's own task was deleted: %v", err)
	}
	if !slices.Equal(ids(rest), ids(sorted[10:])) {
		t.Errorf("List after changes = %v, want %v", ids(rest), ids(sorted[10:]))
	}
}

func (s *suite) listSameCreatedAt(t *testing.T) {
	st := s.store(t)
	// Many tasks in the same millisecond: pagination must still neither
	// skip nor repeat.
	var tasks []*task.Task
	for i := range 13 {
		tk := newTask("alice", base.Add(time.Duration(i%3)*time.Microsecond))
		tasks = append(tasks, tk)
		mustCreate(t, st, tk)
	}
	for _, limit := range []int{1, 2, 5} {
		got := listAll(t, st, "alice", limit)
		checkSameSet(t, fmt.Sprintf("limit %d", limit), got, tasks)
		if first := listAll(t, st, "alice", 13); !slices.Equal(ids(got), ids(first)) {
			t.Errorf("limit %d order %v differs from one page %v", limit, ids(got), ids(first))
		}
	}
}

func (s *suite) listEmpty(t *testing.T) {
	st := s.store(t)
	tasks, next, err := st.List(t.Context(), "nobody", "", 10)
	if err != nil || len(tasks) != 0 || next != "" {
		t.Errorf("List of an empty store = %v, %q, %v", tasks, next, err)
	}
	mustCreate(t, st, newTask("alice", base))
	tasks, next, err = st.List(t.Context(), "bob", "", 10)
	if err != nil || len(tasks) != 0 || next != "" {
		t.Errorf("List of another owner = %v, %q, %v", tasks, next, err)
	}
}

func (s *suite) listBadCursor(t *testing.T) {
	st := s.store(t)
	for i := range 5 {
		mustCreate(t, st, newTask("alice", base.Add(time.Duration(i)*time.Second)))
	}
	_, cursor, err := st.List(t.Context(), "alice", "", 2)
	if err != nil || cursor == "" {
		t.Fatalf("List = %q, %v; want a cursor", cursor, err)
	}
	if _, _, err := st.List(t.Context(), "alice", cursor, 2); err != nil {
		t.Fatalf("List with a valid cursor: %v", err)
	}
	bad := []string{
		"garbage",
		"!!!!",
		"%00",
		"0",
		"{}",
		strings.Repeat("A", 64),
		cursor[:len(cursor)-1],
		cursor[:len(cursor)/2],
		cursor + "A",
		cursor + cursor,
		" " + cursor,
	}
	for _, i := range []int{0, len(cursor) / 3, len(cursor) / 2, 2 * len(cursor) / 3} {
		b := []byte(cursor)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		bad = append(bad, string(b))
	}
	for _, c := range bad {
		tasks, next, err := st.List(t.Context(), "alice", c, 2)
		if !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("List with cursor %q: err = %v, want store.ErrBadCursor", c, err)
		}
		if len(tasks) != 0 || next != "" {
			t.Errorf("List with cursor %q returned %d tasks, next %q", c, len(tasks), next)
		}
	}
	// A cursor is bound to the listing that issued it.
	if _, _, err := st.List(t.Context(), "bob", cursor, 2); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("List of another owner with alice's cursor: err = %v, want store.ErrBadCursor", err)
	}
}

func (s *suite) listActive(t *testing.T) {
	st := s.store(t)
	tasks, err := st.ListActive(t.Context())
	if err != nil || len(tasks) != 0 {
		t.Fatalf("ListActive of an empty store = %v, %v", tasks, err)
	}
	var active []*task.Task
	statuses := []task.Status{task.Working, task.Completed, task.InputRequired, task.Failed, task.Cancelled}
	for i := range 20 {
		// Creation times out of insertion order.
		created := base.Add(time.Duration((i*11)%20) * time.Minute)
		tk := newTask(task.Owner(fmt.Sprintf("owner-%d", i%3)), created)
		tk.Status = statuses[i%len(statuses)]
		tk.Runner = "engine-old"
		if !tk.Status.Terminal() {
			active = append(active, tk)
		}
		mustCreate(t, st, tk)
	}
	slices.SortFunc(active, func(a, b *task.Task) int { return a.CreatedAt.Compare(b.CreatedAt) })
	got, err := st.ListActive(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), ids(active)) {
		t.Fatalf("ListActive = %v, want oldest first %v", ids(got), ids(active))
	}
	for i := range got {
		checkTask(t, "active task", got[i], want(active[i]))
	}

	// Ending a task removes it from the list; input_required stays.
	if _, err := st.Update(t.Context(), active[0].ID, func(tk *task.Task) error { return tk.Cancel("", base) }); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(t.Context(), active[1].ID, func(tk *task.Task) error {
		_, err := tk.AddInputRequest(json.RawMessage(`{}`), base)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	got, err = st.ListActive(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), ids(active[1:])) {
		t.Errorf("ListActive after cancelling the oldest = %v, want %v", ids(got), ids(active[1:]))
	}
}

func (s *suite) deleteExpired(t *testing.T) {
	st := s.store(t)
	now := base.Add(10 * time.Hour).Truncate(time.Millisecond)

	terminal := func(status task.Status, lastUpdated time.Time, ttl time.Duration) *task.Task {
		tk := newTask("alice", base)
		tk.Status = status
		tk.LastUpdatedAt = lastUpdated
		tk.TTL = ttl
		return tk
	}
	var expired, kept []*task.Task
	// Terminal and past retention: deleted, whatever the terminal status.
	expired = append(expired,
		terminal(task.Completed, now.Add(-2*time.Hour), time.Hour),
		terminal(task.Failed, now.Add(-time.Hour-time.Millisecond), time.Hour),
		terminal(task.Cancelled, now.Add(-time.Second), 999*time.Millisecond),
		terminal(task.Completed, now.Add(-time.Millisecond), 0),
	)
	// Terminal and within retention, or exactly at its end: kept.
	kept = append(kept,
		terminal(task.Completed, now.Add(-time.Hour), time.Hour),
		terminal(task.Failed, now.Add(-30*time.Minute), time.Hour),
		terminal(task.Cancelled, now, 0),
		terminal(task.Completed, now.Add(time.Hour), time.Hour),
		terminal(task.Completed, now.Add(-time.Hour), 24*365*time.Hour),
	)
	// Non-terminal tasks are never deleted, however old.
	kept = append(kept,
		terminal(task.Working, now.Add(-1000*time.Hour), time.Millisecond),
		terminal(task.InputRequired, now.Add(-1000*time.Hour), 0),
	)
	for _, tk := range kept[len(kept)-2:] {
		if tk.Expired(now) {
			t.Fatalf("test bug: a %s task counts as expired", tk.Status)
		}
	}
	for _, tk := range expired {
		if !tk.Expired(now) {
			t.Fatalf("test bug: %s task expiring at %v is not expired at %v", tk.Status, tk.ExpiresAt(), now)
		}
	}
	mustCreate(t, st, expired...)
	mustCreate(t, st, kept...)

	n, err := st.DeleteExpired(t.Context(), now)
	if err != nil {
		t.Fatalf("DeleteExpired: %v", err)
	}
	if n != len(expired) {
		t.Errorf("DeleteExpired = %d, want %d", n, len(expired))
	}
	for _, tk := range expired {
		if _, err := st.Get(t.Context(), tk.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("expired %s task (expired at %v): Get err = %v, want ErrNotFound", tk.Status, tk.ExpiresAt(), err)
		}
	}
	for _, tk := range kept {
		if _, err := st.Get(t.Context(), tk.ID); err != nil {
			t.Errorf("kept %s task (expires at %v) is gone: %v", tk.Status, tk.ExpiresAt(), err)
		}
	}
	if n, err := st.DeleteExpired(t.Context(), now); err != nil || n != 0 {
		t.Errorf("second DeleteExpired = %d, %v; want 0", n, err)
	}
	// Time moves on: the first kept task now expires too.
	if n, err := st.DeleteExpired(t.Context(), now.Add(time.Millisecond)); err != nil || n != 2 {
		t.Errorf("DeleteExpired a millisecond later = %d, %v; want 2", n, err)
	}
}

func (s *suite) deleteExpiredFollowsUpdates(t *testing.T) {
	st := s.store(t)
	long := base.Add(-48 * time.Hour)
	now := base

	// A working task, created long ago, ends long ago through Update.
	ended := newTask("alice", long)
	ended.TTL = time.Hour
	// A task that ended long ago is touched again recently.
	touched := newTask("alice", long)
	touched.TTL = time.Hour
	if err := touched.Complete(json.RawMessage(`{}`), long); err != nil {
		t.Fatal(err)
	}
	// A long-running task that is still working.
	running := newTask("alice", long)
	running.TTL = time.Hour
	mustCreate(t, st, ended, touched, running)

	if _, err := st.Update(t.Context(), ended.ID, func(tk *task.Task) error {
		return tk.Complete(json.RawMessage(`{}`), long.Add(time.Minute))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(t.Context(), touched.ID, func(tk *task.Task) error {
		tk.LastUpdatedAt = now
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(t.Context(), running.ID, func(tk *task.Task) error {
		return tk.SetStatusMessage("still going", long.Add(time.Minute))
	}); err != nil {
		t.Fatal(err)
	}
	n, err := st.DeleteExpired(t.Context(), now)
	if err != nil || n != 1 {
		t.Fatalf("DeleteExpired = %d, %v; want 1", n, err)
	}
	if _, err := st.Get(t.Context(), ended.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the task ended by Update was not deleted: %v", err)
	}
	mustGet(t, st, touched.ID)
	mustGet(t, st, running.ID)
}

func (s *suite) delete(t *testing.T) {
	st := s.store(t)
	a, b := newTask("alice", base), newTask("alice", base)
	mustCreate(t, st, a, b)
	if err := st.Delete(t.Context(), a.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := st.Get(t.Context(), a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after Delete: err = %v, want ErrNotFound", err)
	}
	if err := st.Delete(t.Context(), a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second Delete: err = %v, want ErrNotFound", err)
	}
	if err := st.Delete(t.Context(), task.NewID()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Delete of an unknown task: err = %v, want ErrNotFound", err)
	}
	if _, err := st.Update(t.Context(), a.ID, func(*task.Task) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Update after Delete: err = %v, want ErrNotFound", err)
	}
	checkTask(t, "the other task", mustGet(t, st, b.ID), want(b))
	tasks, _, err := st.List(t.Context(), "alice", "", 10)
	if err != nil || !slices.Equal(ids(tasks), []task.ID{b.ID}) {
		t.Errorf("List after Delete = %v, %v; want only %s", ids(tasks), err, b.ID)
	}
	// The ID can be used again.
	again := newTask("bob", base)
	again.ID = a.ID
	mustCreate(t, st, again)
	checkTask(t, "task re-created under a deleted ID", mustGet(t, st, a.ID), want(again))
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
