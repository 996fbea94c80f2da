package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/upstreamtest"
	"github.com/mcptask/mcptask/source/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary is also the upstream: a plain go-sdk server over stdio
// (no tasks of its own), started by the gateway as a child process.
func TestMain(m *testing.M) {
	if os.Getenv("GATEWAY_TEST_UPSTREAM") == "1" {
		os.Exit(runUpstream())
	}
	if os.Getenv(taskUpstreamEnv) == "1" {
		os.Exit(runStdioTaskUpstream())
	}
	os.Exit(m.Run())
}

type slowArgs struct {
	Steps int `json:"steps"`
}

type askArgs struct {
	Question string `json:"question"`
}

type blockArgs struct {
	Marker string `json:"marker" jsonschema:"a file the tool writes when its call is cancelled"`
}

func runUpstream() int {
	if d, err := time.ParseDuration(os.Getenv("GATEWAY_TEST_SLOW_START")); err == nil {
		time.Sleep(d) // an upstream slow to start (npx under load)
	}
	if err := upstreamServer(true).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// upstreamServer is the upstream's tools; stdio says it runs as a child
// process (which its "crash" tool ends).
func upstreamServer(stdio bool) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "reports progress, step by step"},
		func(ctx context.Context, req *mcp.CallToolRequest, in slowArgs) (*mcp.CallToolResult, any, error) {
			for i := 1; i <= in.Steps; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: float64(in.Steps),
					Message: fmt.Sprintf("upstream step %d of %d", i, in.Steps)})
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "slow", Data: fmt.Sprintf("slow step %d", i)})
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Data: "below the level"})
				time.Sleep(20 * time.Millisecond) // the work the steps stand for
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("did %d steps", in.Steps)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "chatty", Description: "logs many lines at once, then answers"},
		func(ctx context.Context, req *mcp.CallToolRequest, in slowArgs) (*mcp.CallToolResult, any, error) {
			for i := 1; i <= in.Steps; i++ {
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "chatty", Data: fmt.Sprintf("line %d", i)})
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "said it all"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "asks the user"},
		func(ctx context.Context, req *mcp.CallToolRequest, in askArgs) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: in.Question, RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}})
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s: %v", res.Action, res.Content["answer"])}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "block", Description: "waits until cancelled"},
		func(ctx context.Context, req *mcp.CallToolRequest, in blockArgs) (*mcp.CallToolResult, any, error) {
			_ = os.WriteFile(in.Marker+".started", []byte("started"), 0o600)
			<-ctx.Done()
			_ = os.WriteFile(in.Marker, []byte("cancelled"), 0o600)
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "the upstream process dies mid-call"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			if stdio {
				os.Exit(3)
			}
			return nil, nil, fmt.Errorf("crash only crashes a stdio upstream")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash_once", Description: "the upstream process dies during the first call"},
		func(_ context.Context, _ *mcp.CallToolRequest, in blockArgs) (*mcp.CallToolResult, any, error) {
			if _, err := os.Stat(in.Marker); err != nil && stdio {
				_ = os.WriteFile(in.Marker, []byte("crashed once"), 0o600)
				os.Exit(3)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "survived"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "late", Description: "answers at once; once the file Marker+\".go\" exists, sends a log message and an elicitation on the same connection, and writes the elicitation's outcome to Marker"},
		func(_ context.Context, req *mcp.CallToolRequest, in blockArgs) (*mcp.CallToolResult, any, error) {
			go upstreamtest.LateRequests(req.Session, in.Marker)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answered at once"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "never answers"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	return s
}

// gatewayServer is an mcptask server on SQLite whose tools are the
// upstream's, through the gateway, served on loopback HTTP.
func gatewayServer(t testing.TB, ups ...gateway.Upstream) string {
	t.Helper()
	s := servertest.Start(t, servertest.Options{
		Logger:    slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		StopGrace: 5 * time.Second,
		Register:  startGateway(t, ups),
	})
	return s.URL + "/mcp"
}

// TestGateway: a plain upstream's tools, through the gateway, run as
// tasks on both wires: the upstream's progress is the task's status
// message, its elicitation the task's input_required (answered by the
// client, the answer going back upstream), its log messages the task's
// log, a cancel reaches the upstream call, and the result is the task's.
func TestGateway(t *testing.T) {
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstreamServer(false) }, nil))
	t.Cleanup(hs.Close)
	for _, up := range []gateway.Upstream{stdioUpstream(), {Name: "up", URL: hs.URL}} {
		kind := "stdio"
		if up.URL != "" {
			kind = "http"
		}
		url := gatewayServer(t, up)
		for _, wire := range []string{client.Wire20260728, client.Wire20251125} {
			t.Run(kind+"/"+wire, func(t *testing.T) { gatewayFlows(t, url, wire) })
		}
	}
}

