package client_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var wires = []string{client.Wire20260728, client.Wire20251125}

// confirm is an Elicit handler that accepts deployments and counts its
// calls per task.
type confirm struct {
	mu    sync.Mutex
	calls map[string]int
	msgs  []string
}

func (c *confirm) Elicit(_ context.Context, taskID string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[taskID]++
	c.msgs = append(c.msgs, p.Message)
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
}

func (c *confirm) count(taskID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[taskID]
}

// startTask calls a tool and requires a task.
func startTask(t *testing.T, c *client.Client, tool string, args any) *client.TaskStatus {
	t.Helper()
	call, err := c.CallTool(testCtx(t), tool, args)
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	if call.Task == nil || call.Result != nil || call.Fallback != "" {
		t.Fatalf("calling %s: want a task, got %+v", tool, call)
	}
	return call.Task
}

// exercise runs the task scenarios against one connected client.
func exercise(t *testing.T, c *client.Client, elicit *confirm) {
	t.Run("call and wait", func(t *testing.T) {
		tk := startTask(t, c, "long_computation", map[string]any{"n": 100, "steps": 2, "step_delay_ms": 30})
		if tk.Status != "working" || tk.ID == "" || tk.PollInterval != 20*time.Millisecond {
			t.Errorf("handle %+v", tk)
		}
		var statuses []string
		res, err := c.Wait(testCtx(t), tk.ID, &client.WaitOptions{OnStatus: func(st *client.TaskStatus) {
			statuses = append(statuses, st.Status+":"+st.StatusMessage)
		}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := text(res), "There are 25 primes up to 100 (computed in 2 steps)."; got != want || res.IsError {
			t.Fatalf("result %q (isError %v), want %q", got, res.IsError, want)
		}
		if len(statuses) == 0 || !strings.HasPrefix(statuses[len(statuses)-1], "completed:") {
			t.Errorf("OnStatus saw %q", statuses)
		}
	})

	t.Run("input_required answered through Elicit", func(t *testing.T) {
		tk := startTask(t, c, "deploy_with_confirmation", map[string]any{"service": "api", "version": "1.2.3", "build_steps": 1, "step_delay_ms": 0})
		res, err := c.Wait(testCtx(t), tk.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := text(res); got != "Deployed api@1.2.3 to production." {
			t.Fatalf("result %q", got)
		}
		if n := elicit.count(tk.ID); n != 1 {
			t.Fatalf("Elicit called %d times for the task, want once", n)
		}
	})

	t.Run("get and cancel", func(t *testing.T) {
		tk := startTask(t, c, "long_computation", map[string]any{"n": 1000, "steps": 5, "step_delay_ms": 60000})
		waitFor(t, 30*time.Second, "step 1", func() bool {
			st, err := c.Get(testCtx(t), tk.ID)
			if err != nil {
				t.Fatal(err)
			}
			return st.Status == "working" && strings.HasPrefix(st.StatusMessage, "step 1 of 5")
		})
		st, err := c.Cancel(testCtx(t), tk.ID)
		if err != nil || st.Status != "cancelled" || st.ID != tk.ID {
			t.Fatalf("Cancel: %+v %v", st, err)
		}
		if _, err := c.Wait(testCtx(t), tk.ID, nil); !errors.Is(err, client.ErrCancelled) {
			t.Fatalf("Wait on a cancelled task: %v", err)
		}
		// Cancelling again is not an error: the task is cancelled.
		if st, err := c.Cancel(testCtx(t), tk.ID); err != nil || st.Status != "cancelled" {
			t.Fatalf("second Cancel: %+v %v", st, err)
		}
	})

	t.Run("failed task", func(t *testing.T) {
		tk := startTask(t, c, "flaky_migration", map[string]any{"steps": 2, "fail_at_step": 1, "step_delay_ms": 0})
		_, err := c.Wait(testCtx(t), tk.ID, nil)
		var te *client.TaskError
		if !errors.As(err, &te) {
			t.Fatalf("want a *TaskError, got %v", err)
		}
		if te.TaskID != tk.ID || te.Code != -32603 || !strings.Contains(te.Message, "failed at step 1 of 2") || !strings.Contains(string(te.Data), `"failedStep":1`) {
			t.Fatalf("TaskError %+v (data %s)", te, te.Data)
		}
	})

	t.Run("isError result", func(t *testing.T) {
		tk := startTask(t, c, "lint_report", map[string]any{"source": "x := 1 // TODO\n", "line_delay_ms": 0})
		res, err := c.Wait(testCtx(t), tk.ID, nil)
		if err != nil {
			t.Fatalf("an isError result is a result, not an error: %v", err)
		}
		if !res.IsError || !strings.Contains(text(res), "Found 1 problems in 1 lines") {
			t.Fatalf("result %q isError %v", text(res), res.IsError)
		}
	})

	t.Run("plain tool", func(t *testing.T) {
		call, err := c.CallTool(testCtx(t), "echo", map[string]any{"text": "hi"})
		if err != nil || call.Task != nil || text(call.Result) != "hi" {
			t.Fatalf("%+v %v", call, err)
		}
		if c.Wire() == client.Wire20251125 && !strings.Contains(call.Fallback, "does not support tasks") {
			t.Errorf("2025-11-25 fallback %q", call.Fallback)
		}
		if c.Wire() == client.Wire20260728 && call.Fallback != "" {
			t.Errorf("2026-07-28: the server decided, yet fallback %q", call.Fallback)
		}
	})

	t.Run("unknown task", func(t *testing.T) {
		const id = "abcdefghijklmnopqrstuvwxyz234567"
		if _, err := c.Get(testCtx(t), id); !errors.Is(err, client.ErrTaskNotFound) {
			t.Fatalf("Get: %v", err)
		}
		if _, err := c.Wait(testCtx(t), id, nil); !errors.Is(err, client.ErrTaskNotFound) {
			t.Fatalf("Wait: %v", err)
		}
		if _, err := c.Cancel(testCtx(t), id); !errors.Is(err, client.ErrTaskNotFound) {
			t.Fatalf("Cancel: %v", err)
		}
	})
}

func TestHTTP(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, serverOpts{})
			el := &confirm{}
			journal := filepath.Join(t.TempDir(), "journal.json")
			c := dial(t, s.URL, &client.Options{ProtocolVersion: wire, Elicit: el.Elicit, Journal: journal})
			if c.Wire() != wire || !c.TasksSupported() {
				t.Fatalf("wire %s, tasks %v", c.Wire(), c.TasksSupported())
			}
			exercise(t, c, el)
			if p, err := c.Pending(); err != nil || len(p) != 0 {
				t.Errorf("journal after every task ended: %+v %v", p, err)
			}
			// Mcp-Name carries the task ID on every tasks/* request.
			reqs := s.tasksRequests()
			if len(reqs) == 0 {
				t.Fatal("the server saw no tasks/* request")
			}
			methods := map[string]bool{}
			for _, r := range reqs {
				methods[r.Method] = true
				if r.TaskID != "" && r.McpName != r.TaskID {
					t.Errorf("%s for %s: Mcp-Name %q", r.Method, r.TaskID, r.McpName)
				}
				if r.Version != wire {
					t.Errorf("%s for %s: Mcp-Protocol-Version %q", r.Method, r.TaskID, r.Version)
				}
			}
			want := []string{"tasks/get", "tasks/cancel"}
			if wire == client.Wire20260728 {
				want = append(want, "tasks/update")
			} else {
				want = append(want, "tasks/result")
			}
			for _, m := range want {
				if !methods[m] {
					t.Errorf("the server saw no %s (saw %v)", m, methods)
				}
			}
		})
	}
}

