package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// limitsApp serves mcptaskd in-process with a tokens file of three
// identities (alice and bob of tenant acme, mallory of globex) and the
// given extra flags. It returns the clients of the three over the
// 2026-07-28 wire.
func limitsApp(t *testing.T, extra ...string) (alice, bob, mallory *wiretest.Client) {
	t.Helper()
	dir := t.TempDir()
	tokens := `[
		{"token": "alice-token-0123456789", "principal": "alice", "tenant": "acme"},
		{"token": "bob-token-0123456789ab", "principal": "bob", "tenant": "acme"},
		{"token": "mallory-token-01234567", "principal": "mallory", "tenant": "globex"}
	]`
	if err := os.WriteFile(filepath.Join(dir, "tokens.json"), []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	base := serveApp(t, nil, append([]string{"-db", filepath.Join(dir, "tasks.db"), "-tokens", filepath.Join(dir, "tokens.json")}, extra...)...)
	client := func(token string) *wiretest.Client {
		return &wiretest.Client{URL: base + "/mcp", Tasks: true, Header: http.Header{"Authorization": {"Bearer " + token}}}
	}
	return client("alice-token-0123456789"), client("bob-token-0123456789ab"), client("mallory-token-01234567")
}

// limitData is the data of a CodeLimitExceeded error.
type limitData struct {
	Reason       string `json:"reason"`
	Limit        string `json:"limit"`
	RetryAfterMs int64  `json:"retryAfterMs"`
}

// asLimited returns the data of err if it is a CodeLimitExceeded error.
func asLimited(t *testing.T, err error) (limitData, bool) {
	t.Helper()
	e, ok := err.(*wiretest.Error)
	if !ok || e.Code != mcptask.CodeLimitExceeded {
		return limitData{}, false
	}
	var d limitData
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatalf("limit error data %s: %v", e.Data, err)
	}
	return d, true
}

// slowTask is the arguments of a long_computation task that runs until
// cancelled (or the test ends).
var slowTask = map[string]any{"n": 1000, "steps": 5, "step_delay_ms": 60000}

// TestLimitActiveTasks floods task creation past -max-active-tasks: exactly
// the quota of tasks is created, however many calls race, the others get
// a clear error and create nothing; other principals, of the same tenant
// too, are unaffected; ending a task frees its slot.
func TestLimitActiveTasks(t *testing.T) {
	alice, bob, _ := limitsApp(t, "-max-active-tasks", "3", "-create-rate", "0")
	ctx := t.Context()

	const callers = 24
	var (
		mu      sync.Mutex
		created []string
		refused int
	)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			tk, err := alice.CallTool(ctx, "long_computation", slowTask)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				created = append(created, tk.TaskID)
				return
			}
			d, ok := asLimited(t, err)
			if !ok || d.Reason != mcptask.ReasonTooManyActiveTasks || d.Limit != "active_tasks" || !strings.Contains(err.Error(), "at most 3") {
				t.Errorf("refused creation: %v %+v", err, d)
			}
			refused++
		})
	}
	wg.Wait()
	if len(created) != 3 || refused != callers-3 {
		t.Fatalf("%d created, %d refused; want 3 and %d", len(created), refused, callers-3)
	}
	// Bob, of the same tenant, has his own quota.
	for range 3 {
		startTask(t, bob, "long_computation", slowTask)
	}
	if _, err := bob.CallTool(ctx, "long_computation", slowTask); err == nil {
		t.Fatal("bob's 4th task was created")
	}
	// Cancelling one of alice's tasks frees one slot, and one only.
	if err := alice.Result(ctx, "tasks/cancel", map[string]any{"taskId": created[0]}, nil); err != nil {
		t.Fatal(err)
	}
	startTask(t, alice, "long_computation", slowTask)
	if _, err := alice.CallTool(ctx, "long_computation", slowTask); err == nil {
		t.Fatal("alice's quota was exceeded after one cancellation")
	}
}

// TestLimitCreateRate: a principal creating tasks faster than
// -create-rate is refused with a retry hint once its burst is spent;
// another principal is not.
func TestLimitCreateRate(t *testing.T) {
	// 0.01/s: no token comes back during the test, so the counts are exact.
	alice, _, mallory := limitsApp(t, "-create-rate", "0.01", "-create-burst", "4", "-max-active-tasks", "0")
	ctx := t.Context()
	for i := range 4 {
		if _, err := alice.CallTool(ctx, "long_computation", slowTask); err != nil {
			t.Fatalf("creation %d within the burst: %v", i, err)
		}
	}
	_, err := alice.CallTool(ctx, "long_computation", slowTask)
	d, ok := asLimited(t, err)
	if !ok || d.Reason != mcptask.ReasonRateLimited || d.Limit != "create_rate" || d.RetryAfterMs < 1000 {
		t.Fatalf("5th creation: %v %+v", err, d)
	}
	// A plain call (no task) is not a creation.
	if err := alice.Result(ctx, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}, nil); err != nil {
		t.Fatalf("plain call refused: %v", err)
	}
	startTask(t, mallory, "long_computation", slowTask)
}

