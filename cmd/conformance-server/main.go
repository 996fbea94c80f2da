// Command conformance-server serves the mcptask conformance fixtures over
// Streamable HTTP for the official MCP conformance suite
// (@modelcontextprotocol/conformance).
//
// One endpoint, /mcp, speaks both wire revisions: 2025-11-25 (stateful, with
// the initialize handshake and Mcp-Session-Id) and 2026-07-28 (stateless,
// per-request _meta). It listens on loopback only and rejects requests whose
// Host or Origin is not a loopback name (DNS-rebinding protection).
//
// Usage:
//
//	conformance-server [-addr 127.0.0.1:3001] [-db path/to/tasks.db] [-v]
//
// With a port of 0 a free port is chosen. Once listening, the server prints
// one line "listening on http://HOST:PORT/mcp" to standard output.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcptask/mcptask/conformance/fixtures"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:3001", "loopback `host:port` to listen on (port 0 picks a free port)")
	dbPath := flag.String("db", "", "SQLite `file` for the task store (reserved for the task fixtures)")
	verbose := flag.Bool("v", false, "log SDK activity at info level")
	flag.Parse()

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	if err := run(*addr, *dbPath, logger); err != nil {
		log.Fatalf("conformance-server: %v", err)
	}
}

func run(addr, dbPath string, logger *slog.Logger) error {
	if err := checkLoopback(addr); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", newHandler(dbPath, logger))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Printf("listening on http://%s/mcp\n", ln.Addr())

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// SSE streams (GET streams, subscriptions/listen) never end by
	// themselves: give in-flight calls a moment, then close everything.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newHandler builds the MCP server with every fixture and returns the
// http.Handler for the /mcp endpoint: DNS-rebinding protection in front of a
// router that sends each request to the stateless (2026-07-28) or the
// stateful (2025-11-25) Streamable HTTP handler. Both handlers serve the same
// *mcp.Server, so list-changed notifications reach sessions of either wire.
//
// dbPath is the SQLite file for the task store; the task fixtures are
// registered here, next to the base ones.
func newHandler(dbPath string, logger *slog.Logger) http.Handler {
	_ = dbPath // used once the task fixtures are registered
	opts := fixtures.ServerOptions()
	opts.Logger = logger
	server := mcp.NewServer(fixtures.Implementation, opts)
	fixtures.RegisterBase(server)

	getServer := func(*http.Request) *mcp.Server { return server }
	// The event store makes 2025-11-25 SSE streams resumable (priming
	// events, Last-Event-ID), which test_reconnection relies on.
	stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Logger:         logger,
		SessionTimeout: 10 * time.Minute,
		EventStore:     mcp.NewMemoryEventStore(nil),
	})
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		Logger:                       logger,
		PropagateRequestCancellation: true,
	})
	return loopbackOnly(&wireRouter{stateful: stateful, stateless: stateless})
}