// TestGatewayLogTail: the log lines an upstream sends just before its
// answer are all in the task's log. The go-sdk hands notifications to a
// queue of their own and the answer straight to the call: the call ended
// before the last lines were handled, which were then dropped as sent
// outside any call (TestGateway lost its first line so once under load).
func TestGatewayLogTail(t *testing.T) {
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstreamServer(false) }, nil))
	t.Cleanup(hs.Close)
	for _, up := range []gateway.Upstream{stdioUpstream(), {Name: "up", URL: hs.URL}} {
		kind := "stdio"
		if up.URL != "" {
			kind = "http"
		}
		t.Run(kind, func(t *testing.T) {
			url := gatewayServer(t, up)
			ctx := t.Context()
			c, err := client.Dial(ctx, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			const lines = 300
			for round := range 3 {
				call, err := c.CallTool(ctx, "chatty", map[string]any{"steps": lines})
				if err != nil || call.Task == nil {
					t.Fatalf("chatty: %+v, %v; want a task", call, err)
				}
				if res, err := c.Wait(ctx, call.Task.ID, nil); err != nil || text(res) != "said it all" {
					t.Fatalf("chatty: %q, %v", text(res), err)
				}
				var got []string
				for cursor := int64(0); ; {
					page, err := c.ReadLog(ctx, call.Task.ID, cursor, 0)
					if err != nil {
						t.Fatal(err)
					}
					for _, l := range page.Lines {
						got = append(got, l.Text)
					}
					cursor = page.Next
					if !page.More {
						break
					}
				}
				if len(got) != lines || got[lines-1] != fmt.Sprintf("[info] line %d", lines) {
					t.Fatalf("round %d: the task's log has %d of the %d lines the upstream sent before its answer (last %q)", round, len(got), lines, got[len(got)-1:])
				}
			}
		})
	}
}

// stdioUpstream is the test binary as a stdio upstream.
func stdioUpstream() gateway.Upstream {
	return gateway.Upstream{
		Name:    "up",
		Command: os.Args[0],
		Env:     map[string]string{"GATEWAY_TEST_UPSTREAM": "1"},
		Default: gateway.ToolPolicy{Support: mcptask.Optional},
		// A call of hang times out.
		Policies: map[string]gateway.ToolPolicy{"hang": {Support: mcptask.Optional, Timeout: 300 * time.Millisecond},
			// A call whose upstream died may be made again.
			"crash_once": {Support: mcptask.Optional, Rerunnable: true}},
	}
}

