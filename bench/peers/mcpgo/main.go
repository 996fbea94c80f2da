// Command mcpgo is the mcp-go peer of bench/cmd/mcptask-peers: an
// in-memory MCP server built on github.com/mark3labs/mcp-go with its own
// 2025-11-25 task support, over Streamable HTTP with stateful sessions.
//
// It serves three tools, the same as the mcptask server of the benchmark:
//
//   - noop: a no-op without task support;
//   - noop_task: a no-op with optional task support (its tasks complete at
//     once);
//   - sleep_task: optional task support, sleeps 200 ms (-sleep), whatever
//     its context (see the workaround in main).
//
// It listens on -addr (a loopback address; port 0 picks a free one), prints
// "listening URL" on its standard output once it accepts connections, and
// exits when its standard input is closed or on SIGTERM/SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "loopback address to listen on")
	sleep := flag.Duration("sleep", 200*time.Millisecond, "duration of sleep_task")
	flag.Parse()

	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		log.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		log.Fatalf("%s: not a loopback address", *addr)
	}

	s := server.NewMCPServer("mcpgo-peer", "1",
		server.WithToolCapabilities(false),
		server.WithTaskCapabilities(true, true, true),
	)
	noop := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	}
	s.AddTool(mcp.NewTool("noop", mcp.WithDescription("no-op, synchronous only")), noop)
	s.AddTool(mcp.NewTool("noop_task", mcp.WithDescription("no-op, optional task"),
		mcp.WithTaskSupport(mcp.TaskSupportOptional)), noop)
	s.AddTool(mcp.NewTool("sleep_task", mcp.WithDescription("sleeps, optional task"),
		mcp.WithTaskSupport(mcp.TaskSupportOptional)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// mcp-go v1.2.1 runs a task under the context of the
			// tools/call that created it, which ends as soon as the
			// CreateTaskResult is sent: a tool that heeded it would be
			// cancelled at once. So the sleep ignores it.
			time.Sleep(*sleep)
			return mcp.NewToolResultText("ok"), nil
		})

	h := server.NewStreamableHTTPServer(s,
		server.WithStateful(true),
		server.WithStreamableHTTPLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	fmt.Printf("listening http://%s/mcp\n", ln.Addr())

	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(done) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-done:
	case <-sig:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = hs.Shutdown(ctx)
}
