package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/source/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway's added latency per call: the same upstream tool (a
// go-sdk server on loopback HTTP, answering at once) called directly, as
// a plain call through the gateway, and as a task through the gateway
// (create, wait, result: two durable writes on SQLite). Compare the
// ns/op of one run: go test -run '^$' -bench . ./source/gateway

func benchUpstream(b *testing.B) string {
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstreamServer(false) }, nil))
	b.Cleanup(hs.Close)
	return hs.URL
}

func benchCall(b *testing.B, url string) {
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 0}}
	b.ResetTimer()
	for b.Loop() {
		res, err := cs.CallTool(b.Context(), params)
		if err != nil || res.IsError {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

func BenchmarkDirect(b *testing.B) { benchCall(b, benchUpstream(b)) }

func BenchmarkGatewayPlain(b *testing.B) {
	benchCall(b, gatewayServer(b, gateway.Upstream{Name: "up", URL: benchUpstream(b)}))
}

func BenchmarkGatewayTask(b *testing.B) {
	benchTask(b, gatewayServer(b, gateway.Upstream{Name: "up", URL: benchUpstream(b)}))
}

// benchTask calls "slow" with no steps as a task of the server at url,
// and waits for its end, b.N times.
func benchTask(b *testing.B, url string) {
	c, err := client.Dial(b.Context(), url, &client.Options{ProtocolVersion: client.Wire20260728})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ResetTimer()
	for b.Loop() {
		call, err := c.CallTool(b.Context(), "slow", map[string]any{"steps": 0})
		if err != nil || call.Task == nil {
			b.Fatalf("%+v %v", call, err)
		}
		if _, err := c.Wait(b.Context(), call.Task.ID, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLocalTask is BenchmarkGatewayTask's work as a task of a Go
// tool of the server itself (the same client path: create, wait,
// result): what the gateway's task adds over a local one (issue 33's
// goal: within 1.2×).
func BenchmarkLocalTask(b *testing.B) {
	s := servertest.Start(b, servertest.Options{Register: func(ts *mcptask.Server) (func(), error) {
		mcptask.AddTool(ts, &mcp.Tool{Name: "slow", Description: "does its steps (none here)"},
			func(context.Context, *mcp.CallToolRequest, struct {
				Steps int `json:"steps"`
			}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "did 0 steps"}}}, nil, nil
			}, mcptask.ToolOptions{Support: mcptask.Optional})
		return nil, nil
	}})
	benchTask(b, s.URL+"/mcp")
}
