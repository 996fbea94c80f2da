package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// TestDemoTools runs every demo tool through the 2026-07-28 wire with the
// tasks extension and checks each kind of outcome.
func TestDemoTools(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "mcptaskd", filepath.Join(t.TempDir(), "tasks.db"))
	c := d.client(true)
	ctx := context.Background()

	t.Run("tools/list", func(t *testing.T) {
		var res struct {
			Tools []struct {
				Name        string `json:"name"`
				Description string `json:"description"`
			} `json:"tools"`
		}
		if err := c.Result(ctx, "tools/list", nil, &res); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, tl := range res.Tools {
			if len(tl.Description) < 40 {
				t.Errorf("tool %s has a poor description: %q", tl.Name, tl.Description)
			}
			got[tl.Name] = true
		}
		for _, name := range []string{"long_computation", "deploy_with_confirmation", "flaky_migration", "lint_report", "echo"} {
			if !got[name] {
				t.Errorf("tools/list lacks %s (got %v)", name, got)
			}
		}
	})

	t.Run("server/discover advertises tasks", func(t *testing.T) {
		var res struct {
			Capabilities struct {
				Extensions map[string]json.RawMessage `json:"extensions"`
			} `json:"capabilities"`
		}
		if err := c.Result(ctx, "server/discover", nil, &res); err != nil {
			t.Fatal(err)
		}
		if _, ok := res.Capabilities.Extensions["io.modelcontextprotocol/tasks"]; !ok {
			t.Fatalf("server/discover does not advertise the tasks extension: %+v", res)
		}
	})

	t.Run("long_computation completes with progress", func(t *testing.T) {
		id := startTask(t, c, "long_computation", map[string]any{"n": 1000, "steps": 3, "step_delay_ms": 300})
		progress := regexp.MustCompile(`^step [1-3] of 3\b`)
		tk := waitTask(t, c, id, 30*time.Second, "progress or end", func(tk *wiretest.Task) bool {
			return progress.MatchString(tk.StatusMessage) || terminal(tk)
		})
		if !progress.MatchString(tk.StatusMessage) {
			t.Errorf("never saw a status message \"step k of 3\"; last task %+v", tk)
		}
		tk = waitTask(t, c, id, 30*time.Second, "terminal", terminal)
		r := resultOf(t, tk)
		if tk.StatusMessage != "done: 168 primes up to 1000" {
			t.Errorf("final status message %q", tk.StatusMessage)
		}
		if want := "There are 168 primes up to 1000 (computed in 3 steps)."; r.text() != want || r.IsError {
			t.Fatalf("result %q (isError %v), want %q", r.text(), r.IsError, want)
		}
		var out struct{ Primes int }
		if err := json.Unmarshal(r.StructuredContent, &out); err != nil || out.Primes != 168 {
			t.Fatalf("structuredContent %s: %v", r.StructuredContent, err)
		}
	})

	t.Run("long_computation synchronously without the extension", func(t *testing.T) {
		res, err := d.client(false).CallTool(ctx, "long_computation", map[string]any{"n": 100, "steps": 2, "step_delay_ms": 0})
		if err != nil {
			t.Fatal(err)
		}
		if res.TaskID != "" || !strings.Contains(string(res.Content), "There are 25 primes up to 100") {
			t.Fatalf("want a synchronous result, got %+v (content %s)", res, res.Content)
		}
	})

	t.Run("long_computation cancelled", func(t *testing.T) {
		id := startTask(t, c, "long_computation", map[string]any{"n": 1000, "steps": 5, "step_delay_ms": 60000})
		waitTask(t, c, id, 30*time.Second, "step 1", func(tk *wiretest.Task) bool { return strings.HasPrefix(tk.StatusMessage, "step 1 of 5") })
		if err := c.Result(ctx, "tasks/cancel", map[string]any{"taskId": id}, nil); err != nil {
			t.Fatal(err)
		}
		tk, err := c.Get(ctx, id)
		if err != nil || tk.Status != "cancelled" {
			t.Fatalf("after tasks/cancel: %+v, %v", tk, err)
		}
	})

	t.Run("deploy_with_confirmation confirmed", func(t *testing.T) {
		id := startTask(t, c, "deploy_with_confirmation", map[string]any{"service": "api", "version": "1.2.3", "build_steps": 2, "step_delay_ms": 20})
		tk := waitTask(t, c, id, 30*time.Second, "input_required", func(tk *wiretest.Task) bool { return tk.Status == "input_required" || terminal(tk) })
		key := elicitKey(t, tk, "Roll it out to production")
		if err := c.Result(ctx, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
			key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}},
		}}, nil); err != nil {
			t.Fatal(err)
		}
		tk = waitTask(t, c, id, 30*time.Second, "terminal", terminal)
		r := resultOf(t, tk)
		if want := "Deployed api@1.2.3 to production."; r.text() != want || r.IsError {
			t.Fatalf("result %q (isError %v), want %q", r.text(), r.IsError, want)
		}
	})

	t.Run("deploy_with_confirmation declined", func(t *testing.T) {
		id := startTask(t, c, "deploy_with_confirmation", map[string]any{"service": "web", "build_steps": 1, "step_delay_ms": 0})
		tk := waitTask(t, c, id, 30*time.Second, "input_required", func(tk *wiretest.Task) bool { return tk.Status == "input_required" || terminal(tk) })
		key := elicitKey(t, tk, "web@latest")
		if err := c.Result(ctx, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
			key: map[string]any{"action": "decline"},
		}}, nil); err != nil {
			t.Fatal(err)
		}
		r := resultOf(t, waitTask(t, c, id, 30*time.Second, "terminal", terminal))
		if !strings.HasPrefix(r.text(), "Deployment of web@latest aborted: the user declined.") {
			t.Fatalf("result %q", r.text())
		}
	})

	t.Run("deploy_with_confirmation requires the extension", func(t *testing.T) {
		resp, err := d.client(false).Call(ctx, "tools/call", map[string]any{"name": "deploy_with_confirmation", "arguments": map[string]any{"service": "api"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Error == nil || resp.Error.Code != -32021 {
			t.Fatalf("want error -32021, got %+v %s", resp.Error, resp.Result)
		}
	})

	t.Run("flaky_migration fails", func(t *testing.T) {
		id := startTask(t, c, "flaky_migration", map[string]any{"migration": "0007_split_users", "steps": 4, "fail_at_step": 3, "step_delay_ms": 10})
		tk := waitTask(t, c, id, 30*time.Second, "terminal", terminal)
		if tk.Status != "failed" || tk.Error == nil {
			t.Fatalf("want failed with an error, got %+v", tk)
		}
		if tk.Error.Code != -32603 || !strings.Contains(tk.Error.Message, "migration 0007_split_users failed at step 3 of 4") {
			t.Fatalf("error %+v", tk.Error)
		}
		if len(tk.Result) != 0 {
			t.Fatalf("a failed task has a result: %s", tk.Result)
		}
	})

	t.Run("lint_report completes with isError", func(t *testing.T) {
		src := "package x\n\n// TODO: remove\nfunc f() {}  \n"
		id := startTask(t, c, "lint_report", map[string]any{"source": src, "line_delay_ms": 10})
		r := resultOf(t, waitTask(t, c, id, 30*time.Second, "terminal", terminal))
		if !r.IsError {
			t.Fatalf("want isError:true, got %+v", r)
		}
		for _, want := range []string{"Found 2 problems in 4 lines", "line 3: todo", "line 4: trailing-whitespace"} {
			if !strings.Contains(r.text(), want) {
				t.Errorf("report %q lacks %q", r.text(), want)
			}
		}
	})

	t.Run("lint_report on clean source", func(t *testing.T) {
		id := startTask(t, c, "lint_report", map[string]any{"source": "package x\n", "line_delay_ms": 0})
		r := resultOf(t, waitTask(t, c, id, 30*time.Second, "terminal", terminal))
		if r.IsError || r.text() != "No problems found in 1 lines." {
			t.Fatalf("result %+v", r)
		}
	})

	t.Run("echo answers synchronously", func(t *testing.T) {
		res, err := c.CallTool(ctx, "echo", map[string]any{"text": "hello, tasks"})
		if err != nil {
			t.Fatal(err)
		}
		if res.TaskID != "" || res.ResultType == "task" || !strings.Contains(string(res.Content), "hello, tasks") {
			t.Fatalf("want a synchronous result, got %+v (content %s)", res, res.Content)
		}
	})

	t.Run("2025-11-25 session gets synchronous results", func(t *testing.T) {
		post := func(session string, body map[string]any) (*http.Response, string) {
			t.Helper()
			b, _ := json.Marshal(body)
			req, _ := http.NewRequest(http.MethodPost, d.URL, bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if session != "" {
				req.Header.Set("Mcp-Session-Id", session)
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			return resp, string(raw)
		}
		resp, body := post("", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
			"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "old", "version": "1"}}})
		session := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != 200 || session == "" {
			t.Fatalf("initialize: %d %q", resp.StatusCode, body)
		}
		if resp, body := post(session, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); resp.StatusCode/100 != 2 {
			t.Fatalf("initialized: %d %q", resp.StatusCode, body)
		}
		resp, body = post(session, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{
			"name": "long_computation", "arguments": map[string]any{"n": 100, "steps": 1, "step_delay_ms": 0}}})
		if resp.StatusCode != 200 || !strings.Contains(body, "There are 25 primes up to 100") || strings.Contains(body, "taskId") {
			t.Fatalf("tools/call: %d %q", resp.StatusCode, body)
		}
	})

	t.Run("DNS rebinding is refused", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, d.URL, strings.NewReader(`{}`))
		req.Host = "attacker.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("Host attacker.example: HTTP %d, want 403", resp.StatusCode)
		}
	})

	t.Run("healthz", func(t *testing.T) {
		resp, err := http.Get(d.Base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h struct{ Status string }
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || resp.StatusCode != 200 || h.Status != "ok" {
			t.Fatalf("healthz: %d %+v %v", resp.StatusCode, h, err)
		}
	})
}

// elicitKey returns the key of a task's single outstanding elicitation
// request, checking its message contains msg.
func elicitKey(t *testing.T, tk *wiretest.Task, msg string) string {
	t.Helper()
	if tk.Status != "input_required" || len(tk.InputRequests) != 1 {
		t.Fatalf("want input_required with one request, got %+v", tk)
	}
	for key, raw := range tk.InputRequests {
		var req struct {
			Method string `json:"method"`
			Params struct {
				Message string `json:"message"`
			} `json:"params"`
		}
		if err := json.Unmarshal(raw, &req); err != nil {
			t.Fatal(err)
		}
		if req.Method != "elicitation/create" || !strings.Contains(req.Params.Message, msg) {
			t.Fatalf("input request %s: %s", key, raw)
		}
		return key
	}
	panic("unreachable")
}

// TestKillRecovery crashes the server (SIGKILL) with tasks running and
// checks what a restart on the same database makes of them.
func TestKillRecovery(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "tasks.db")
	d1 := startDaemon(t, "mcptaskd#1", db)
	c := d1.client(true)

	// Tasks finished before the crash keep their results.
	done := map[string]*wiretest.Task{}
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"long_computation", map[string]any{"n": 5000, "steps": 2, "step_delay_ms": 0}},
		{"lint_report", map[string]any{"source": "x := 1 // FIXME\n", "line_delay_ms": 0}},
		{"flaky_migration", map[string]any{"step_delay_ms": 0}},
	} {
		id := startTask(t, c, call.tool, call.args)
		done[id] = waitTask(t, c, id, 30*time.Second, "terminal", terminal)
	}

	// Non-re-runnable work, in several states.
	var unsafe []string
	for i := range 3 {
		unsafe = append(unsafe, startTask(t, c, "deploy_with_confirmation", map[string]any{"service": fmt.Sprintf("svc%d", i), "build_steps": 1, "step_delay_ms": 60000}))
	}
	for range 2 {
		unsafe = append(unsafe, startTask(t, c, "flaky_migration", map[string]any{"steps": 3, "step_delay_ms": 60000}))
	}
	waiting := startTask(t, c, "deploy_with_confirmation", map[string]any{"service": "waiting", "build_steps": 1, "step_delay_ms": 0})
	unsafe = append(unsafe, waiting)

	// Re-runnable work, long enough to be running at the crash and short
	// enough to re-run quickly.
	rerun := map[string]int{}
	for _, n := range []int{1000, 2000, 3000} {
		rerun[startTask(t, c, "long_computation", map[string]any{"n": n, "steps": 4, "step_delay_ms": 1500})] = n
	}

	// Wait until every handler is running (it has set its status message).
	for _, id := range unsafe[:len(unsafe)-1] {
		waitTask(t, c, id, 30*time.Second, "working", func(tk *wiretest.Task) bool {
			return tk.Status == "working" && (strings.HasPrefix(tk.StatusMessage, "building") || strings.HasPrefix(tk.StatusMessage, "migration"))
		})
	}
	waitTask(t, c, waiting, 30*time.Second, "input_required", func(tk *wiretest.Task) bool { return tk.Status == "input_required" })
	for id := range rerun {
		waitTask(t, c, id, 30*time.Second, "working", func(tk *wiretest.Task) bool {
			return tk.Status == "working" && strings.HasPrefix(tk.StatusMessage, "step 1 of 4")
		})
	}

	d1.kill9()
	start := time.Now()
	d2 := startDaemon(t, "mcptaskd#2", db)
	c = d2.client(true)

	for _, id := range unsafe {
		tk, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("task %s after restart: %v", id, err)
		}
		if tk.Status != "failed" || tk.Error == nil || !strings.Contains(tk.Error.Message, "outcome is unknown") {
			t.Errorf("non-re-runnable task %s after restart: want failed with an \"outcome is unknown\" error, got %s %+v (%q)", id, tk.Status, tk.Error, tk.StatusMessage)
		}
	}
	for id, n := range rerun {
		tk := waitTask(t, c, id, 60*time.Second, "re-run to the end", func(tk *wiretest.Task) bool {
			if tk.Status != "working" && tk.Status != "completed" {
				t.Fatalf("re-runnable task %s is %s: %+v", id, tk.Status, tk)
			}
			return tk.Status == "completed"
		})
		r := resultOf(t, tk)
		if want := fmt.Sprintf("There are %d primes up to %d (computed in 4 steps).", primesUpTo(n), n); r.text() != want {
			t.Errorf("re-run task %s: result %q, want %q", id, r.text(), want)
		}
	}
	t.Logf("re-runnable tasks completed %v after the restart", time.Since(start).Round(time.Millisecond))
	for id, before := range done {
		after, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("finished task %s after restart: %v", id, err)
		}
		if after.Status != before.Status || string(after.Result) != string(before.Result) ||
			fmt.Sprint(after.Error) != fmt.Sprint(before.Error) {
			t.Errorf("finished task %s changed across the crash:\nbefore %s %s %+v\nafter  %s %s %+v",
				id, before.Status, before.Result, before.Error, after.Status, after.Result, after.Error)
		}
	}
	if got := len(d2.LogRecords("task re-run after restart")); got != len(rerun) {
		t.Errorf("the restarted server logged %d re-runs, want %d", got, len(rerun))
	}

	// The restarted server takes new work.
	id := startTask(t, c, "long_computation", map[string]any{"n": 10, "steps": 1, "step_delay_ms": 0})
	if r := resultOf(t, waitTask(t, c, id, 30*time.Second, "terminal", terminal)); r.text() != "There are 4 primes up to 10 (computed in 1 steps)." {
		t.Errorf("new task after restart: %q", r.text())
	}
}

