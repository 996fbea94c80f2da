// Command gosdk is the plain go-sdk peer of bench/cmd/mcptask-peers: an
// MCP server built on github.com/modelcontextprotocol/go-sdk v1.8.0 alone
// (no tasks), over its Streamable HTTP handler with stateful sessions (the
// 2025-11-25 wire). It serves one tool, noop, a no-op: the floor of a plain
// tools/call through the SDK that mcptask is built on.
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

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "loopback address to listen on")
	flag.Parse()

	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		log.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		log.Fatalf("%s: not a loopback address", *addr)
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := mcp.NewServer(&mcp.Implementation{Name: "gosdk-peer", Version: "1"}, &mcp.ServerOptions{Logger: quiet})
	mcp.AddTool(srv, &mcp.Tool{Name: "noop", Description: "no-op, synchronous only"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Logger: quiet})

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