// TestLimitRequestFlood floods tasks/get from one principal while another
// keeps polling its own task: the flooder gets its burst and then clear
// rate-limit errors; the other principal is served every time, and its
// task runs to completion.
func TestLimitRequestFlood(t *testing.T) {
	alice, bob, mallory := limitsApp(t, "-request-rate", "0.01", "-request-burst", "25", "-create-rate", "0")
	ctx := t.Context()
	victim := startTask(t, bob, "long_computation", map[string]any{"n": 2000, "steps": 3, "step_delay_ms": 10})
	own := startTask(t, mallory, "long_computation", slowTask)

	const flood = 300
	var (
		mu                sync.Mutex
		served, limited   int
		bobServed, bobErr int
	)
	var wg sync.WaitGroup
	for i := range flood {
		wg.Go(func() {
			id := own
			if i%2 == 1 {
				id = victim // probing another's task costs the same tokens
			}
			_, err := mallory.Get(ctx, id)
			mu.Lock()
			defer mu.Unlock()
			if d, ok := asLimited(t, err); ok {
				if d.Reason != mcptask.ReasonRateLimited || d.Limit != "request_rate" || d.RetryAfterMs <= 0 {
					t.Errorf("flood refusal data %+v", d)
				}
				limited++
				return
			}
			served++ // answered (the victim's task as unknown)
		})
	}
	// Bob polls his task to the end during the flood.
	wg.Go(func() {
		for range 20 {
			tk, err := bob.Get(ctx, victim)
			mu.Lock()
			if err != nil {
				bobErr++
				t.Errorf("bob's poll during the flood: %v", err)
			} else {
				bobServed++
			}
			mu.Unlock()
			if err != nil || terminal(tk) {
				return
			}
		}
	})
	wg.Wait()
	if served != 25 || limited != flood-25 {
		t.Fatalf("flood: %d served, %d limited; want 25 and %d", served, limited, flood-25)
	}
	if bobErr != 0 || bobServed == 0 {
		t.Fatalf("bob: %d served, %d errors", bobServed, bobErr)
	}
	// Alice, same tenant as bob, has her own bucket too.
	if _, err := alice.Get(ctx, victim); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("alice's get of bob's task: %v", err)
	}
}

// TestPollIntervalRaised: a client polling faster than the suggested
// pollIntervalMs is told a longer interval at each early poll, up to
// -max-poll-interval, and the normal one again once it keeps to it
// (checked on the raising side; waiting out 10 s intervals is left to
// the quota package's unit tests).
func TestPollIntervalRaised(t *testing.T) {
	alice, bob, _ := limitsApp(t, "-poll-interval", "10s", "-max-poll-interval", "80s", "-request-rate", "0")
	ctx := t.Context()
	id := startTask(t, alice, "long_computation", slowTask)
	var got []int64
	for range 5 {
		tk, err := alice.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tk.PollIntervalMs)
	}
	want := []int64{10000, 20000, 40000, 80000, 80000}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pollIntervalMs of rapid polls: %v, want %v", got, want)
		}
	}
	// Another poller of its own task starts at the normal interval; its
	// one-time looks (io.mcptask/look, as 'mcptask status' sends) are not
	// polls, however quick: they raise nothing.
	other := startTask(t, bob, "long_computation", slowTask)
	look := func(c *wiretest.Client) map[string]any {
		m := c.Meta()
		m["io.mcptask/look"] = true
		return m
	}
	for i := range 5 {
		var tk wiretest.Task
		if err := bob.Result(ctx, "tasks/get", map[string]any{"taskId": other, "_meta": look(bob)}, &tk); err != nil {
			t.Fatal(err)
		}
		if tk.PollIntervalMs != 10000 {
			t.Fatalf("bob's look %d: pollIntervalMs %d, want 10000 (looks are not polls)", i, tk.PollIntervalMs)
		}
	}
	if tk, err := bob.Get(ctx, other); err != nil || tk.PollIntervalMs != 10000 {
		t.Fatalf("bob: %+v %v", tk, err)
	}
	// alice's look at her polled task is told her raised interval.
	var tk wiretest.Task
	if err := alice.Result(ctx, "tasks/get", map[string]any{"taskId": id, "_meta": look(alice)}, &tk); err != nil || tk.PollIntervalMs != 80000 {
		t.Fatalf("alice's look: %+v %v; want pollIntervalMs 80000", tk, err)
	}
}