// TestGracefulShutdown stops the server with SIGTERM while tasks run: work
// that ends within the grace period completes, non-re-runnable work still
// running after it fails (never stays working), and re-runnable work is
// handed back and completes after the restart.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "tasks.db")
	const grace = 3 * time.Second
	d1 := startDaemon(t, "mcptaskd#1", db, "-shutdown-grace", grace.String())
	c := d1.client(true)

	unsafe := startTask(t, c, "deploy_with_confirmation", map[string]any{"service": "api", "build_steps": 1, "step_delay_ms": 60000})
	handedBack := startTask(t, c, "long_computation", map[string]any{"n": 777, "steps": 2, "step_delay_ms": 30000})
	quick := startTask(t, c, "long_computation", map[string]any{"n": 500, "steps": 2, "step_delay_ms": 500})
	waitTask(t, c, unsafe, 30*time.Second, "building", func(tk *wiretest.Task) bool { return strings.HasPrefix(tk.StatusMessage, "building") })
	waitTask(t, c, handedBack, 30*time.Second, "step 1", func(tk *wiretest.Task) bool { return strings.HasPrefix(tk.StatusMessage, "step 1 of 2") })
	waitTask(t, c, quick, 30*time.Second, "step 1", func(tk *wiretest.Task) bool {
		return strings.HasPrefix(tk.StatusMessage, "step 1 of 2") || terminal(tk)
	})

	start := time.Now()
	if err := d1.signal(syscall.SIGTERM, grace+30*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	took := time.Since(start)
	t.Logf("SIGTERM to exit: %v (grace %v)", took.Round(time.Millisecond), grace)
	if len(d1.LogRecords("mcptaskd stopped")) != 1 {
		t.Errorf("no \"mcptaskd stopped\" record")
	}

	d2 := startDaemon(t, "mcptaskd#2", db, "-shutdown-grace", "100ms")
	c = d2.client(true)
	tk, err := c.Get(context.Background(), unsafe)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Status != "failed" || tk.Error == nil || !strings.Contains(tk.Error.Message, "outcome is unknown") {
		t.Errorf("non-re-runnable task after SIGTERM: want failed with an \"outcome is unknown\" error, got %s %+v", tk.Status, tk.Error)
	}
	if r := resultOf(t, waitTask(t, c, quick, 5*time.Second, "terminal", terminal)); r.text() != "There are 95 primes up to 500 (computed in 2 steps)." {
		t.Errorf("task finished within the grace period: %q", r.text())
	}
	if len(d1.LogRecords("task handed back at shutdown")) != 1 {
		t.Errorf("the re-runnable task was not handed back at shutdown")
	}
	// The handed-back task runs again from the start (2 × 30 s): check it
	// is running again, then cancel it rather than wait.
	waitTask(t, c, handedBack, 30*time.Second, "re-run", func(tk *wiretest.Task) bool {
		return tk.Status == "working" && strings.HasPrefix(tk.StatusMessage, "step 1 of 2")
	})
	if len(d2.LogRecords("task re-run after restart")) != 1 {
		t.Errorf("the handed-back task was not re-run after the restart")
	}
	if err := d2.signal(os.Interrupt, 30*time.Second); err != nil {
		t.Fatalf("exit after SIGINT: %v", err)
	}
}

