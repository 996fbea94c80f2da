package mcptask_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// limitReason returns data.reason of a CodeLimitExceeded error, or "".
func limitReason(t *testing.T, err error) string {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != mcptask.CodeLimitExceeded {
		return ""
	}
	var d struct {
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(je.Data, &d); err != nil {
		t.Fatalf("limit error data %s: %v", je.Data, err)
	}
	return d.Reason
}

// TestLimits2025 checks the per-requester limits on the 2025-11-25 wire
// (the 2026-07-28 wire's are checked end to end in cmd/mcptaskd): the cap
// on unfinished tasks, the tasks/* request rate and raised poll intervals.
func TestLimits2025(t *testing.T) {
	s := startRaw2025With(t, mcptask.Options{Limits: mcptask.Limits{
		MaxActiveTasks:  2,
		RequestRate:     0.001, // no token comes back during the test
		RequestBurst:    6,
		MaxPollInterval: time.Hour,
	}}, nil)
	a := s.callTask(t, "work", map[string]any{"label": "a", "millis": -1}, nil)
	s.callTask(t, "work", map[string]any{"label": "b", "millis": -1}, nil)
	err := s.call("tools/call", map[string]any{"name": "work", "arguments": map[string]any{"label": "c", "millis": -1}, "task": map[string]any{}}, nil)
	if limitReason(t, err) != mcptask.ReasonTooManyActiveTasks {
		t.Fatalf("third unfinished task: %v", err)
	}
	// A plain call is no task: not capped.
	if err := s.call("tools/call", map[string]any{"name": "plain", "arguments": map[string]any{"label": "p"}}, nil); err != nil {
		t.Fatalf("plain call: %v", err)
	}

	// Rapid polls: the suggested interval doubles at each.
	var got []int64
	for range 3 {
		var res task2025
		if err := s.call("tasks/get", map[string]any{"taskId": a.TaskID}, &res); err != nil {
			t.Fatal(err)
		}
		got = append(got, res.PollInterval)
	}
	if got[1] != 2*got[0] || got[2] != 4*got[0] {
		t.Fatalf("pollInterval of rapid polls: %v", got)
	}
	// The burst of 6 tasks/* requests: 3 spent, 3 left, then refused.
	var list struct {
		Tasks []task2025 `json:"tasks"`
	}
	for range 2 {
		if err := s.call("tasks/list", map[string]any{}, &list); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.call("tasks/cancel", map[string]any{"taskId": a.TaskID}, nil); err != nil {
		t.Fatal(err)
	}
	err = s.call("tasks/get", map[string]any{"taskId": a.TaskID}, nil)
	if limitReason(t, err) != mcptask.ReasonRateLimited {
		t.Fatalf("7th tasks/* request: %v", err)
	}
	// The cancellation freed a slot; creations are not tasks/* requests.
	s.callTask(t, "work", map[string]any{"label": "d", "millis": -1}, nil)
}
