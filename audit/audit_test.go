package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// records returns the JSON records written to buf.
func records(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func TestNilLoggerWritesNothing(t *testing.T) {
	var a *Logger
	ctx := context.Background()
	a.Created(ctx, Task{ID: "x"}, "w", time.Second)
	a.Limited(ctx, "anon:", "tasks/get", "", "request_rate")
	if a.Enabled() || New(nil).Enabled() {
		t.Fatal("a nil logger is enabled")
	}
	New(nil).Denied(ctx, Denial{Requester: "anon:", Task: "x", Op: "tasks/get", Reason: ReasonUnknown})
}

func TestRecords(t *testing.T) {
	var buf bytes.Buffer
	a := New(slog.New(slog.NewJSONHandler(&buf, nil)))
	ctx := context.Background()
	tk := Task{ID: "t1", Tool: "deploy", Owner: "user:acme/alice"}
	a.Created(ctx, tk, "2026-07-28", time.Hour)
	a.StatusChanged(ctx, tk, "working", "failed", -32603)
	a.ResultRetrieved(ctx, "user:acme/alice", tk, "failed", "tasks/result")
	a.Cancelled(ctx, "user:acme/alice", tk)
	a.Denied(ctx, Denial{Requester: "user:globex/mallory", Task: "t1", Op: "tasks/get", Reason: ReasonOtherOwner, Owner: tk.Owner, Tool: tk.Tool})
	a.Denied(ctx, Denial{Requester: "anon:s1", Task: "t2", Op: "tasks/cancel", Reason: ReasonUnknown})
	rs := records(t, &buf)
	if len(rs) != 6 {
		t.Fatalf("%d records", len(rs))
	}
	for _, r := range rs {
		if r["msg"] != Message {
			t.Fatalf("message %v", r["msg"])
		}
	}
	check := func(i int, want map[string]any) {
		t.Helper()
		for k, v := range want {
			if rs[i][k] != v {
				t.Errorf("record %d: %s = %v, want %v (%v)", i, k, rs[i][k], v, rs[i])
			}
		}
	}
	check(0, map[string]any{"event": EventCreated, "task": "t1", "tool": "deploy", "principal": "alice", "tenant": "acme", "wire": "2026-07-28"})
	check(1, map[string]any{"event": EventStatusChanged, "from": "working", "to": "failed", "code": float64(-32603)})
	check(2, map[string]any{"event": EventResultRetrieved, "principal": "alice", "owner_principal": "alice", "owner_tenant": "acme", "method": "tasks/result"})
	check(3, map[string]any{"event": EventCancelled, "principal": "alice", "owner_principal": "alice"})
	check(4, map[string]any{"event": EventDenied, "principal": "mallory", "tenant": "globex", "reason": ReasonOtherOwner, "owner_principal": "alice", "tool": "deploy"})
	check(5, map[string]any{"event": EventDenied, "principal": "anonymous", "session": "s1", "reason": ReasonUnknown})
	if _, ok := rs[5]["owner_principal"]; ok {
		t.Error("a denial of an unknown task names an owner")
	}
}

// TestLimitedCoalesces: a flood of refusals writes one record per
// requester and limit per LimitedEvery, counting the refusals.
func TestLimitedCoalesces(t *testing.T) {
	var buf bytes.Buffer
	a := New(slog.New(slog.NewJSONHandler(&buf, nil)))
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }
	ctx := context.Background()
	for range 1000 {
		a.Limited(ctx, "user:acme/mallory", "tasks/get", "", "request_rate")
	}
	a.Limited(ctx, "user:acme/alice", "tools/call", "deploy", "create_rate")
	a.Limited(ctx, "user:acme/mallory", "tools/call", "deploy", "active_tasks")
	now = now.Add(LimitedEvery)
	a.Limited(ctx, "user:acme/mallory", "tasks/list", "", "request_rate")
	rs := records(t, &buf)
	if len(rs) != 4 {
		t.Fatalf("%d records, want 4: %v", len(rs), rs)
	}
	want := []struct {
		principal, limit string
		refused          float64
	}{{"mallory", "request_rate", 1}, {"alice", "create_rate", 1}, {"mallory", "active_tasks", 1}, {"mallory", "request_rate", 1000}}
	for i, w := range want {
		r := rs[i]
		if r["event"] != EventLimited || r["principal"] != w.principal || r["limit"] != w.limit || r["refused"] != w.refused {
			t.Errorf("record %d: %v, want %+v", i, r, w)
		}
	}
}

// TestCorrelationGroup: a task's host correlation keys are one attribute
// group, "correlation", in its records; a task without any has none.
func TestCorrelationGroup(t *testing.T) {
	var buf bytes.Buffer
	a := New(slog.New(slog.NewJSONHandler(&buf, nil)))
	ctx := context.Background()
	a.Created(ctx, Task{ID: "t1", Tool: "deploy", Correlation: map[string]string{"claudecode/toolUseId": "toolu_01", "b/x": "2"}}, "2026-07-28", time.Hour)
	a.Created(ctx, Task{ID: "t2", Tool: "deploy"}, "2026-07-28", time.Hour)
	rs := records(t, &buf)
	if len(rs) != 2 {
		t.Fatalf("%d records", len(rs))
	}
	got, _ := rs[0]["correlation"].(map[string]any)
	if got["claudecode/toolUseId"] != "toolu_01" || got["b/x"] != "2" || len(got) != 2 {
		t.Errorf("correlation of the first record: %v", rs[0]["correlation"])
	}
	if _, ok := rs[1]["correlation"]; ok {
		t.Errorf("a task without correlation has %v", rs[1]["correlation"])
	}
}
