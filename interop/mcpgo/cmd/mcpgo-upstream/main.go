// Command mcpgo-upstream is an MCP server built on github.com/mark3labs/mcp-go
// v1.2.1 with that library's in-memory tasks (2025-11-25 experimental
// tasks: server.WithTaskCapabilities, mcp.WithTaskSupport), for the
// interop tests of this module: they put it behind mcptaskd's gateway,
// over stdio or over Streamable HTTP.
//
// Tools (task support in brackets):
//
//   - echo {text} [none]: answers the text at once;
//   - slow {ms, steps} [optional]: sends steps progress notifications (on
//     the call's progress token, when it has one) ms apart, then answers;
//   - block {} [required]: runs until release is called, or its context
//     ends (a cancel); each run is counted;
//   - release {} [none]: ends every block run, and answers how many block
//     runs there were;
//   - ask {} [optional]: asks the client for a name (elicitation/create)
//     and answers what it said;
//   - sample {prompt} [optional]: asks the client to sample
//     (sampling/createMessage) and answers the text it got;
//   - fail {} [optional]: returns an error (the task fails);
//   - iserror {} [optional]: returns an isError result.
//
// Without -http it serves stdio. With -http ADDR (loopback) it serves
// Streamable HTTP on http://ADDR/mcp, with mcp-go's default sessions
// (IDs given, any ID accepted), validated ones with -stateful (an unknown
// session is answered 404), none with -stateless, prints "listening on URL" on standard output once it
// accepts connections, and exits on SIGTERM/SIGINT.
//
// mcp-go v1.2.1 runs a task under the context of the tools/call that
// created it, which MCPServer.HandleMessage cancels as soon as it has
// answered the call with the CreateTaskResult (on every transport): a
// tool that heeds its context is cancelled at once, and mcp-go reports
// its task cancelled ("context canceled"). With -detach the tools run on
// their context without its cancellation (context.WithoutCancel), the
// workaround a server author needs for tasks that wait or ask; a
// tasks/cancel then still makes the task cancelled (mcp-go drops the
// late result), but no longer stops the tool's work (block waits for
// release).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	addr := flag.String("http", "", "serve Streamable HTTP on this loopback address (port 0: a free one) instead of stdio")
	stateless := flag.Bool("stateless", false, "with -http: no sessions (server.WithStateLess)")
	stateful := flag.Bool("stateful", false, "with -http: sessions validated, an unknown one answered 404 (server.WithStateful)")
	detach := flag.Bool("detach", false, "run the tools on their context without its cancellation (see the package comment)")
	flag.Parse()

	s := newServer(*detach)
	if *addr == "" {
		if err := server.ServeStdio(s); err != nil {
			log.Fatal(err)
		}
		return
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		log.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		log.Fatalf("%s: not a loopback address", *addr)
	}
	opts := []server.StreamableHTTPOption{
		server.WithStateLess(*stateless),
		server.WithStateful(*stateful),
		server.WithStreamableHTTPLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))),
	}
	h := server.NewStreamableHTTPServer(s, opts...)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	fmt.Printf("listening on http://%s/mcp\n", ln.Addr())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = hs.Shutdown(ctx)
}

// blocks holds the release of the block tool's runs.
type blocks struct {
	mu      sync.Mutex
	runs    int
	release chan struct{}
}

func newServer(detach bool) *server.MCPServer {
	s := server.NewMCPServer("mcpgo-upstream", "1.2.1",
		server.WithToolCapabilities(false),
		server.WithTaskCapabilities(true, true, true),
		server.WithElicitation(),
	)
	text := mcp.NewToolResultText
	add := func(tool mcp.Tool, h server.ToolHandlerFunc) {
		if detach {
			inner := h
			h = func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return inner(context.WithoutCancel(ctx), req)
			}
		}
		s.AddTool(tool, h)
	}

	add(mcp.NewTool("echo", mcp.WithDescription("answers its text at once"), mcp.WithString("text")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("echo: " + req.GetString("text", "")), nil
		})

	add(mcp.NewTool("slow", mcp.WithDescription("sends progress, then answers"),
		mcp.WithNumber("ms"), mcp.WithNumber("steps"), mcp.WithTaskSupport(mcp.TaskSupportOptional)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			steps := int(req.GetFloat("steps", 3))
			pause := time.Duration(req.GetFloat("ms", 100)) * time.Millisecond
			var token any
			if req.Params.Meta != nil {
				token = req.Params.Meta.ProgressToken
			}
			for i := 1; i <= steps; i++ {
				if token != nil {
					_ = s.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
						"progressToken": token, "progress": i, "total": steps, "message": fmt.Sprintf("step %d of %d", i, steps)})
				}
				t := time.NewTimer(pause)
				select {
				case <-ctx.Done():
					t.Stop()
					return nil, ctx.Err()
				case <-t.C:
				}
			}
			return text(fmt.Sprintf("slow: %d steps done", steps)), nil
		})

	b := &blocks{release: make(chan struct{})}
	add(mcp.NewTool("block", mcp.WithDescription("runs until release is called"), mcp.WithTaskSupport(mcp.TaskSupportRequired)),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			b.mu.Lock()
			b.runs++
			release := b.release
			b.mu.Unlock()
			select {
			case <-release:
				return text("released"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	add(mcp.NewTool("release", mcp.WithDescription("ends the block runs; answers how many there were")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			close(b.release)
			b.release = make(chan struct{})
			return text(fmt.Sprintf("block runs: %d", b.runs)), nil
		})

	add(mcp.NewTool("ask", mcp.WithDescription("asks the client for a name"), mcp.WithTaskSupport(mcp.TaskSupportOptional)),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := s.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{
				Message: "What is your name?",
				RequestedSchema: map[string]any{"type": "object",
					"properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"}},
			}})
			if err != nil {
				return nil, fmt.Errorf("elicitation: %w", err)
			}
			if res.Action != mcp.ElicitationResponseActionAccept {
				return text("ask: " + string(res.Action)), nil
			}
			name := ""
			if m, ok := res.Content.(map[string]any); ok {
				name, _ = m["name"].(string)
			}
			return text("ask: accepted, name " + name), nil
		})

	add(mcp.NewTool("sample", mcp.WithDescription("asks the client to sample"), mcp.WithString("prompt"), mcp.WithTaskSupport(mcp.TaskSupportOptional)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := s.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: mcp.CreateMessageParams{
				Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent(req.GetString("prompt", "hello"))}},
				MaxTokens: 20,
			}})
			if err != nil {
				return nil, fmt.Errorf("sampling: %w", err)
			}
			got := ""
			if tc, ok := res.Content.(mcp.TextContent); ok {
				got = tc.Text
			}
			return text(fmt.Sprintf("sample: %s (model %s)", got, res.Model)), nil
		})

	add(mcp.NewTool("fail", mcp.WithDescription("fails"), mcp.WithTaskSupport(mcp.TaskSupportOptional)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("the tool failed on purpose")
		})
	add(mcp.NewTool("iserror", mcp.WithDescription("answers an isError result"), mcp.WithTaskSupport(mcp.TaskSupportOptional)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("a tool error result"), nil
		})
	return s
}
