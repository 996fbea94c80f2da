package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// jobCall is the answer to a plain tools/call of a job tool.
type jobCall struct {
	IsError bool `json:"isError"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	Structured struct {
		TaskID        string                     `json:"taskId"`
		Tool          string                     `json:"tool"`
		Status        string                     `json:"status"`
		StatusMessage string                     `json:"statusMessage"`
		Done          bool                       `json:"done"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
	} `json:"structuredContent"`
}

func (j jobCall) text() string {
	var parts []string
	for _, c := range j.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// callJob calls a job tool as a plain tools/call (the client declares no
// task support) and decodes its result; a JSON-RPC error fails the test.
func callJob(t *testing.T, c *wiretest.Client, tool string, args map[string]any) jobCall {
	t.Helper()
	r, err := c.Call(context.Background(), "tools/call", map[string]any{"name": tool, "arguments": args}, nil)
	if err != nil || r.Error != nil {
		t.Fatalf("tools/call %s: %+v %v", tool, r, err)
	}
	var j jobCall
	if err := json.Unmarshal(r.Result, &j); err != nil {
		t.Fatalf("tools/call %s: %s: %v", tool, r.Result, err)
	}
	return j
}

// TestJobTools: with jobTools enabled, a client without task support
// drives long jobs through ordinary tools on a real mcptaskd: job_start
// starts a tool as a task owned by the caller, job_status follows it to
// completion, job_result gives the tool's result (and says "not finished"
// before), job_cancel cancels, job_answer answers a question; another
// principal's job looks unknown to every job tool; the drain switch and
// the tool's task support apply; creation is audited as for any task.
func TestJobTools(t *testing.T) {
	t.Parallel()
	const aliceTok, bobTok = "job-alice-token-0123456789ab", "job-bob-token-0123456789abcd"
	tokens := writeTokens(t,
		map[string]any{"token": aliceTok, "principal": "alice", "tenant": "acme", "scopes": []string{"mcptask:admin"}},
		map[string]any{"token": bobTok, "principal": "bob", "tenant": "acme"})
	config := filepath.Join(t.TempDir(), "mcptaskd.yaml")
	if err := os.WriteFile(config, []byte("demo: true\njobTools: {enabled: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "jobs", filepath.Join(t.TempDir(), "tasks.db"), "-tokens", tokens, "-config", config, "-poll-interval", "50ms")
	alice, bob := d.client(false), d.client(false)
	alice.Header = http.Header{"Authorization": {"Bearer " + aliceTok}}
	bob.Header = http.Header{"Authorization": {"Bearer " + bobTok}}
	waitJob := func(c *wiretest.Client, id, what string, cond func(jobCall) bool) jobCall {
		t.Helper()
		var j jobCall
		waitUntil(t, 30*time.Second, "job "+id+" "+what, func() (bool, error) {
			j = callJob(t, c, "job_status", map[string]any{"taskId": id})
			if j.IsError {
				t.Fatalf("job_status %s: %s", id, j.text())
			}
			return cond(j), nil
		})
		return j
	}

	// Start, follow, collect.
	j := callJob(t, alice, "job_start", map[string]any{"tool": "long_computation", "arguments": map[string]any{"n": 1000, "steps": 3, "step_delay_ms": 10}})
	id := j.Structured.TaskID
	if j.IsError || id == "" || j.Structured.Tool != "long_computation" || !strings.Contains(j.text(), "job_status") {
		t.Fatalf("job_start: %+v %s", j, j.text())
	}
	waitJob(alice, id, "done", func(j jobCall) bool { return j.Structured.Done })
	j = callJob(t, alice, "job_result", map[string]any{"taskId": id})
	if j.IsError || !strings.Contains(j.text(), "There are 168 primes up to 1000") {
		t.Fatalf("job_result: %s", j.text())
	}
	// The job is a task: tasks/get of its owner sees it.
	alice26 := d.client(true)
	alice26.Header = alice.Header
	if tk, err := alice26.Get(context.Background(), id); err != nil || tk.Status != "completed" {
		t.Fatalf("tasks/get of a job: %+v %v", tk, err)
	}

	// Another principal's job looks unknown.
	for _, tool := range []string{"job_status", "job_result", "job_cancel"} {
		if j := callJob(t, bob, tool, map[string]any{"taskId": id}); !j.IsError || !strings.Contains(j.text(), "not found") {
			t.Fatalf("%s of alice's job by bob: %s", tool, j.text())
		}
	}
	if j := callJob(t, bob, "job_answer", map[string]any{"taskId": id, "answers": map[string]any{"x": map[string]any{"action": "accept"}}}); !j.IsError || !strings.Contains(j.text(), "not found") {
		t.Fatalf("job_answer of alice's job by bob: %s", j.text())
	}

	// Not finished yet, then cancelled.
	long := callJob(t, alice, "job_start", map[string]any{"tool": "long_computation", "arguments": map[string]any{"n": 100000, "steps": 1000, "step_delay_ms": 50}}).Structured.TaskID
	if j := callJob(t, alice, "job_result", map[string]any{"taskId": long}); j.IsError || j.Structured.Done || !strings.Contains(j.text(), "Not finished yet") {
		t.Fatalf("job_result of a running job: %s", j.text())
	}
	if j := callJob(t, bob, "job_cancel", map[string]any{"taskId": long}); !j.IsError {
		t.Fatalf("bob cancelled alice's job: %s", j.text())
	}
	if j := callJob(t, alice, "job_cancel", map[string]any{"taskId": long}); j.IsError || j.Structured.Status != "cancelled" {
		t.Fatalf("job_cancel: %s", j.text())
	}
	if j := callJob(t, alice, "job_result", map[string]any{"taskId": long}); !j.IsError || !strings.Contains(j.text(), "cancelled") {
		t.Fatalf("job_result of a cancelled job: %s", j.text())
	}

	// A question, answered with job_answer.
	deploy := callJob(t, alice, "job_start", map[string]any{"tool": "deploy_with_confirmation", "arguments": map[string]any{"service": "api", "build_steps": 1, "step_delay_ms": 0}}).Structured.TaskID
	j = waitJob(alice, deploy, "input_required", func(j jobCall) bool { return j.Structured.Status == "input_required" })
	if len(j.Structured.InputRequests) != 1 || !strings.Contains(j.text(), "job_answer") {
		t.Fatalf("job_status of a job waiting for input: %s", j.text())
	}
	var key string
	for k := range j.Structured.InputRequests {
		key = k
	}
	if j := callJob(t, alice, "job_answer", map[string]any{"taskId": deploy, "answers": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"confirm": "yes"}}}}); !j.IsError {
		t.Fatalf("an answer the schema rejects was accepted: %s", j.text())
	}
	if j := callJob(t, alice, "job_answer", map[string]any{"taskId": deploy, "answers": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}}); j.IsError {
		t.Fatalf("job_answer: %s", j.text())
	}
	waitJob(alice, deploy, "done", func(j jobCall) bool { return j.Structured.Done })
	if j := callJob(t, alice, "job_result", map[string]any{"taskId": deploy}); j.IsError || !strings.Contains(j.text(), "Deployed api@latest") {
		t.Fatalf("job_result of the deploy: %s", j.text())
	}

	// What a task-augmented call gets applies: a tool without task
	// support, the input schema, the drain switch.
	if j := callJob(t, alice, "job_start", map[string]any{"tool": "echo", "arguments": map[string]any{"text": "x"}}); !j.IsError || !strings.Contains(j.text(), "runs as a task") {
		t.Fatalf("job_start of a tool without task support: %s", j.text())
	}
	if j := callJob(t, alice, "job_start", map[string]any{"tool": "long_computation", "arguments": map[string]any{"n": "many"}}); !j.IsError || j.Structured.TaskID != "" {
		t.Fatalf("job_start with arguments the schema rejects: %s", j.text())
	}
	wantAdmin(t, "drain", adminDo(t, d.Base, http.MethodPut, aliceTok, map[string]any{"tools": []string{"long_computation"}}, nil), http.StatusOK)
	if j := callJob(t, alice, "job_start", map[string]any{"tool": "long_computation", "arguments": map[string]any{"n": 10}}); !j.IsError || !strings.Contains(j.text(), "draining") {
		t.Fatalf("job_start of a drained tool: %s", j.text())
	}

	created := 0
	for _, rec := range d.LogRecords("audit") {
		if rec["event"] == "task.created" && rec["wire"] == "jobs" && rec["principal"] == "alice" {
			created++
		}
	}
	if created != 3 {
		t.Errorf("%d task.created records of alice's jobs, want 3", created)
	}
}