// TestAuditLog runs a task's whole life, an access attempt from another
// tenant and a limited request, and checks the audit trail: every event
// with principal, tenant, tool and task; nothing of the arguments,
// results, tokens or elicitation answers; and every result handed out
// went to the task's owner.
func TestAuditLog(t *testing.T) {
	dir := t.TempDir()
	auditPath := filepath.Join(dir, "audit.jsonl")
	alice, bob, mallory := limitsApp(t, "-audit-log", auditPath, "-max-active-tasks", "1", "-create-rate", "0")
	ctx := t.Context()
	const (
		secretArg    = "SECRET-ARGUMENT-5ab1"
		secretAnswer = "SECRET-ANSWER-77c2"
	)

	// A deployment whose arguments (and so its result) and elicitation
	// answer hold secrets.
	deploy := startTask(t, alice, "deploy_with_confirmation", map[string]any{"service": secretArg, "build_steps": 1, "step_delay_ms": 0})
	tk := waitTask(t, alice, deploy, 30*time.Second, "input_required", func(tk *wiretest.Task) bool { return tk.Status == "input_required" || terminal(tk) })
	key := elicitKey(t, tk, secretArg)
	// Another tenant and another principal of the same tenant try it.
	if _, err := mallory.Get(ctx, deploy); err == nil {
		t.Fatal("mallory read alice's task")
	}
	if err := bob.Result(ctx, "tasks/cancel", map[string]any{"taskId": deploy}, nil); err == nil {
		t.Fatal("bob cancelled alice's task")
	}
	// Over the quota of one unfinished task: limited.
	if _, err := alice.CallTool(ctx, "long_computation", slowTask); err == nil {
		t.Fatal("second unfinished task created")
	}
	if err := alice.Result(ctx, "tasks/update", map[string]any{"taskId": deploy, "inputResponses": map[string]any{
		key: map[string]any{"action": "accept", "content": map[string]any{"confirm": false, "note": secretAnswer}},
	}}, nil); err != nil {
		t.Fatal(err)
	}
	done := waitTask(t, alice, deploy, 30*time.Second, "deploy done", terminal)
	if !strings.Contains(string(done.Result)+string(done.Content), secretArg) {
		t.Fatalf("the result does not quote the arguments, so the test proves nothing: %s %s", done.Result, done.Content)
	}
	// A task cancelled by its owner.
	long := startTask(t, alice, "long_computation", slowTask)
	if err := alice.Result(ctx, "tasks/cancel", map[string]any{"taskId": long}, nil); err != nil {
		t.Fatal(err)
	}

	raw, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{secretArg, secretAnswer, "alice-token", "bob-token", "mallory-token", "aborted"} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("the audit log holds %q:\n%s", secret, raw)
		}
	}
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if r["msg"] != audit.Message {
			t.Fatalf("audit record with message %v", r["msg"])
		}
		recs = append(recs, r)
	}
	find := func(event string, match map[string]any) map[string]any {
		t.Helper()
	next:
		for _, r := range recs {
			if r["event"] != event {
				continue
			}
			for k, v := range match {
				if r[k] != v {
					continue next
				}
			}
			return r
		}
		t.Fatalf("no %s record with %v in:\n%s", event, match, raw)
		return nil
	}
	alices := map[string]any{"principal": "alice", "tenant": "acme"}
	with := func(m map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	find(audit.EventCreated, with(alices, "task", deploy, "tool", "deploy_with_confirmation", "wire", "2026-07-28"))
	find(audit.EventStatusChanged, with(alices, "task", deploy, "from", "working", "to", "input_required"))
	find(audit.EventDenied, map[string]any{"task": deploy, "principal": "mallory", "tenant": "globex", "op": "tasks/get",
		"reason": audit.ReasonOtherOwner, "owner_principal": "alice", "owner_tenant": "acme", "tool": "deploy_with_confirmation"})
	find(audit.EventDenied, map[string]any{"task": deploy, "principal": "bob", "tenant": "acme", "op": "tasks/cancel", "reason": audit.ReasonOtherOwner})
	find(audit.EventStatusChanged, with(alices, "task", deploy, "from", "input_required", "to", "working"))
	find(audit.EventStatusChanged, with(alices, "task", deploy, "from", "working", "to", "completed"))
	find(audit.EventResultRetrieved, with(alices, "task", deploy, "status", "completed", "method", "tasks/get"))
	find(audit.EventLimited, with(alices, "limit", "active_tasks", "tool", "long_computation", "method", "tools/call"))
	find(audit.EventCancelled, with(alices, "task", long, "tool", "long_computation"))
	find(audit.EventStatusChanged, with(alices, "task", long, "to", "cancelled"))

	// Zero cross-principal reads: every outcome handed out went to the
	// principal that created the task (the record names the requester as
	// principal, the owner as owner_principal).
	creator := map[any]any{}
	for _, r := range recs {
		if r["event"] == audit.EventCreated {
			creator[r["task"]] = [2]any{r["principal"], r["tenant"]}
		}
	}
	for _, r := range recs {
		if r["event"] != audit.EventResultRetrieved {
			continue
		}
		if creator[r["task"]] != [2]any{r["principal"], r["tenant"]} || r["owner_principal"] != r["principal"] || r["owner_tenant"] != r["tenant"] {
			t.Fatalf("result of %v handed to %v/%v, created by %v: %v", r["task"], r["tenant"], r["principal"], creator[r["task"]], r)
		}
	}
}
