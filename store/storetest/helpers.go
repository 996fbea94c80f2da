package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

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
		StartedAt:      base.Add(2*time.Second + 345_678*time.Nanosecond),
		LeaseExpiresAt: base.Add(45*time.Second + 999_999*time.Nanosecond),
		Queue:          "deploys/prod — «eu»",
		ExternalRef:    `{"upstream":"ci","taskId":"786512e5-2c8b"}`,
		IdempotencyKey: "retry-key: «é» \"quoted\" 🙂",
		Parent:         task.NewID(),
		Root:           task.NewID(),
		Correlation: map[string]string{
			"claudecode/toolUseId": "toolu_01A09q90qw90lq917835lq9",
			"example.com/trace":    "«é» \"quoted\" <&>",
		},
	}
}

// want returns what a store must give back for t: t with timestamps
// truncated to milliseconds, in UTC (a zero LeaseExpiresAt stays zero).
func want(t *task.Task) *task.Task {
	w := t.Clone()
	w.CreatedAt = ms(w.CreatedAt)
	w.LastUpdatedAt = ms(w.LastUpdatedAt)
	w.LeaseExpiresAt = ms(w.LeaseExpiresAt)
	w.StartedAt = ms(w.StartedAt)
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
	if got.Parent != want.Parent || got.Root != want.Root {
		add("Parent, Root", [2]task.ID{got.Parent, got.Root}, [2]task.ID{want.Parent, want.Root})
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
		{"StartedAt", got.StartedAt, want.StartedAt},
	} {
		if f.got.IsZero() != f.want.IsZero() {
			add(f.name+".IsZero()", f.got.IsZero(), f.want.IsZero())
		} else if !f.got.Equal(f.want) {
			add(f.name, f.got.Format(time.RFC3339Nano), f.want.Format(time.RFC3339Nano))
		} else if f.got.Location() != time.UTC {
			add(f.name+".Location()", f.got.Location(), "UTC")
		}
	}
	if got.ToolError != want.ToolError {
		add("ToolError", got.ToolError, want.ToolError)
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
	if got.Queue != want.Queue {
		add("Queue", got.Queue, want.Queue)
	}
	if got.Queued != want.Queued {
		add("Queued", got.Queued, want.Queued)
	}
	if got.ExternalRef != want.ExternalRef {
		add("ExternalRef", got.ExternalRef, want.ExternalRef)
	}
	if !maps.Equal(got.Correlation, want.Correlation) {
		add("Correlation", got.Correlation, want.Correlation)
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
		if err := st.Create(t.Context(), tk, store.CreateOptions{}); err != nil {
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

// leaseTask returns a task in status held by runner until lease; runner ""
// and a zero lease mean held by no engine. Tasks get distinct creation
// times.
func leaseTask(status task.Status, runner string, lease time.Time) *task.Task {
	tk := newTask("alice", base.Add(-time.Duration(leaseSeq.Add(1))*time.Second))
	tk.Status = status
	tk.Runner = runner
	tk.LeaseExpiresAt = lease
	return tk
}

var leaseSeq atomic.Int64

// claimedAs is what a store must hold of orig after runner claimed it
// with a lease ending at until.
func claimedAs(orig *task.Task, runner string, until time.Time) *task.Task {
	w := want(orig)
	w.Runner = runner
	w.LeaseExpiresAt = ms(until)
	return w
}

// asClaimed returns the tasks as the store holds them after runner
// claimed them with a lease ending at until.
func asClaimed(tasks []*task.Task, runner string, until time.Time) []*task.Task {
	out := make([]*task.Task, len(tasks))
	for i, tk := range tasks {
		out[i] = claimedAs(tk, runner, until)
	}
	return out
}

// checkUnchanged checks that the store still holds each task as created.
func checkUnchanged(t *testing.T, st store.Store, what string, tasks ...*task.Task) {
	t.Helper()
	for _, tk := range tasks {
		checkTask(t, what, mustGet(t, st, tk.ID), want(tk))
	}
}

func sortedIDs(l []task.ID) []task.ID {
	return slices.Sorted(slices.Values(l))
}

func newTaskWithKey(owner task.Owner, key string) *task.Task {
	tk := newTask(owner, base)
	tk.IdempotencyKey = key
	return tk
}