func TestStdio(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			el := &confirm{}
			c := connectStdio(t, &client.Options{ProtocolVersion: wire, Elicit: el.Elicit})
			if c.Wire() != wire || !c.TasksSupported() {
				t.Fatalf("wire %s, tasks %v", c.Wire(), c.TasksSupported())
			}
			exercise(t, c, el)
		})
	}
}

func TestNegotiatesNewestWire(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	c := dial(t, s.URL, nil)
	if c.Wire() != client.Wire20260728 || !c.TasksSupported() {
		t.Fatalf("wire %s, tasks %v", c.Wire(), c.TasksSupported())
	}
}

func TestElicitNilDeclines(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	for _, wire := range wires {
		c := dial(t, s.URL, &client.Options{ProtocolVersion: wire})
		tk := startTask(t, c, "deploy_with_confirmation", map[string]any{"service": "web", "build_steps": 1, "step_delay_ms": 0})
		res, err := c.Wait(testCtx(t), tk.ID, nil)
		if err != nil || !strings.HasPrefix(text(res), "Deployment of web@latest aborted: the user declined.") {
			t.Fatalf("%s: %q %v", wire, text(res), err)
		}
	}
}

func TestTools(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	want := map[string]string{"long_computation": "optional", "deploy_with_confirmation": "required", "echo": "forbidden", "counted": "optional"}
	for _, wire := range wires {
		c := dial(t, s.URL, &client.Options{ProtocolVersion: wire})
		tools, err := c.Tools(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, tl := range tools {
			got[tl.Name] = tl.TaskSupport
		}
		// On 2026-07-28 the extension has no execution.taskSupport; an
		// mcptask server states it in each tool's _meta.
		for name, support := range want {
			if s, ok := got[name]; !ok || s != support {
				t.Errorf("%s: tool %s: support %q (listed %v), want %q", wire, name, s, ok, support)
			}
		}
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	c := dial(t, s.URL, &client.Options{ProtocolVersion: client.Wire20251125})
	var ids []string
	for range 2 {
		ids = append(ids, startTask(t, c, "long_computation", map[string]any{"n": 100, "steps": 1, "step_delay_ms": 60000}).ID)
	}
	tasks, next, err := c.List(testCtx(t), "")
	if err != nil || next != "" {
		t.Fatalf("List: %v (next %q)", err, next)
	}
	var got []string
	for _, tk := range tasks {
		got = append(got, tk.ID)
		if tk.Status != "working" {
			t.Errorf("task %s is %s", tk.ID, tk.Status)
		}
	}
	slices.Sort(got)
	slices.Sort(ids)
	if !slices.Equal(got, ids) {
		t.Fatalf("List: %v, want %v", got, ids)
	}
	for _, id := range ids {
		if _, err := c.Cancel(testCtx(t), id); err != nil {
			t.Fatal(err)
		}
	}

	c26 := dial(t, s.URL, &client.Options{ProtocolVersion: client.Wire20260728})
	if _, _, err := c26.List(testCtx(t), ""); !errors.Is(err, client.ErrUnsupported) {
		t.Fatalf("List on 2026-07-28: %v", err)
	}
}

// TestFallback calls a plain go-sdk server, which has no tasks.
func TestFallback(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	type echoArgs struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	for _, tc := range []struct {
		name      string
		stateless bool
		wire      string
		fallback  string
	}{
		{"stateless handler", true, client.Wire20260728, "does not advertise the io.modelcontextprotocol/tasks extension"},
		{"stateful handler", false, client.Wire20251125, "no tasks capability"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHTTPServer(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: tc.stateless}))
			c := dial(t, hs, nil)
			if c.Wire() != tc.wire || c.TasksSupported() {
				t.Fatalf("wire %s, tasks %v", c.Wire(), c.TasksSupported())
			}
			call, err := c.CallTool(testCtx(t), "echo", map[string]any{"text": "plain"})
			if err != nil {
				t.Fatal(err)
			}
			if call.Task != nil || text(call.Result) != "plain" || !strings.Contains(call.Fallback, tc.fallback) {
				t.Fatalf("call %+v (fallback %q)", call, call.Fallback)
			}
		})
	}
}

