package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"
)

// samplingServer serves, on loopback, a tool "summarize" whose task asks
// the client for an LLM completion and answers what it got.
func samplingServer(t *testing.T) string {
	t.Helper()
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(engine.Options{Store: st, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "sampling", Version: "1"}, &mcp.ServerOptions{Logger: discard})
	ts, err := mcptask.New(srv, eng, &mcptask.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	mcptask.AddTool(ts, &mcp.Tool{Name: "summarize"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			tk := mcptask.FromContext(ctx)
			res, err := tk.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 50,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "summarize"}}}})
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Required})
	ctx := context.Background()
	if err := ts.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(ts.Handler(nil))
	t.Cleanup(func() {
		// The tasks still wait for their sampling answers: stop the
		// server (and the tasks/result calls that wait with them) first.
		ts.CloseStreams()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ts.Close(ctx)
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs.URL
}

// TestSamplingAnnounced: a task that asks for sampling is announced as
// such (mcptask has no model: use a host), and the wait ends with exit 8
// instead of a spinner forever; with --wait-sampling it waits on (here
// until --timeout), still saying why.
func TestSamplingAnnounced(t *testing.T) {
	url := samplingServer(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			journal := filepath.Join(t.TempDir(), "journal.json")
			code, _, stderr := runApp("--url", url, "--journal", journal, "--wire", wire, "call", "summarize")
			if code != exitSampling || !strings.Contains(stderr, "asks the client for an LLM completion (sampling); mcptask cannot answer it: use a host") ||
				!strings.Contains(stderr, "wait --wait-sampling") {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitSampling, stderr)
			}
			start := time.Now()
			code, _, stderr = runApp("--url", url, "--journal", journal, "--wire", wire, "--timeout", "1s", "call", "--wait-sampling", "summarize")
			if code != exitDeadline || strings.Count(stderr, "asks the client for an LLM completion") != 1 {
				t.Fatalf("--wait-sampling: exit %d after %v, want %d (the deadline), the request said once; stderr:\n%s", code, time.Since(start), exitDeadline, stderr)
			}
		})
	}
}
