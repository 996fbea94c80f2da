package mcpgo_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The mcp-go v1.2.1 server, with its in-memory tasks, as an upstream of
// mcptaskd's gateway (cmd/mcpgo-upstream), over stdio and over
// Streamable HTTP, driven through mcptaskd by mcptask's own Go client on
// both of mcptaskd's wires.

// gwHost is the Go client's host: it answers elicitation (accepting with
// a name, or declining) and sampling, and counts the questions.
type gwHost struct {
	mu      sync.Mutex
	decline bool
	asked   []string
	sampled int
}

// counts returns the questions asked and the sampling requests answered.
func (h *gwHost) counts() ([]string, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.asked...), h.sampled
}

func (h *gwHost) options(wire string) *client.Options {
	return &client.Options{ProtocolVersion: wire,
		Elicit: func(_ context.Context, _ string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.asked = append(h.asked, p.Message)
			if h.decline {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		Sample: func(context.Context, string, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			h.mu.Lock()
			h.sampled++
			h.mu.Unlock()
			return &mcp.CreateMessageResult{Model: "test-model-7", Role: "assistant", StopReason: "endTurn",
				Content: &mcp.TextContent{Text: "the sampled answer: 42"}}, nil
		}}
}

func dialGateway(t *testing.T, url, wire string, h *gwHost) *client.Client {
	t.Helper()
	if h == nil {
		h = &gwHost{}
	}
	c, err := client.Dial(t.Context(), url, h.options(wire))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func resultText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// waitStatus polls our task until done holds, or fails after 30 s.
func waitStatus(t *testing.T, c *client.Client, id string, done func(*client.TaskStatus) bool) *client.TaskStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.Get(t.Context(), id)
		if err != nil {
			t.Fatalf("tasks/get %s: %v", id, err)
		}
		if done(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: %s (%s); the condition never held", id, st.Status, st.StatusMessage)
		}
		timer := time.NewTimer(100 * time.Millisecond)
		select {
		case <-t.Context().Done():
			timer.Stop()
			t.Fatal(t.Context().Err())
		case <-timer.C:
		}
	}
}

// TestGatewayUpstream: the upstream's tools through mcptaskd, on both of
// its wires. Over HTTP mcptaskd makes each call of a task-capable tool an
// upstream task; over stdio only the tools the upstream runs only as
// tasks (block), the others being plain calls on a session of their own
// (a stdio upstream dies with mcptaskd: nothing to re-attach to).
func TestGatewayUpstream(t *testing.T) {
	httpUp := startUpstream(t, "-detach")
	for _, up := range []struct {
		name string
		cfg  map[string]any
	}{
		{"stdio", map[string]any{"command": upstreamBin, "args": []string{"-detach"}}},
		{"http", map[string]any{"url": httpUp.URL}},
	} {
		t.Run(up.name, func(t *testing.T) {
			cfg := writeConfig(t, map[string]any{"demo": false, "mcpServers": map[string]any{"mg": up.cfg}})
			d := startDaemon(t, filepath.Join(t.TempDir(), "tasks.db"), "-config", cfg, "-log-level", "debug")
			for _, wire := range []string{client.Wire20260728, client.Wire20251125} {
				t.Run(wire, func(t *testing.T) { upstreamFlows(t, d, up.name, wire) })
			}
		})
	}

	t.Run("http, tools that heed their context", func(t *testing.T) {
		// mcp-go cancels a task's context once its create is answered:
		// the upstream reports its task cancelled at once.
		up := startUpstream(t)
		cfg := writeConfig(t, map[string]any{"demo": false, "mcpServers": map[string]any{"mg": map[string]any{"url": up.URL}}})
		d := startDaemon(t, filepath.Join(t.TempDir(), "tasks.db"), "-config", cfg)
		c := dialGateway(t, d.URL, client.Wire20260728, nil)
		call, err := c.CallTool(t.Context(), "block", map[string]any{})
		if err != nil || call.Task == nil {
			t.Fatalf("block: %+v, %v; want a task", call, err)
		}
		_, err = c.Wait(t.Context(), call.Task.ID, nil)
		var te *client.TaskError
		if !errors.As(err, &te) || !strings.Contains(te.Message, "upstream mg cancelled its task") {
			t.Fatalf("block on an upstream whose tools heed their context: %v; want it failed, cancelled by the upstream", err)
		}
	})
}

// upstreamTaskOf returns the upstream task the gateway created for our
// task id (its debug log), or "" when it made none (a plain call). The
// log line may follow the create's answer: when want, it waits for it
// (up to 10 s).
func upstreamTaskOf(t *testing.T, d *daemon, id string, want bool) string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, r := range d.LogRecords("upstream task created") {
			if r["task"] == id {
				s, _ := r["upstreamTask"].(string)
				return s
			}
		}
		if !want || time.Now().After(deadline) {
			return ""
		}
		waitLog(t)
	}
}