// TestConcurrentTasks starts 1,000 tasks at once and checks that each
// completes with its own, correct result.
func TestConcurrentTasks(t *testing.T) {
	t.Parallel()
	const n = 1000
	d := startDaemon(t, "mcptaskd", filepath.Join(t.TempDir(), "tasks.db"))
	c := d.client(true)
	// No timeout per request: the test checks that every task completes
	// with its own result, not how fast (the benchmarks measure speed);
	// under -race with the whole suite on two cores a create may wait
	// long for the single SQLite writer. The test's context bounds it.
	c.HTTP = &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 128},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	start := time.Now()
	var created, finished time.Duration
	var mu sync.Mutex
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			limit := 100 + i
			tk, err := c.CallTool(ctx, "long_computation", map[string]any{"n": limit, "steps": 2, "step_delay_ms": 50})
			if err != nil {
				errs <- fmt.Errorf("call %d: %w", i, err)
				return
			}
			if tk.ResultType != "task" || tk.TaskID == "" {
				errs <- fmt.Errorf("call %d: not a task handle: %+v", i, tk)
				return
			}
			ids[i] = tk.TaskID
			mu.Lock()
			created = max(created, time.Since(start))
			mu.Unlock()
			for {
				got, err := c.Get(ctx, tk.TaskID)
				if err != nil {
					errs <- fmt.Errorf("task %d (%s): %w", i, tk.TaskID, err)
					return
				}
				if terminal(got) {
					var r toolResult
					json.Unmarshal(got.Result, &r)
					want := fmt.Sprintf("There are %d primes up to %d (computed in 2 steps).", primesUpTo(limit), limit)
					if got.Status != "completed" || r.text() != want {
						errs <- fmt.Errorf("task %d (%s): %s %q %+v, want %q", i, tk.TaskID, got.Status, r.text(), got.Error, want)
					}
					mu.Lock()
					finished = max(finished, time.Since(start))
					mu.Unlock()
					return
				}
				select {
				case <-ctx.Done():
					errs <- fmt.Errorf("task %d (%s) still %s: %w", i, tk.TaskID, got.Status, ctx.Err())
					return
				case <-time.After(100 * time.Millisecond): // poll interval
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	nerr := 0
	for err := range errs {
		if nerr++; nerr <= 10 {
			t.Error(err)
		}
	}
	if nerr > 0 {
		t.Fatalf("%d of %d tasks went wrong", nerr, n)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("task ID %s handed out twice", id)
		}
		seen[id] = true
	}
	t.Logf("%d tasks: all created after %v, all completed after %v", n, created.Round(time.Millisecond), finished.Round(time.Millisecond))
}

