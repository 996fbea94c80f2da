package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runIntegrity checks what a store refuses and what it keeps exactly: an
// invalid task is never written, an Update may not change a task's ID,
// JSON comes back byte for byte, and neither a panic in an Update's fn nor
// an ended context writes anything or leaves the store unusable.
func (s *suite) runIntegrity(t *testing.T) {
	run(t, []testCase{
		{"InvalidRefused", s.integrityInvalidRefused},
		{"UpdateKeepsID", s.integrityUpdateKeepsID},
		{"ExactJSON", s.integrityExactJSON},
		{"UpdatePanic", s.integrityUpdatePanic},
		{"CanceledContext", s.integrityCanceledContext},
	})
}

func (s *suite) integrityInvalidRefused(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	for name, mutate := range map[string]func(*task.Task){
		"empty ID":           func(tk *task.Task) { tk.ID = "" },
		"malformed ID":       func(tk *task.Task) { tk.ID = "a b" },
		"unknown status":     func(tk *task.Task) { tk.Status = "paused" },
		"invalid error data": func(tk *task.Task) { tk.Error = &task.Error{Code: 1, Message: "m", Data: json.RawMessage(`{`)} },
		"invalid input JSON": func(tk *task.Task) { tk.InputRequests = map[string]json.RawMessage{"input-1": json.RawMessage(`nope`)} },
	} {
		tk := newTask("alice", base)
		mutate(tk)
		if err := st.Create(ctx, tk, store.CreateOptions{}); err == nil {
			t.Errorf("Create with %s succeeded", name)
		}
	}
	if err := st.Create(ctx, nil, store.CreateOptions{}); err == nil {
		t.Error("Create(nil) succeeded")
	}
	tasks, _, err := st.List(ctx, "alice", "", 10)
	if err != nil || len(tasks) != 0 {
		t.Errorf("List after refused creates = %d tasks, %v", len(tasks), err)
	}
}

func (s *suite) integrityUpdateKeepsID(t *testing.T) {
	st := s.store(t)
	tk := newTask("alice", base)
	mustCreate(t, st, tk)
	other := task.NewID()
	_, err := st.Update(t.Context(), tk.ID, func(t *task.Task) error {
		t.ID = other
		t.StatusMessage = "moved"
		return nil
	})
	if err == nil {
		t.Fatal("Update that changed the ID succeeded")
	}
	if _, err := st.Get(t.Context(), other); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a task appeared under the new ID: %v", err)
	}
	got, err := st.Get(t.Context(), tk.ID)
	if err != nil || got.StatusMessage != "" {
		t.Errorf("after a refused Update: %+v, %v", got, err)
	}
}

func (s *suite) integrityExactJSON(t *testing.T) {
	st := s.store(t)
	raw := json.RawMessage("{ \"a\" : [1, 2.50, 1e3],\n \"html\": \"<&>\" }")
	tk := newTask("alice", base)
	tk.Request = raw
	tk.Result = raw
	tk.Error = &task.Error{Code: 7, Message: "<m>", Data: raw}
	tk.InputRequests = map[string]json.RawMessage{"input-1": raw, "input-2": nil}
	tk.InputResponses = map[string]json.RawMessage{}
	// Escapes, key order and number spellings a JSON column would rewrite.
	escaped := newTask("alice", base)
	escaped.Request = json.RawMessage(`{ "b" : 1, "a":[1 , 2.50],"s":"\u0000\u00e9" }`)
	escaped.Result = json.RawMessage(`{"z":1,"a":1e3}`)
	escaped.InputRequests = map[string]json.RawMessage{"k": json.RawMessage(`{"y":1, "x":2}`)}
	mustCreate(t, st, tk, escaped)

	got := mustGet(t, st, tk.ID)
	for name, v := range map[string]json.RawMessage{
		"Request": got.Request, "Result": got.Result, "InputRequests": got.InputRequests["input-1"],
	} {
		if string(v) != string(raw) {
			t.Errorf("%s = %q, want %q byte for byte", name, v, raw)
		}
	}
	if got.Error == nil || string(got.Error.Data) != string(raw) || got.Error.Message != "<m>" || got.Error.Code != 7 {
		t.Errorf("Error = %+v, want code 7, message <m> and its data byte for byte", got.Error)
	}
	if string(got.InputRequests["input-2"]) != "null" {
		t.Errorf("a nil input request = %q, want null", got.InputRequests["input-2"])
	}
	if got.InputResponses == nil || len(got.InputResponses) != 0 {
		t.Errorf("an empty map came back as %#v", got.InputResponses)
	}

	gotEsc := mustGet(t, st, escaped.ID)
	if string(gotEsc.Request) != string(escaped.Request) || string(gotEsc.Result) != string(escaped.Result) ||
		string(gotEsc.InputRequests["k"]) != string(escaped.InputRequests["k"]) {
		t.Errorf("JSON changed: %s %s %s", gotEsc.Request, gotEsc.Result, gotEsc.InputRequests["k"])
	}
}

// integrityUpdatePanic checks that a panic in fn reaches the caller,
// writes nothing, and leaves the store usable (no row lock kept, no
// connection left inside a transaction).
func (s *suite) integrityUpdatePanic(t *testing.T) {
	st := s.store(t)
	tk := newTask("alice", base)
	mustCreate(t, st, tk)
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Errorf("recovered %v, want the fn's panic value", v)
			}
		}()
		st.Update(t.Context(), tk.ID, func(t *task.Task) error {
			t.StatusMessage = "half done"
			panic("boom")
		})
		t.Error("Update returned after fn panicked")
	}()
	if got := mustGet(t, st, tk.ID); got.StatusMessage != "" {
		t.Errorf("the Update that panicked wrote %q", got.StatusMessage)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	got, err := st.Update(ctx, tk.ID, func(t *task.Task) error { return t.SetStatusMessage("written", base) })
	if err != nil {
		t.Fatalf("Update after a panic: %v", err)
	}
	if got.StatusMessage != "written" {
		t.Errorf("StatusMessage = %q", got.StatusMessage)
	}
}

// integrityCanceledContext checks that a Create with an ended context
// reports context.Canceled and writes nothing, and that the store serves
// the next write. (Whether an Update whose context ends while its fn runs
// is abandoned is the backend's to say: PostgreSQL's tests check it.)
func (s *suite) integrityCanceledContext(t *testing.T) {
	st := s.store(t)
	tk := newTask("alice", base)
	mustCreate(t, st, tk)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	late := newTask("alice", base)
	if err := st.Create(ctx, late, store.CreateOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Create with an ended context: err = %v, want context.Canceled", err)
	}
	if _, err := st.Get(t.Context(), late.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a Create that reported cancellation wrote the task: %v", err)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	got, err := st.Update(wctx, tk.ID, func(t *task.Task) error { return t.SetStatusMessage("written", base) })
	if err != nil {
		t.Fatalf("Update after a canceled Create: %v", err)
	}
	if got.StatusMessage != "written" {
		t.Errorf("StatusMessage = %q", got.StatusMessage)
	}
}
