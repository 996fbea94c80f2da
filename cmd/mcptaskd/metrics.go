package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/mcptask/mcptask/internal/httpguard"
)

// metricsPath serves the Prometheus metrics (docs/metrics.md).
const metricsPath = "/metrics"

// MetricsHandler returns the Prometheus exposition of the app's metrics,
// without any authentication (nil with -metrics=false).
func (a *App) MetricsHandler() http.Handler { return a.metrics }

// adminMetricsHandler serves /metrics on the main listener, admitted as
// the admin endpoint admits requests: with authentication (or an admin
// token file), a bearer token carrying -admin-scope or the admin token;
// without, on a loopback listener only.
func (a *App) adminMetricsHandler() http.Handler {
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := a.authorizeAdmin(w, r); !ok {
			return
		}
		a.metrics.ServeHTTP(w, r)
	})
	if isLoopbackAddr(a.cfg.Addr) {
		h = httpguard.LoopbackOnly(h)
	}
	return h
}

// serveMetrics serves /metrics alone on a listener of its own at addr
// (-metrics-addr), without authentication, and says where on stdout. stop
// closes it.
func (a *App) serveMetrics(addr string, stdout io.Writer, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	var h http.Handler = a.metrics
	if isLoopbackAddr(addr) {
		h = httpguard.LoopbackOnly(h) // DNS-rebinding protection, as /mcp
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+metricsPath, h)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	go srv.Serve(ln)
	url := "http://" + ln.Addr().String() + metricsPath
	fmt.Fprintf(stdout, "metrics on %s\n", url)
	logger.Info("serving metrics on a listener of their own, without authentication", "url", url)
	return func() { srv.Close() }, nil
}