func upstreamFlows(t *testing.T, d *daemon, transport, wire string) {
	asTask := transport == "http" // optional tools run as upstream tasks

	t.Run("tools and their task support", func(t *testing.T) {
		c := dialGateway(t, d.URL, wire, nil)
		tools, err := c.Tools(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, tl := range tools {
			got[tl.Name] = tl.TaskSupport
		}
		if got["block"] != "required" || got["slow"] != "optional" || len(got) != 8 {
			t.Errorf("tools: %v; want the upstream's 8, block required", got)
		}
	})

	t.Run("task followed to completion", func(t *testing.T) {
		c := dialGateway(t, d.URL, wire, nil)
		call, err := c.CallTool(t.Context(), "slow", map[string]any{"ms": 150, "steps": 4})
		if err != nil || call.Task == nil {
			t.Fatalf("slow: %+v, %v; want a task", call, err)
		}
		var mu sync.Mutex
		var messages []string
		res, err := c.Wait(t.Context(), call.Task.ID, &client.WaitOptions{OnStatus: func(st *client.TaskStatus) {
			mu.Lock()
			messages = append(messages, st.StatusMessage)
			mu.Unlock()
		}})
		if err != nil || resultText(res) != "slow: 4 steps done" {
			t.Fatalf("slow: %q, %v", resultText(res), err)
		}
		mu.Lock()
		defer mu.Unlock()
		if got := upstreamTaskOf(t, d, call.Task.ID, asTask); (got != "") != asTask {
			t.Errorf("upstream task %q; want one: %v", got, asTask)
		}
		// A plain call's progress is our status message; an mcp-go
		// task has none to relay (no status message, no progress).
		if !asTask && !slices.ContainsFunc(messages, func(m string) bool { return strings.Contains(m, " of 4") }) {
			t.Errorf("status messages %q; want the upstream's progress", messages)
		}
		if asTask && slices.ContainsFunc(messages, func(m string) bool { return m != "" }) {
			t.Errorf("status messages %q of an mcp-go upstream task; it has none", messages)
		}
	})

	for _, decline := range []bool{false, true} {
		name := map[bool]string{false: "input accepted", true: "input declined"}[decline]
		t.Run(name, func(t *testing.T) {
			h := &gwHost{decline: decline}
			c := dialGateway(t, d.URL, wire, h)
			call, err := c.CallTool(t.Context(), "ask", map[string]any{})
			if err != nil || call.Task == nil {
				t.Fatalf("ask: %+v, %v; want a task", call, err)
			}
			res, err := c.Wait(t.Context(), call.Task.ID, nil)
			asked, _ := h.counts()
			if asTask {
				// mcp-go's task asks on the session with no related-task
				// _meta (nor input_required): the gateway cannot tell
				// which task asks, and refuses.
				var te *client.TaskError
				if !errors.As(err, &te) || !strings.Contains(te.Message, "the upstream asked for input for a task the gateway does not watch") || len(asked) != 0 {
					t.Fatalf("ask as an upstream task: %v (asked %q); want it failed, the question unroutable", err, asked)
				}
				return
			}
			want := map[bool]string{false: "ask: accepted, name Ada", true: "ask: decline"}[decline]
			if err != nil || resultText(res) != want || len(asked) != 1 {
				t.Fatalf("ask: %q, %v (asked %q); want %q, asked once", resultText(res), err, asked, want)
			}
		})
	}

	t.Run("sampling", func(t *testing.T) {
		h := &gwHost{}
		c := dialGateway(t, d.URL, wire, h)
		call, err := c.CallTool(t.Context(), "sample", map[string]any{"prompt": "six times seven?"})
		if err != nil || call.Task == nil {
			t.Fatalf("sample: %+v, %v; want a task", call, err)
		}
		res, err := c.Wait(t.Context(), call.Task.ID, nil)
		_, sampled := h.counts()
		if asTask {
			var te *client.TaskError
			if !errors.As(err, &te) || !strings.Contains(te.Message, "the upstream asked for input for a task the gateway does not watch") || sampled != 0 {
				t.Fatalf("sample as an upstream task: %v (sampled %d); want it failed, the request unroutable", err, sampled)
			}
			return
		}
		if err != nil || resultText(res) != "sample: the sampled answer: 42 (model test-model-7)" || sampled != 1 {
			t.Fatalf("sample: %q, %v (sampled %d)", resultText(res), err, sampled)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		c := dialGateway(t, d.URL, wire, nil)
		call, err := c.CallTool(t.Context(), "block", map[string]any{})
		if err != nil || call.Task == nil {
			t.Fatalf("block: %+v, %v; want a task", call, err)
		}
		ut := upstreamTaskOf(t, d, call.Task.ID, true)
		if ut == "" {
			t.Fatalf("block made no upstream task")
		}
		if st, err := c.Cancel(t.Context(), call.Task.ID); err != nil || st.Status != "cancelled" {
			t.Fatalf("cancel: %+v, %v", st, err)
		}
		if _, err := c.Wait(t.Context(), call.Task.ID, nil); !errors.Is(err, client.ErrCancelled) {
			t.Errorf("after the cancel: %v; want cancelled", err)
		}
		// The upstream task got its tasks/cancel (answered: cancelled).
		deadline := time.Now().Add(10 * time.Second)
		for !slices.ContainsFunc(d.LogRecords("upstream task cancelled"), func(r map[string]any) bool { return r["upstreamTask"] == ut }) {
			if time.Now().After(deadline) {
				t.Fatalf("the gateway never cancelled upstream task %s", ut)
			}
			waitLog(t)
		}
	})

	t.Run("failed task and isError result", func(t *testing.T) {
		c := dialGateway(t, d.URL, wire, nil)
		call, err := c.CallTool(t.Context(), "fail", map[string]any{})
		if err != nil || call.Task == nil {
			t.Fatalf("fail: %+v, %v", call, err)
		}
		_, err = c.Wait(t.Context(), call.Task.ID, nil)
		var te *client.TaskError
		if !errors.As(err, &te) || !strings.Contains(te.Message, "the tool failed on purpose") {
			t.Errorf("fail: %v; want the task failed with the upstream's error", err)
		}
		call, err = c.CallTool(t.Context(), "iserror", map[string]any{})
		if err != nil || call.Task == nil {
			t.Fatalf("iserror: %+v, %v", call, err)
		}
		res, err := c.Wait(t.Context(), call.Task.ID, nil)
		if err != nil || !res.IsError || resultText(res) != "a tool error result" {
			t.Errorf("iserror: %q isError %v, %v; want the upstream's isError result", resultText(res), res != nil && res.IsError, err)
		}
	})
}

// waitLog pauses between two reads of a daemon's log.
func waitLog(t *testing.T) {
	timer := time.NewTimer(20 * time.Millisecond)
	defer timer.Stop()
	select {
	case <-t.Context().Done():
	case <-timer.C:
	}
}

// TestGatewayReattach: a task of the mcp-go upstream's block tool (task
// support required, so an upstream task) runs when mcptaskd is killed
// (SIGKILL); a new mcptaskd on the same SQLite file re-attaches to the
// recorded upstream task. The HTTP upstream survives mcptaskd:
//
//   - sessions (mcp-go's default, and server.WithStateful's validated
//     ones): mcp-go ties a task to the session that created it, and the
//     gateway's new session cannot see it: our task fails saying so (the
//     gateway asked in the old session, where the upstream still knows
//     the task);
//   - the upstream restarted too (on the same address): the task is
//     gone, and our task fails saying the upstream restarted (with
//     validated sessions: that the session is gone);
//   - stateless (server.WithStateLess): no session to tie tasks to, the
//     re-attachment works and the task ends with the upstream's result.
//
// In every case the tool ran once: a re-attachment never calls it again.
// A stdio upstream dies with mcptaskd (a child process, killed by its
// parent-death signal): there is nothing to re-attach to.
func TestGatewayReattach(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flags   []string
		restart bool   // restart the upstream too, on its address
		want    string // in our task's error; "" means it completes
	}{
		{name: "sessions", flags: []string{"-detach"}, want: "(it ties its tasks to the session that created them:"},
		{name: "validated sessions", flags: []string{"-stateful", "-detach"}, want: "(it ties its tasks to the session that created them:"},
		{name: "sessions, upstream restarted", flags: []string{"-detach"}, restart: true,
			want: "(it restarted or expired the task: the session that created it no longer knows it either)"},
		{name: "validated sessions, upstream restarted", flags: []string{"-stateful", "-detach"}, restart: true,
			want: "(the session that created the task is gone: the upstream restarted, or ended that session)"},
		{name: "stateless", flags: []string{"-stateless", "-detach"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startUpstream(t, tc.flags...)
			cfg := writeConfig(t, map[string]any{"demo": false, "mcpServers": map[string]any{"mg": map[string]any{"url": up.URL}}})
			db := filepath.Join(t.TempDir(), "tasks.db")
			d := startDaemon(t, db, "-config", cfg)
			c := dialGateway(t, d.URL, client.Wire20260728, nil)
			call, err := c.CallTool(t.Context(), "block", map[string]any{})
			if err != nil || call.Task == nil {
				t.Fatalf("block: %+v, %v; want a task", call, err)
			}
			// The create is answered once the upstream task's ID is
			// recorded; the kill comes after.
			d.kill9()
			_ = c.Close()
			if tc.restart {
				up.Kill()
				host := strings.TrimSuffix(strings.TrimPrefix(up.URL, "http://"), "/mcp")
				up = startUpstream(t, append([]string{"-http", host}, tc.flags...)...)
			}

			d2 := startDaemon(t, db, "-config", cfg)
			c2 := dialGateway(t, d2.URL, client.Wire20260728, nil)
			if tc.want == "" {
				waitStatus(t, c2, call.Task.ID, func(st *client.TaskStatus) bool {
					return strings.Contains(st.StatusMessage, "re-attached to the task")
				})
				release(t, c2, "block runs: 1")
				res, err := c2.Wait(t.Context(), call.Task.ID, nil)
				if err != nil || resultText(res) != "released" {
					t.Fatalf("the re-attached task: %q, %v; want the upstream's result", resultText(res), err)
				}
				return
			}
			_, err = c2.Wait(t.Context(), call.Task.ID, nil)
			var te *client.TaskError
			if !errors.As(err, &te) || !strings.Contains(te.Message, tc.want) {
				t.Fatalf("the task after the restart: %v; want it failed saying %q", err, tc.want)
			}
			t.Logf("our task's error: %s", te.Message)
			if !tc.restart {
				release(t, c2, "block runs: 1")
			}
		})
	}
}

// release calls the upstream's release tool (a plain call) and checks
// its count of block runs.
func release(t *testing.T, c *client.Client, want string) {
	t.Helper()
	call, err := c.CallTool(t.Context(), "release", map[string]any{})
	if err != nil {
		t.Fatalf("release: %v", err)
	}
	res := call.Result
	if call.Task != nil {
		if res, err = c.Wait(t.Context(), call.Task.ID, nil); err != nil {
			t.Fatalf("release: %v", err)
		}
	}
	if got := resultText(res); got != want {
		t.Errorf("release: %q, want %q (the tool was called again?)", got, want)
	}
}

// TestGatewayStdioKill: a stdio upstream is a child of mcptaskd: a kill -9
// of mcptaskd takes it down (its parent-death signal), its in-memory task
// with it. The new mcptaskd has nothing to re-attach to: our task of
// block (an upstream task: the tool runs only as one) fails.
func TestGatewayStdioKill(t *testing.T) {
	cfg := writeConfig(t, map[string]any{"demo": false, "mcpServers": map[string]any{
		"mg": map[string]any{"command": upstreamBin, "args": []string{"-detach"}}}})
	db := filepath.Join(t.TempDir(), "tasks.db")
	d := startDaemon(t, db, "-config", cfg)
	c := dialGateway(t, d.URL, client.Wire20260728, nil)
	call, err := c.CallTool(t.Context(), "block", map[string]any{})
	if err != nil || call.Task == nil {
		t.Fatalf("block: %+v, %v; want a task", call, err)
	}
	children := childrenOf(t, d.Pid(), upstreamBin)
	if len(children) == 0 {
		t.Fatalf("no mcpgo-upstream child of mcptaskd %d", d.Pid())
	}
	d.kill9()
	_ = c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range children {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("upstream process %d outlived mcptaskd's kill -9", pid)
			}
			waitLog(t)
		}
	}

	d2 := startDaemon(t, db, "-config", cfg)
	c2 := dialGateway(t, d2.URL, client.Wire20260728, nil)
	_, err = c2.Wait(t.Context(), call.Task.ID, nil)
	var te *client.TaskError
	if !errors.As(err, &te) {
		t.Fatalf("the task after the restart: %v; want it failed", err)
	}
	t.Logf("our task's error: %s", te.Message)
	if !strings.Contains(te.Message, "outcome") {
		t.Errorf("the task's error %q does not say the outcome is unknown", te.Message)
	}
}

// childrenOf returns the processes whose parent is ppid and whose
// executable is exe (Linux /proc).
func childrenOf(t *testing.T, ppid int, exe string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("SKIPPED: no /proc: %v", err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split
		// after its closing parenthesis.
		i := strings.LastIndexByte(string(stat), ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(ppid) {
			continue
		}
		if target, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && target == exe {
			out = append(out, pid)
		}
	}
	return out
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	return len(f) > 0 && f[0] != "Z"
}
