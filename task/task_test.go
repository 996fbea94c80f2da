package task

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var allStatuses = []Status{Working, InputRequired, Completed, Failed, Cancelled}

// t0 is a fixed instant with sub-millisecond digits and a non-UTC zone, so
// that tests notice where the domain normalises to UTC.
var t0 = time.Date(2026, 7, 28, 12, 30, 45, 123456789, time.FixedZone("CEST", 2*3600))

func TestStatusValidAndTerminal(t *testing.T) {
	terminal := map[Status]bool{Completed: true, Failed: true, Cancelled: true}
	for _, s := range allStatuses {
		if !s.Valid() {
			t.Errorf("%q.Valid() = false, want true", s)
		}
		if got := s.Terminal(); got != terminal[s] {
			t.Errorf("%q.Terminal() = %v, want %v", s, got, terminal[s])
		}
	}
	for _, s := range []Status{"", "Working", "done", "unknown", "input-required"} {
		if s.Valid() {
			t.Errorf("%q.Valid() = true, want false", s)
		}
		if s.Terminal() {
			t.Errorf("%q.Terminal() = true, want false", s)
		}
	}
}

// TestTransitionTable checks every ordered pair of statuses against the
// specification's state machine, written out here independently of the
// package's table.
func TestTransitionTable(t *testing.T) {
	allowed := map[[2]Status]bool{
		{Working, InputRequired}:   true,
		{Working, Completed}:       true,
		{Working, Failed}:          true,
		{Working, Cancelled}:       true,
		{InputRequired, Working}:   true,
		{InputRequired, Completed}: true,
		{InputRequired, Failed}:    true,
		{InputRequired, Cancelled}: true,
	}
	for _, from := range allStatuses {
		for _, to := range allStatuses {
			want := allowed[[2]Status{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
	// Unknown statuses never take part in a transition.
	for _, s := range allStatuses {
		if CanTransition(s, "bogus") || CanTransition("bogus", s) || CanTransition("", s) {
			t.Errorf("an unknown status takes part in a transition with %s", s)
		}
	}
}

func TestTerminalNeverChanges(t *testing.T) {
	for _, from := range allStatuses {
		if !from.Terminal() {
			continue
		}
		for _, to := range allStatuses {
			tk := New(Policy{}, "alice", "tool", nil, t0)
			tk.Status = from
			before := tk.Clone()
			err := tk.Transition(to, t0.Add(time.Minute))
			var te *TransitionError
			if !errors.As(err, &te) {
				t.Fatalf("Transition(%s -> %s) error = %v, want *TransitionError", from, to, err)
			}
			if te.From != from || te.To != to {
				t.Errorf("TransitionError = %+v, want From=%s To=%s", te, from, to)
			}
			if !sameTask(tk, before) {
				t.Errorf("a refused transition %s -> %s changed the task", from, to)
			}
		}
		tk := New(Policy{}, "alice", "tool", nil, t0)
		tk.Status = from
		if err := tk.Complete(json.RawMessage(`{}`), t0); err == nil {
			t.Errorf("Complete on %s succeeded", from)
		}
		if err := tk.Fail(&Error{Code: 1, Message: "x"}, "m", t0); err == nil {
			t.Errorf("Fail on %s succeeded", from)
		}
		if err := tk.Cancel("m", t0); err == nil {
			t.Errorf("Cancel on %s succeeded", from)
		}
		if err := tk.SetStatusMessage("m", t0); err == nil {
			t.Errorf("SetStatusMessage on %s succeeded", from)
		}
		if tk.Result != nil || tk.Error != nil || tk.StatusMessage != "" {
			t.Errorf("refused operations on %s changed the task: %+v", from, tk)
		}
	}
}

func TestTransitionErrorMessage(t *testing.T) {
	e := &TransitionError{From: Completed, To: Working}
	if got, want := e.Error(), "task is already completed; a terminal task cannot become working"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e = &TransitionError{From: Working, To: Working}
	if got, want := e.Error(), "task cannot move from working to working"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestNew(t *testing.T) {
	ttl := 2 * time.Hour
	tk := New(Policy{PollInterval: time.Second}, "alice", "slow", &ttl, t0)
	if _, err := ParseID(string(tk.ID)); err != nil {
		t.Errorf("New minted a malformed ID %q: %v", tk.ID, err)
	}
	if tk.Owner != "alice" || tk.Tool != "slow" || tk.Status != Working {
		t.Errorf("New = %+v", tk)
	}
	if tk.CreatedAt.Location() != time.UTC || !tk.CreatedAt.Equal(t0) || !tk.LastUpdatedAt.Equal(t0) {
		t.Errorf("timestamps = %v, %v; want %v in UTC", tk.CreatedAt, tk.LastUpdatedAt, t0)
	}
	if tk.TTL != ttl || tk.PollInterval != time.Second {
		t.Errorf("TTL, PollInterval = %v, %v; want %v, 1s", tk.TTL, tk.PollInterval, ttl)
	}
	if other := New(Policy{}, "alice", "slow", nil, t0); other.ID == tk.ID {
		t.Error("two tasks got the same ID")
	}
}

func TestTransitionSuccess(t *testing.T) {
	tk := New(Policy{}, "alice", "tool", nil, t0)
	later := t0.Add(time.Second)
	if err := tk.Transition(InputRequired, later); err != nil {
		t.Fatal(err)
	}
	if tk.Status != InputRequired || !tk.LastUpdatedAt.Equal(later) || tk.LastUpdatedAt.Location() != time.UTC {
		t.Errorf("after Transition: %s at %v", tk.Status, tk.LastUpdatedAt)
	}
	if !tk.CreatedAt.Equal(t0) {
		t.Errorf("Transition changed CreatedAt")
	}
	// Staying put is not a transition.
	if err := tk.Transition(InputRequired, later); err == nil {
		t.Error("Transition to the same status succeeded")
	}
}

func TestTerminalClearsInputAndRunner(t *testing.T) {
	for _, end := range []func(*Task, time.Time) error{
		func(tk *Task, now time.Time) error { return tk.Complete(json.RawMessage(`{"ok":true}`), now) },
		func(tk *Task, now time.Time) error {
			return tk.Fail(&Error{Code: CodeInternalError, Message: "boom"}, "it broke", now)
		},
		func(tk *Task, now time.Time) error { return tk.Cancel("stopped", now) },
	} {
		tk := New(Policy{}, "alice", "tool", nil, t0)
		tk.Runner = "node-1"
		if _, err := tk.AddInputRequest(json.RawMessage(`{"method":"elicitation/create"}`), t0); err != nil {
			t.Fatal(err)
		}
		tk.InputResponses = map[string]json.RawMessage{"input-0": json.RawMessage(`1`)}
		if err := end(tk, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if !tk.Status.Terminal() {
			t.Errorf("status %s after ending", tk.Status)
		}
		if tk.InputRequests != nil || tk.InputResponses != nil || tk.Runner != "" {
			t.Errorf("%s task kept input requests %v, responses %v or runner %q", tk.Status, tk.InputRequests, tk.InputResponses, tk.Runner)
		}
		if tk.InputSeq != 1 {
			t.Errorf("InputSeq = %d, want 1 (it must survive the end)", tk.InputSeq)
		}
	}
}

func TestCompleteFailCancel(t *testing.T) {
	now := t0.Add(time.Minute)

	tk := New(Policy{}, "alice", "tool", nil, t0)
	if err := tk.Complete(json.RawMessage(`{"content":[]}`), now); err != nil {
		t.Fatal(err)
	}
	if tk.Status != Completed || string(tk.Result) != `{"content":[]}` || !tk.LastUpdatedAt.Equal(now) {
		t.Errorf("Complete: %+v", tk)
	}

	tk = New(Policy{}, "alice", "tool", nil, t0)
	tk.StatusMessage = "working hard"
	e := &Error{Code: CodeInvalidParams, Message: "bad", Data: json.RawMessage(`{"field":"x"}`)}
	if err := tk.Fail(e, "", now); err != nil {
		t.Fatal(err)
	}
	if tk.Status != Failed || tk.Error != e || tk.StatusMessage != "working hard" {
		t.Errorf("Fail with empty message: %+v", tk)
	}
	if got, want := e.Error(), "bad (code -32602)"; got != want {
		t.Errorf("Error.Error() = %q, want %q", got, want)
	}

	tk = New(Policy{}, "alice", "tool", nil, t0)
	if err := tk.Fail(e, "failed: bad", now); err != nil {
		t.Fatal(err)
	}
	if tk.StatusMessage != "failed: bad" {
		t.Errorf("Fail message = %q", tk.StatusMessage)
	}

	tk = New(Policy{}, "alice", "tool", nil, t0)
	tk.StatusMessage = "keep"
	if err := tk.Cancel("", now); err != nil {
		t.Fatal(err)
	}
	if tk.Status != Cancelled || tk.StatusMessage != "keep" {
		t.Errorf("Cancel with empty message: %+v", tk)
	}
	tk = New(Policy{}, "alice", "tool", nil, t0)
	if err := tk.Cancel("user asked", now); err != nil {
		t.Fatal(err)
	}
	if tk.StatusMessage != "user asked" {
		t.Errorf("Cancel message = %q", tk.StatusMessage)
	}
}

func TestSetStatusMessage(t *testing.T) {
	tk := New(Policy{}, "alice", "tool", nil, t0)
	now := t0.Add(time.Second)
	if err := tk.SetStatusMessage("50%", now); err != nil {
		t.Fatal(err)
	}
	if tk.StatusMessage != "50%" || !tk.LastUpdatedAt.Equal(now) || tk.Status != Working {
		t.Errorf("SetStatusMessage: %+v", tk)
	}
}

func TestAddInputRequestAndAnswer(t *testing.T) {
	tk := New(Policy{}, "alice", "tool", nil, t0)
	t1 := t0.Add(1 * time.Second)
	k1, err := tk.AddInputRequest(json.RawMessage(`{"method":"elicitation/create","params":{}}`), t1)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Status != InputRequired || !tk.LastUpdatedAt.Equal(t1) {
		t.Fatalf("after first request: %s at %v", tk.Status, tk.LastUpdatedAt)
	}
	t2 := t0.Add(2 * time.Second)
	k2, err := tk.AddInputRequest(json.RawMessage(`{"method":"sampling/createMessage"}`), t2)
	if err != nil {
		t.Fatal(err)
	}
	if k1 == k2 {
		t.Fatalf("two requests share the key %q", k1)
	}
	if tk.Status != InputRequired || len(tk.InputRequests) != 2 || tk.InputSeq != 2 {
		t.Fatalf("after two requests: %+v", tk)
	}

	// Unknown keys are ignored and change nothing.
	t3 := t0.Add(3 * time.Second)
	acc, ign, err := tk.Answer(map[string]json.RawMessage{"nope": json.RawMessage(`1`)}, t3)
	if err != nil || len(acc) != 0 || !slices.Equal(ign, []string{"nope"}) {
		t.Fatalf("Answer(unknown) = %v, %v, %v", acc, ign, err)
	}
	if !tk.LastUpdatedAt.Equal(t2) {
		t.Errorf("an answer that accepted nothing moved LastUpdatedAt")
	}

	// Answering one of two keeps the task waiting.
	acc, ign, err = tk.Answer(map[string]json.RawMessage{k1: json.RawMessage(`{"action":"accept"}`), "other": json.RawMessage(`2`)}, t3)
	if err != nil || !slices.Equal(acc, []string{k1}) || !slices.Equal(ign, []string{"other"}) {
		t.Fatalf("Answer(k1) = %v, %v, %v", acc, ign, err)
	}
	if tk.Status != InputRequired || !tk.LastUpdatedAt.Equal(t3) {
		t.Errorf("after a partial answer: %s at %v", tk.Status, tk.LastUpdatedAt)
	}
	if _, ok := tk.InputRequests[k1]; ok {
		t.Errorf("answered request %s is still outstanding", k1)
	}
	if string(tk.InputResponses[k1]) != `{"action":"accept"}` {
		t.Errorf("response for %s = %s", k1, tk.InputResponses[k1])
	}

	// An already answered key is ignored.
	acc, ign, err = tk.Answer(map[string]json.RawMessage{k1: json.RawMessage(`"again"`)}, t3)
	if err != nil || len(acc) != 0 || !slices.Equal(ign, []string{k1}) {
		t.Fatalf("Answer(k1 again) = %v, %v, %v", acc, ign, err)
	}
	if string(tk.InputResponses[k1]) != `{"action":"accept"}` {
		t.Errorf("a second answer replaced the first: %s", tk.InputResponses[k1])
	}

	// The last answer returns the task to working.
	t4 := t0.Add(4 * time.Second)
	if acc, _, err = tk.Answer(map[string]json.RawMessage{k2: json.RawMessage(`{}`)}, t4); err != nil || len(acc) != 1 {
		t.Fatalf("Answer(k2) = %v, %v", acc, err)
	}
	if tk.Status != Working || len(tk.InputRequests) != 0 || !tk.LastUpdatedAt.Equal(t4) {
		t.Errorf("after answering everything: %s, %v outstanding, at %v", tk.Status, tk.InputRequests, tk.LastUpdatedAt)
	}

	// Keys stay unique for the task's lifetime, even after all answers.
	k3, err := tk.AddInputRequest(json.RawMessage(`{}`), t4)
	if err != nil {
		t.Fatal(err)
	}
	if k3 == k1 || k3 == k2 {
		t.Errorf("key %q reused after answers", k3)
	}
	if tk.InputSeq != 3 || tk.Status != InputRequired {
		t.Errorf("after third request: seq %d, status %s", tk.InputSeq, tk.Status)
	}

	// The handler consumes responses exactly once.
	if v, ok := tk.TakeResponse(k1); !ok || string(v) != `{"action":"accept"}` {
		t.Errorf("TakeResponse(k1) = %s, %v", v, ok)
	}
	if _, ok := tk.TakeResponse(k1); ok {
		t.Error("TakeResponse returned the same response twice")
	}
	if _, ok := tk.TakeResponse("never"); ok {
		t.Error("TakeResponse returned a response for an unknown key")
	}
}

func TestInputKeysUniqueOverManyRequests(t *testing.T) {
	tk := New(Policy{}, "alice", "tool", nil, t0)
	seen := map[string]bool{}
	for i := range 200 {
		k, err := tk.AddInputRequest(json.RawMessage(`{}`), t0)
		if err != nil {
			t.Fatal(err)
		}
		if seen[k] {
			t.Fatalf("request %d reused key %q", i, k)
		}
		seen[k] = true
		if i%10 != 0 { // every tenth left outstanding: fewer than the cap

			if _, _, err := tk.Answer(map[string]json.RawMessage{k: json.RawMessage(`true`)}, t0); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestInputRequestCaps: past MaxPendingInputRequests outstanding
// requests, or MaxPendingInputBytes of them, AddInputRequest refuses with
// ErrTooManyInputRequests and leaves the task as it was.
func TestInputRequestCaps(t *testing.T) {
	tk := New(Policy{}, "alice", "tool", nil, t0)
	for range MaxPendingInputRequests {
		if _, err := tk.AddInputRequest(json.RawMessage(`{}`), t0); err != nil {
			t.Fatal(err)
		}
	}
	before := tk.Clone()
	if _, err := tk.AddInputRequest(json.RawMessage(`{}`), t0.Add(time.Second)); !errors.Is(err, ErrTooManyInputRequests) {
		t.Fatalf("one request too many: %v", err)
	}
	if !reflect.DeepEqual(tk, before) {
		t.Errorf("the refused request changed the task")
	}
	big := New(Policy{}, "alice", "tool", nil, t0)
	if _, err := big.AddInputRequest(json.RawMessage(`"`+strings.Repeat("x", MaxPendingInputBytes-2)+`"`), t0); err != nil {
		t.Fatalf("a request of MaxPendingInputBytes: %v", err)
	}
	if _, err := big.AddInputRequest(json.RawMessage(`{}`), t0); !errors.Is(err, ErrTooManyInputRequests) || len(big.InputRequests) != 1 || big.InputSeq != 1 {
		t.Errorf("a request past MaxPendingInputBytes: %v, %d requests", err, len(big.InputRequests))
	}
}

func TestInputRefusedWhenTerminal(t *testing.T) {
	for _, s := range []Status{Completed, Failed, Cancelled} {
		tk := New(Policy{}, "alice", "tool", nil, t0)
		tk.Status = s
		if _, err := tk.AddInputRequest(json.RawMessage(`{}`), t0); err == nil {
			t.Errorf("AddInputRequest on a %s task succeeded", s)
		}
		if tk.InputSeq != 0 || tk.InputRequests != nil {
			t.Errorf("a refused AddInputRequest changed the %s task: %+v", s, tk)
		}
		var te *TransitionError
		if _, _, err := tk.Answer(map[string]json.RawMessage{"input-1": json.RawMessage(`1`)}, t0); !errors.As(err, &te) {
			t.Errorf("Answer on a %s task: err = %v, want *TransitionError", s, err)
		}
	}
}

func TestPolicyTTL(t *testing.T) {
	d := func(v time.Duration) *time.Duration { return &v }
	tests := []struct {
		name string
		p    Policy
		req  *time.Duration
		want time.Duration
	}{
		{"nil gets default", Policy{}, nil, DefaultTTL},
		{"zero gets default", Policy{}, d(0), DefaultTTL},
		{"negative gets default", Policy{}, d(-time.Minute), DefaultTTL},
		{"within max", Policy{}, d(3 * time.Hour), 3 * time.Hour},
		{"exactly max", Policy{}, d(DefaultMaxTTL), DefaultMaxTTL},
		{"above max capped", Policy{}, d(48 * time.Hour), DefaultMaxTTL},
		{"huge capped", Policy{}, d(1<<63 - 1), DefaultMaxTTL},
		{"custom default", Policy{DefaultTTL: 10 * time.Minute}, nil, 10 * time.Minute},
		{"custom max caps request", Policy{MaxTTL: time.Minute}, d(time.Hour), time.Minute},
		{"custom max caps default", Policy{DefaultTTL: time.Hour, MaxTTL: time.Minute}, nil, time.Minute},
		{"default above built-in max capped", Policy{DefaultTTL: 100 * time.Hour}, nil, DefaultMaxTTL},
		{"negative settings mean defaults", Policy{DefaultTTL: -1, MaxTTL: -1}, nil, DefaultTTL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.TTL(tt.req); got != tt.want {
				t.Errorf("TTL = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPolicyPollAndMax(t *testing.T) {
	if got := (Policy{}).Poll(); got != DefaultPollInterval {
		t.Errorf("zero Poll() = %v", got)
	}
	if got := (Policy{PollInterval: -time.Second}).Poll(); got != DefaultPollInterval {
		t.Errorf("negative Poll() = %v", got)
	}
	if got := (Policy{PollInterval: 2 * time.Second}).Poll(); got != 2*time.Second {
		t.Errorf("Poll() = %v", got)
	}
	if got := (Policy{}).MaxRetention(); got != DefaultMaxTTL {
		t.Errorf("zero MaxRetention() = %v", got)
	}
	if got := (Policy{MaxTTL: time.Minute}).MaxRetention(); got != time.Minute {
		t.Errorf("MaxRetention() = %v", got)
	}
}

func TestExpired(t *testing.T) {
	tk := New(Policy{}, "alice", "tool", nil, t0)
	tk.TTL = time.Minute
	end := t0.Add(time.Second)
	if tk.Expired(end.Add(24 * time.Hour)) {
		t.Error("a working task expired")
	}
	tk.Status = InputRequired
	if tk.Expired(end.Add(24 * time.Hour)) {
		t.Error("an input_required task expired")
	}
	tk.Status = Working
	if err := tk.Complete(nil, end); err != nil {
		t.Fatal(err)
	}
	if want := end.Add(time.Minute); !tk.ExpiresAt().Equal(want) {
		t.Errorf("ExpiresAt = %v, want %v (TTL counts from the last change)", tk.ExpiresAt(), want)
	}
	for _, c := range []struct {
		now  time.Time
		want bool
	}{
		{end, false},
		{tk.ExpiresAt().Add(-time.Nanosecond), false},
		{tk.ExpiresAt(), false},
		{tk.ExpiresAt().Add(time.Nanosecond), true},
		{tk.ExpiresAt().Add(time.Hour), true},
	} {
		if got := tk.Expired(c.now); got != c.want {
			t.Errorf("Expired(%v) = %v, want %v", c.now, got, c.want)
		}
	}
}

func TestClone(t *testing.T) {
	tk := New(Policy{}, "alice", "tool", nil, t0)
	tk.Request = json.RawMessage(`{"a":1}`)
	tk.Result = json.RawMessage(`{"b":2}`)
	tk.Error = &Error{Code: 1, Message: "m", Data: json.RawMessage(`[1]`)}
	tk.InputRequests = map[string]json.RawMessage{"input-1": json.RawMessage(`{"c":3}`)}
	tk.InputResponses = map[string]json.RawMessage{"input-0": json.RawMessage(`{"d":4}`)}
	c := tk.Clone()
	if !sameTask(c, tk) {
		t.Fatalf("Clone differs: %+v vs %+v", c, tk)
	}
	c.Request[2] = 'X'
	c.Result[2] = 'X'
	c.Error.Data[1] = '9'
	c.Error.Message = "changed"
	c.InputRequests["input-1"][2] = 'X'
	c.InputRequests["new"] = nil
	c.InputResponses["input-0"][2] = 'X'
	if string(tk.Request) != `{"a":1}` || string(tk.Result) != `{"b":2}` || string(tk.Error.Data) != `[1]` ||
		tk.Error.Message != "m" || string(tk.InputRequests["input-1"]) != `{"c":3}` || len(tk.InputRequests) != 1 ||
		string(tk.InputResponses["input-0"]) != `{"d":4}` {
		t.Errorf("changing the clone changed the original: %+v", tk)
	}
	empty := (&Task{}).Clone()
	if empty.Request != nil || empty.Error != nil || empty.InputRequests != nil {
		t.Errorf("Clone of an empty task invented fields: %+v", empty)
	}
}

func TestFormatTime(t *testing.T) {
	if got, want := FormatTime(t0), "2026-07-28T10:30:45.123Z"; got != want {
		t.Errorf("FormatTime = %q, want %q", got, want)
	}
	if got, want := FormatTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), "2026-01-02T03:04:05.000Z"; got != want {
		t.Errorf("FormatTime = %q, want %q", got, want)
	}
}

// sameTask reports whether two tasks hold equal values, JSON compared as bytes.
func sameTask(a, b *Task) bool { return reflect.DeepEqual(a, b) }

func TestMessagesCapped(t *testing.T) {
	now := time.Now()
	huge := strings.Repeat("é", 3<<20) // 6 MB of two-byte characters
	tk := New(Policy{}, "o", "t", nil, now)
	if err := tk.SetStatusMessage(huge, now); err != nil {
		t.Fatal(err)
	}
	if n := len(tk.StatusMessage); n > MaxStatusMessage || !utf8.ValidString(tk.StatusMessage) || !strings.HasSuffix(tk.StatusMessage, "…") {
		t.Errorf("status message of %d bytes (valid UTF-8 %v), want at most %d ending in …", n, utf8.ValidString(tk.StatusMessage), MaxStatusMessage)
	}
	if err := tk.Fail(&Error{Code: -32602, Message: huge}, huge, now); err != nil {
		t.Fatal(err)
	}
	if len(tk.Error.Message) > MaxErrorMessage || len(tk.StatusMessage) > MaxStatusMessage {
		t.Errorf("failed task: error message of %d bytes, status message of %d", len(tk.Error.Message), len(tk.StatusMessage))
	}
	if short := CapStatusMessage("step 2 of 5"); short != "step 2 of 5" {
		t.Errorf("a short message was changed: %q", short)
	}
}
