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
	"path/filepath"
	"syscall"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/conformance/fixtures"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/httpguard"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:3001", "loopback `host:port` to listen on (port 0 picks a free port)")
	dbPath := flag.String("db", "", "SQLite `file` for the task store (default: a temporary file)")
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
	handler, stopTasks, err := newHandler(dbPath, logger)
	if err != nil {
		return err
	}
	defer stopTasks()
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
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
// http.Handler for the /mcp endpoint: DNS-rebinding protection in front of
// mcptask's one-endpoint handler, which sends each request to the stateless
// (2026-07-28) or the stateful (2025-11-25) Streamable HTTP handler of the
// same *mcp.Server. The task fixtures run on the mcptask engine over a
// SQLite store at dbPath (a temporary file when dbPath is empty). The
// returned stop function shuts the engine down and closes the store.
func newHandler(dbPath string, logger *slog.Logger) (http.Handler, func(), error) {
	var tmpDir string
	if dbPath == "" {
		dir, err := os.MkdirTemp("", "conformance-server-")
		if err != nil {
			return nil, nil, err
		}
		tmpDir = dir
		dbPath = filepath.Join(dir, "tasks.db")
	}
	st, err := sqlite.Open(dbPath, &sqlite.Options{Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	eng, err := engine.New(engine.Options{Store: st, Logger: logger, Exclusive: true})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	opts := fixtures.ServerOptions()
	opts.Logger = logger
	server := mcp.NewServer(fixtures.Implementation, opts)
	fixtures.RegisterBase(server)
	ts, err := mcptask.New(server, eng, &mcptask.Options{Logger: logger})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	fixtures.RegisterTasks(ts)
	if err := ts.Start(context.Background()); err != nil {
		st.Close()
		return nil, nil, err
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = ts.Close(ctx)
		_ = st.Close()
		if tmpDir != "" {
			_ = os.RemoveAll(tmpDir)
		}
	}
	// The event store makes 2025-11-25 SSE streams resumable (priming
	// events, Last-Event-ID), which test_reconnection relies on.
	h := ts.Handler(&mcp.StreamableHTTPOptions{
		Logger:         logger,
		SessionTimeout: 10 * time.Minute,
		EventStore:     mcp.NewMemoryEventStore(nil),
	})
	return httpguard.LoopbackOnly(h), stop, nil
}
