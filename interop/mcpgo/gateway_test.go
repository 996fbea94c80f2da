package mcpgo_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
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
}

func upstreamFlows(t *testing.T, d *daemon, transport, wire string) {
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
		t.Logf("%v", got)
	})

	t.Run("task with progress", func(t *testing.T) {
		c := dialGateway(t, d.URL, wire, nil)
		call, err := c.CallTool(t.Context(), "slow", map[string]any{"ms": 150, "steps": 4})
		if err != nil || call.Task == nil {
			t.Fatalf("slow: %+v, %v; want a task", call, err)
		}
		var mu sync.Mutex
		var messages []string
		res, err := c.Wait(t.Context(), call.Task.ID, &client.WaitOptions{OnStatus: func(st *client.TaskStatus) {
			mu.Lock()
			messages = append(messages, st.Status+": "+st.StatusMessage)
			mu.Unlock()
		}})
		t.Logf("slow: %q, %v; statuses %q", resultText(res), err, messages)
	})

	for _, decline := range []bool{false, true} {
		t.Run("elicitation, decline "+map[bool]string{false: "no", true: "yes"}[decline], func(t *testing.T) {
			h := &gwHost{decline: decline}
			c := dialGateway(t, d.URL, wire, h)
			call, err := c.CallTool(t.Context(), "ask", map[string]any{})
			if err != nil || call.Task == nil {
				t.Fatalf("ask: %+v, %v; want a task", call, err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			res, err := c.Wait(ctx, call.Task.ID, nil)
			t.Logf("ask: %q, %v; asked %q", resultText(res), err, h.asked)
		})
	}

	t.Run("sampling", func(t *testing.T) {
		h := &gwHost{}
		c := dialGateway(t, d.URL, wire, h)
		call, err := c.CallTool(t.Context(), "sample", map[string]any{"prompt": "six times seven?"})
		if err != nil || call.Task == nil {
			t.Fatalf("sample: %+v, %v; want a task", call, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		res, err := c.Wait(ctx, call.Task.ID, nil)
		t.Logf("sample: %q, %v; sampled %d", resultText(res), err, h.sampled)
	})

	t.Run("cancel", func(t *testing.T) {
		c := dialGateway(t, d.URL, wire, nil)
		call, err := c.CallTool(t.Context(), "block", map[string]any{})
		if err != nil || call.Task == nil {
			t.Fatalf("block: %+v, %v; want a task", call, err)
		}
		waitStatus(t, c, call.Task.ID, func(st *client.TaskStatus) bool { return st.Status == "working" })
		st, err := c.Cancel(t.Context(), call.Task.ID)
		t.Logf("cancel: %+v, %v", st, err)
		_, err = c.Wait(t.Context(), call.Task.ID, nil)
		t.Logf("after cancel: %v", err)
		for _, r := range d.LogRecords("upstream task cancelled") {
			t.Logf("log: %v", r)
		}
	})

	t.Run("failed and isError", func(t *testing.T) {
		c := dialGateway(t, d.URL, wire, nil)
		for _, name := range []string{"fail", "iserror"} {
			call, err := c.CallTool(t.Context(), name, map[string]any{})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if call.Task == nil {
				t.Logf("%s answered at once: %q isError %v", name, resultText(call.Result), call.Result.IsError)
				continue
			}
			res, err := c.Wait(t.Context(), call.Task.ID, nil)
			var te *client.TaskError
			errors.As(err, &te)
			t.Logf("%s: %q isError %v, %v", name, resultText(res), res != nil && res.IsError, err)
		}
	})
	_ = slices.Contains[[]string]
	_ = transport
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
