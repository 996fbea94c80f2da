package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/source/gateway"
	"github.com/modelcontextprotocol/go-sdk/auth"
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

// BenchmarkGatewayTask: an anonymous requester's task, whose upstream
// call gets a session of its own (a new upstream session per task: what
// the upstream sends during the call is that task's, and anonymous
// requesters are not told apart).
func BenchmarkGatewayTask(b *testing.B) {
	benchTask(b, benchServer(b, startGateway(b, []gateway.Upstream{{Name: "up", URL: benchUpstream(b)}})), "")
}

// BenchmarkGatewayTaskUser: the tasks of one authenticated user, whose
// upstream calls share the user's pooled sessions.
func BenchmarkGatewayTaskUser(b *testing.B) {
	benchTask(b, benchServer(b, startGateway(b, []gateway.Upstream{{Name: "up", URL: benchUpstream(b)}})), "alice")
}

// benchServer starts a server with the tools register adds, assembled as
// mcptaskd assembles it (the fast lane on), that verifies bearer tokens
// when a request has one (its user: the token); it returns its endpoint.
func benchServer(b *testing.B, register func(*mcptask.Server) (func(), error)) string {
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		return &auth.TokenInfo{UserID: token, Expiration: time.Now().Add(time.Hour)}, nil
	}
	s := servertest.Start(b, servertest.Options{
		Register: register,
		Tasks:    mcptask.Options{FastLane: true},
		Wrap: func(h http.Handler) http.Handler {
			authed := auth.RequireBearerToken(verify, nil)(h)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") == "" {
					h.ServeHTTP(w, r)
					return
				}
				authed.ServeHTTP(w, r)
			})
		},
	})
	return s.URL + "/mcp"
}

// benchTask calls "slow" with no steps as a task of the server at url,
// as the user of the bearer token token ("": anonymous), and waits for
// its end, b.N times.
func benchTask(b *testing.B, url, token string) {
	c, err := client.Dial(b.Context(), url, &client.Options{ProtocolVersion: client.Wire20260728, BearerToken: token})
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
	benchTask(b, benchServer(b, func(ts *mcptask.Server) (func(), error) {
		mcptask.AddTool(ts, &mcp.Tool{Name: "slow", Description: "does its steps (none here)"},
			func(context.Context, *mcp.CallToolRequest, struct {
				Steps int `json:"steps"`
			}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "did 0 steps"}}}, nil, nil
			}, mcptask.ToolOptions{Support: mcptask.Optional})
		return nil, nil
	}), "")
}