// TestResumeAfterHostKilled kills a host process (SIGKILL) while it waits
// for a task; a new client with the same journal reattaches to the task
// and gets its result, and the tool ran once.
func TestResumeAfterHostKilled(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, serverOpts{})
			journal := filepath.Join(t.TempDir(), "journal.json")
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), envHost+"=1", envURL+"="+s.URL, envJournal+"="+journal, envWire+"="+wire)
			var stderr proctest.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			lines := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			var id string
			select {
			case l, ok := <-lines:
				id, _ = strings.CutPrefix(l, "task ")
				if !ok || id == "" {
					t.Fatalf("host said %q\n%s", l, stderr.String())
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("the host created no task\n%s", stderr.String())
			}
			waitFor(t, 30*time.Second, "the tool to run", func() bool { return s.runs.Load() == 1 })
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()

			c := dial(t, s.URL, &client.Options{ProtocolVersion: wire, Journal: journal})
			pending, err := c.Pending()
			if err != nil || len(pending) != 1 || pending[0].TaskID != id || pending[0].Tool != "counted" || pending[0].Target != s.URL || pending[0].Wire != wire {
				t.Fatalf("journal after the crash: %+v %v", pending, err)
			}
			s.Release()
			var statuses atomic.Int32
			outcomes, err := c.Resume(testCtx(t), &client.WaitOptions{OnStatus: func(*client.TaskStatus) { statuses.Add(1) }})
			if err != nil || len(outcomes) != 1 {
				t.Fatalf("Resume: %+v %v", outcomes, err)
			}
			if statuses.Load() == 0 {
				t.Errorf("Resume never called OnStatus")
			}
			o := outcomes[0]
			if o.Err != nil || o.Entry.TaskID != id || text(o.Result) != "counted run 1" {
				t.Fatalf("outcome %+v (%q)", o, text(o.Result))
			}
			if n := s.runs.Load(); n != 1 {
				t.Fatalf("the tool ran %d times", n)
			}
			if p, err := c.Pending(); err != nil || len(p) != 0 {
				t.Fatalf("journal after Resume: %+v %v", p, err)
			}
		})
	}
}