func gatewayFlows(t *testing.T, url, wire string) {
	{
		{
			ctx := t.Context()
			c, err := client.Dial(ctx, url, &client.Options{ProtocolVersion: wire,
				Elicit: func(_ context.Context, _ string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes to " + p.Message}}, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()

			// Progress.
			call, err := c.CallTool(ctx, "slow", map[string]any{"steps": 10})
			if err != nil || call.Task == nil {
				t.Fatalf("slow: %+v, %v; want a task", call, err)
			}
			var mu sync.Mutex
			var messages []string
			res, err := c.Wait(ctx, call.Task.ID, &client.WaitOptions{OnStatus: func(st *client.TaskStatus) {
				mu.Lock()
				messages = append(messages, st.StatusMessage)
				mu.Unlock()
			}})
			if err != nil || text(res) != "did 10 steps" {
				t.Fatalf("slow: %q, %v", text(res), err)
			}
			mu.Lock()
			seen := strings.Join(messages, "|")
			mu.Unlock()
			if !strings.Contains(seen, "upstream step") {
				t.Errorf("no upstream progress among the status messages: %q", seen)
			}
			// The upstream's log messages during the call, at the level
			// set or above, are in the task's log.
			page, err := c.ReadLog(ctx, call.Task.ID, 0, 0)
			if err != nil {
				t.Fatalf("the task's log: %v", err)
			}
			if !page.Done() || len(page.Lines) == 0 || page.Lines[0].Text != "[info] slow step 1" || page.Lines[0].Stream != "slow" {
				t.Errorf("the task's log: %+v", page)
			}
			for _, l := range page.Lines {
				if strings.Contains(l.Text, "below the level") {
					t.Errorf("a debug message reached the task's log: %+v", l)
				}
			}

			// Elicitation.
			call, err = c.CallTool(ctx, "ask", map[string]any{"question": "deploy?"})
			if err != nil || call.Task == nil {
				t.Fatalf("ask: %+v, %v; want a task", call, err)
			}
			res, err = c.Wait(ctx, call.Task.ID, nil)
			if err != nil || text(res) != "accept: yes to deploy?" {
				t.Fatalf("ask: %q, %v", text(res), err)
			}

			// Cancel.
			marker := filepath.Join(t.TempDir(), "cancelled")
			call, err = c.CallTool(ctx, "block", map[string]any{"marker": marker})
			if err != nil || call.Task == nil {
				t.Fatalf("block: %+v, %v; want a task", call, err)
			}
			// Once the upstream runs the call (a cancel before that
			// reaches no upstream call: there is none to cancel).
			waitFile(t, marker+".started")
			if _, err := c.Cancel(ctx, call.Task.ID); err != nil {
				t.Fatal(err)
			}
			waitFile(t, marker) // the upstream call was cancelled
		}
	}
}

// TestUpstreamFaults: an upstream process that dies mid-call fails that
// task, saying the upstream is unavailable, and the next call gets a new
// process; a call that hangs past its timeout fails, saying so.
func TestUpstreamFaults(t *testing.T) {
	url := gatewayServer(t, stdioUpstream())
	for _, wire := range []string{client.Wire20260728, client.Wire20251125} {
		t.Run(wire, func(t *testing.T) {
			ctx := t.Context()
			c, err := client.Dial(ctx, url, &client.Options{ProtocolVersion: wire})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			wait := func(tool string, args any) (*mcp.CallToolResult, error) {
				call, err := c.CallTool(ctx, tool, args)
				if err != nil || call.Task == nil {
					t.Fatalf("%s: %+v, %v; want a task", tool, call, err)
				}
				return c.Wait(ctx, call.Task.ID, nil)
			}
			var te *client.TaskError
			if _, err := wait("crash", map[string]any{}); !errors.As(err, &te) || !strings.Contains(te.Message, "upstream up died during the call of crash") ||
				!strings.Contains(te.Message, "not declared rerunnable") {
				t.Errorf("a call whose upstream died: %v; want a failed task saying the upstream died and the tool was not called again", err)
			}
			// A rerunnable tool is called again on a new process.
			marker := filepath.Join(t.TempDir(), "crashed")
			if res, err := wait("crash_once", map[string]any{"marker": marker}); err != nil || text(res) != "survived" {
				t.Errorf("a rerunnable call whose upstream died once: %q, %v; want it called again and answered", text(res), err)
			}
			if res, err := wait("slow", map[string]any{"steps": 2}); err != nil || text(res) != "did 2 steps" {
				t.Errorf("the call after the crash: %q, %v; want it served by a new upstream process", text(res), err)
			}
			if _, err := wait("hang", map[string]any{}); !errors.As(err, &te) || !strings.Contains(te.Message, "timed out") {
				t.Errorf("a call that hangs past its timeout: %v; want a failed task saying it timed out", err)
			}
		})
	}
}

// waitFile waits until the upstream wrote the file at path.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream never wrote %s", filepath.Base(path))
		}
		time.Sleep(10 * time.Millisecond) // polling the file, not timing the test
	}
}

func text(res *mcp.CallToolResult) string {
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
