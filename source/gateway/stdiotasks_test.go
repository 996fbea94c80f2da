package gateway_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/source/gateway"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// taskUpstreamEnv makes the test binary a stdio upstream that speaks
// tasks (an mcptask server), see runStdioTaskUpstream.
const taskUpstreamEnv = "GATEWAY_TEST_STDIO_TASK_UPSTREAM"

// runStdioTaskUpstream serves, over stdio, an mcptask server whose tool
// "die" (task support required) exits the process once it runs, and whose
// tool "once" (optional) exits the process the first time it is called
// with a marker file that does not exist yet.
func runStdioTaskUpstream() int {
	st, err := sqlite.Open(filepath.Join(os.Getenv("GATEWAY_TEST_DIR"), "upstream.db"), nil)
	if err != nil {
		return 2
	}
	// FinishWithin off: the upstream acknowledges a task before its work
	// can kill the process (within the window, the answer would wait for
	// the work, and die with it).
	eng, err := engine.New(engine.Options{Store: st, Exclusive: true, SweepInterval: -1, FinishWithin: -1})
	if err != nil {
		return 2
	}
	ts, err := mcptask.New(mcp.NewServer(&mcp.Implementation{Name: "task-upstream", Version: "1"}, nil), eng, nil)
	if err != nil {
		return 2
	}
	mcptask.AddTool(ts, &mcp.Tool{Name: "die"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if tk := mcptask.FromContext(ctx); tk != nil {
			_ = tk.SetStatusMessage(ctx, "about to die")
		}
		os.Exit(3)
		return nil, nil, nil
	}, mcptask.ToolOptions{Support: mcptask.Required})
	mcptask.AddTool(ts, &mcp.Tool{Name: "once"}, func(ctx context.Context, _ *mcp.CallToolRequest, in blockArgs) (*mcp.CallToolResult, any, error) {
		if _, err := os.Stat(in.Marker); err != nil {
			_ = os.WriteFile(in.Marker, []byte("died once"), 0o600)
			os.Exit(3)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "survived"}}}, nil, nil
	}, mcptask.ToolOptions{Support: mcptask.Optional})
	if err := ts.Start(context.Background()); err != nil {
		return 2
	}
	if err := ts.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// TestStdioTaskUpstreamDies: a stdio upstream that speaks tasks dies with
// the task it runs. A tool it only runs as a task fails at once, saying
// the upstream died (not after minutes of waiting for an answer, nor as
// "unavailable"); a tool it runs either way runs as a plain call, and
// being rerunnable is called again on a new process. Across a restart of
// mcptaskd nothing re-attaches to a stdio upstream (it died with it).
func TestStdioTaskUpstreamDies(t *testing.T) {
	dir := t.TempDir()
	url := gatewayServer(t, gateway.Upstream{Name: "tu", Command: os.Args[0], ProtocolVersion: "2026-07-28",
		Env:     map[string]string{taskUpstreamEnv: "1", "GATEWAY_TEST_DIR": dir},
		Default: gateway.ToolPolicy{Support: mcptask.Optional, Rerunnable: true}})
	ctx := t.Context()
	for _, wire := range []string{client.Wire20260728, client.Wire20251125} {
		t.Run(wire, func(t *testing.T) {
			c, err := client.Dial(ctx, url, &client.Options{ProtocolVersion: wire})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			call, err := c.CallTool(ctx, "die", map[string]any{})
			if err != nil || call.Task == nil {
				t.Fatalf("die: %+v, %v; want a task", call, err)
			}
			start := time.Now()
			_, err = c.Wait(ctx, call.Task.ID, nil)
			var te *client.TaskError
			if !errors.As(err, &te) || !strings.Contains(te.Message, "upstream tu died during its task") {
				t.Errorf("a task whose stdio upstream died: %v; want it failed saying the upstream died", err)
			}
			t.Logf("failed %v after the call", time.Since(start).Round(time.Millisecond))

			call, err = c.CallTool(ctx, "once", map[string]any{"marker": filepath.Join(t.TempDir(), "marker")})
			if err != nil || call.Task == nil {
				t.Fatalf("once: %+v, %v; want a task", call, err)
			}
			if res, err := c.Wait(ctx, call.Task.ID, nil); err != nil || text(res) != "survived" {
				t.Errorf("a rerunnable tool whose upstream died once: %q, %v; want it called again", text(res), err)
			}
		})
	}
}