// BenchmarkCalls compares a plain synchronous tool call (echo) with the
// creation of a task (long_computation as a task, whose work is trivial)
// and with a whole task round trip (create, then poll to completion),
// against a running mcptaskd.
func BenchmarkCalls(b *testing.B) {
	d := startDaemon(b, "mcptaskd", filepath.Join(b.TempDir(), "tasks.db"), "-log-level", "warn")
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	ctx := context.Background()
	b.Run("echo", func(b *testing.B) {
		c := &wiretest.Client{URL: d.URL, Tasks: true, HTTP: hc}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.CallTool(ctx, "echo", map[string]any{"text": "x"}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("task_create", func(b *testing.B) {
		c := &wiretest.Client{URL: d.URL, Tasks: true, HTTP: hc}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if tk, err := c.CallTool(ctx, "long_computation", map[string]any{"n": 10, "steps": 1, "step_delay_ms": 0}); err != nil || tk.TaskID == "" {
					b.Error(tk, err)
					return
				}
			}
		})
	})
	b.Run("task_round_trip", func(b *testing.B) {
		c := &wiretest.Client{URL: d.URL, Tasks: true, HTTP: hc}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				tk, err := c.CallTool(ctx, "long_computation", map[string]any{"n": 10, "steps": 1, "step_delay_ms": 0})
				if err != nil || tk.TaskID == "" {
					b.Error(tk, err)
					return
				}
				for !terminal(tk) {
					if tk, err = c.Get(ctx, tk.TaskID); err != nil {
						b.Error(err)
						return
					}
				}
			}
		})
	})
}