func TestCorruptJournal(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	for _, junk := range []string{"{not json", `{"version":99,"tasks":[]}`, `{"version":1,"tasks":[{"taskId":""}]}`, "[]"} {
		path := filepath.Join(t.TempDir(), "journal.json")
		if err := os.WriteFile(path, []byte(junk), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := client.Dial(testCtx(t), s.URL, &client.Options{Journal: path})
		if !errors.Is(err, client.ErrJournalCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move it aside") {
			t.Fatalf("journal %q: %v", junk, err)
		}
		if b, _ := os.ReadFile(path); string(b) != junk {
			t.Fatalf("the corrupt journal was changed to %q", b)
		}
	}
	if n := s.runs.Load(); n != 0 {
		t.Fatal("a tool ran")
	}
}

func TestDeadline(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	for _, wire := range wires {
		journal := filepath.Join(t.TempDir(), "journal.json")
		c := dial(t, s.URL, &client.Options{ProtocolVersion: wire, Journal: journal})
		tk := startTask(t, c, "long_computation", map[string]any{"n": 100, "steps": 2, "step_delay_ms": 60000})
		start := time.Now()
		_, err := c.Wait(testCtx(t), tk.ID, &client.WaitOptions{Deadline: 200 * time.Millisecond})
		took := time.Since(start)
		if !errors.Is(err, client.ErrDeadline) || !strings.Contains(err.Error(), "still working") {
			t.Fatalf("%s: Wait past the deadline: %v", wire, err)
		}
		if took > 3*time.Second {
			t.Fatalf("%s: Wait returned %v after a 200ms deadline", wire, took)
		}
		// The task keeps running and stays in the journal.
		if st, err := c.Get(testCtx(t), tk.ID); err != nil || st.Status != "working" {
			t.Fatalf("%s: after the deadline: %+v %v", wire, st, err)
		}
		if p, _ := c.Pending(); len(p) != 1 {
			t.Fatalf("%s: journal %+v", wire, p)
		}

		// ctx cancellation ends the wait just as promptly.
		ctx, cancel := context.WithCancel(testCtx(t))
		time.AfterFunc(100*time.Millisecond, cancel)
		start = time.Now()
		if _, err := c.Wait(ctx, tk.ID, nil); !errors.Is(err, context.Canceled) || time.Since(start) > 3*time.Second {
			t.Fatalf("%s: Wait with a cancelled ctx: %v after %v", wire, err, time.Since(start))
		}
		if _, err := c.Cancel(testCtx(t), tk.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// TestVanishedTask waits for a task the server deleted after its TTL.
func TestVanishedTask(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{defaultTTL: 100 * time.Millisecond, sweep: 20 * time.Millisecond})
	for _, wire := range wires {
		journal := filepath.Join(t.TempDir(), "journal.json")
		c := dial(t, s.URL, &client.Options{ProtocolVersion: wire, Journal: journal})
		tk := startTask(t, c, "long_computation", map[string]any{"n": 10, "steps": 1, "step_delay_ms": 0})
		waitFor(t, 30*time.Second, "the task to expire", func() bool {
			_, err := c.Get(testCtx(t), tk.ID)
			if err != nil && !errors.Is(err, client.ErrTaskNotFound) {
				t.Fatal(err)
			}
			return err != nil
		})
		if _, err := c.Wait(testCtx(t), tk.ID, nil); !errors.Is(err, client.ErrTaskNotFound) {
			t.Fatalf("%s: Wait on an expired task: %v", wire, err)
		}
		if p, err := c.Pending(); err != nil || len(p) != 0 {
			t.Fatalf("%s: journal %+v %v", wire, p, err)
		}
	}
}

// TestConcurrentWaits waits for one task from several goroutines: each
// gets the result, and the input request is answered once.
func TestConcurrentWaits(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	for _, wire := range wires {
		var calls atomic.Int64
		c := dial(t, s.URL, &client.Options{ProtocolVersion: wire,
			Elicit: func(ctx context.Context, _ string, _ *mcp.ElicitParams) (*mcp.ElicitResult, error) {
				calls.Add(1)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
			}})
		tk := startTask(t, c, "deploy_with_confirmation", map[string]any{"service": "db", "build_steps": 1, "step_delay_ms": 50})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				res, err := c.Wait(testCtx(t), tk.ID, nil)
				if err != nil || text(res) != "Deployed db@latest to production." {
					t.Errorf("%s: %q %v", wire, text(res), err)
				}
			})
		}
		wg.Wait()
		if n := calls.Load(); n != 1 {
			t.Errorf("%s: Elicit called %d times", wire, n)
		}
	}
}

func TestSampling(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	for _, wire := range wires {
		var mu sync.Mutex
		var asked []string
		c := dial(t, s.URL, &client.Options{ProtocolVersion: wire,
			Sample: func(_ context.Context, taskID string, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
				mu.Lock()
				defer mu.Unlock()
				q, _ := p.Messages[0].Content.(*mcp.TextContent)
				asked = append(asked, taskID+": "+q.Text)
				return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: "4"}}, nil
			}})
		tk := startTask(t, c, "ask_model", map[string]any{"question": "2+2?"})
		res, err := c.Wait(testCtx(t), tk.ID, nil)
		if err != nil || text(res) != "the model says: 4" {
			t.Fatalf("%s: %q %v", wire, text(res), err)
		}
		mu.Lock()
		if len(asked) != 1 || asked[0] != tk.ID+": 2+2?" {
			t.Errorf("%s: Sample calls %q", wire, asked)
		}
		mu.Unlock()
	}
}

func TestTTL2025(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	c := dial(t, s.URL, &client.Options{ProtocolVersion: client.Wire20251125, TTL: 5 * time.Minute})
	tk := startTask(t, c, "long_computation", map[string]any{"n": 10, "steps": 1, "step_delay_ms": 0})
	if tk.TTL != 5*time.Minute {
		t.Fatalf("TTL %v, want the 5m asked for", tk.TTL)
	}
	if _, err := c.Wait(testCtx(t), tk.ID, nil); err != nil {
		t.Fatal(err)
	}
}

// TestWaitBacksOffWhenRateLimited: a server that rate-limits tasks/*
// requests (mcptask's -32000 "rate_limited" with retryAfterMs) does not
// make Wait fail: it pauses as asked and polls again, on both wires.
func TestWaitBacksOffWhenRateLimited(t *testing.T) {
	t.Parallel()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			// One tasks/* request per second per requester, no burst.
			s := newServer(t, serverOpts{limits: mcptask.Limits{RequestRate: 1, RequestBurst: 1}})
			// No listing of unknown effects before the call: it would
			// spend the bucket this test counts.
			c := dial(t, s.URL, &client.Options{ProtocolVersion: wire, AllowUnknownEffects: true})
			ctx := t.Context()
			call, err := c.CallTool(ctx, "counted", nil)
			if err != nil || call.Task == nil {
				t.Fatalf("CallTool: %+v %v", call, err)
			}
			h := call.Task
			// Spend the bucket, so the wait starts rate-limited.
			if _, err := c.Get(ctx, h.ID); err != nil {
				t.Fatal(err)
			}
			// A second one is refused, then sent again after the pause the
			// server asks for (Get is paced by the server's retry hints).
			gets := s.count("tasks/get")
			if _, err := c.Get(ctx, h.ID); err != nil {
				t.Fatalf("second immediate tasks/get: %v", err)
			}
			if n := s.count("tasks/get") - gets; n < 2 {
				t.Fatalf("the second Get sent %d tasks/get; want a refusal, then the request again", n)
			}
			s.Release()
			res, err := c.Wait(ctx, h.ID, nil)
			if err != nil || text(res) != "counted run 1" {
				t.Fatalf("Wait: %v %v", text(res), err)
			}
		})
	}
}
