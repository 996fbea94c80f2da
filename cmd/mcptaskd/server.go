package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/authn"
	"github.com/mcptask/mcptask/dashboard"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/httpguard"
	"github.com/mcptask/mcptask/metrics"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// App is an assembled mcptaskd: the task store, the engine, the MCP server
// with the demo tools, and the HTTP handler serving /mcp and /healthz.
type App struct {
	cfg      Config
	log      *slog.Logger
	store    store.Store
	eng      *engine.Engine
	tasks    *mcptask.Server
	mcp      *mcp.Server
	handler  http.Handler
	verifier *authn.Verifier // nil without authentication
	audit    io.Closer       // the audit log file, if any
	unlock   func()
	stopping atomic.Bool
	// stopTracing flushes and stops the trace export (a no-op without).
	stopTracing func(context.Context) error
	sources     *toolSources

	adminTokens adminTokens  // the -admin-token-file tokens, nil without one
	metrics     http.Handler // the Prometheus exposition of the app's registry
	drain       drainSwitch
	dashboard   *dashboard.Handler // nil with -dashboard=false
	conns       *connBudget        // the listener's connection budgets
	guesses     *guessLimiter      // failed bearer tokens per source; nil without authentication
}

// NewApp opens the store and assembles the server. It does not resolve
// the tasks a previous process left unfinished: [App.Start] does.
func NewApp(cfg Config, logger, sdkLogger *slog.Logger) (_ *App, err error) {
	a := &App{cfg: cfg, log: logger, conns: &connBudget{log: logger, open: map[string]int{}}}
	// The keys, tokens and configuration file first: a bad file stops
	// the start before the store is touched.
	fc, err := a.loadFiles()
	if err != nil {
		return nil, err
	}
	// What was opened is closed again, in reverse, if a later step fails.
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	auditLog, auditFile, err := openAudit(cfg, logger)
	if err != nil {
		return nil, err
	}
	a.audit = auditFile
	undo = append(undo, func() { auditFile.Close() })
	st, unlock, exclusive, err := openStore(cfg, logger.With("component", "store"))
	if err != nil {
		return nil, err
	}
	a.store, a.unlock = st, unlock
	undo = append(undo, unlock, func() { st.Close() })
	m, err := a.newMetrics()
	if err != nil {
		return nil, err
	}
	if a.eng, err = engine.New(a.engineOptions(m, auditLog, exclusive)); err != nil {
		return nil, err
	}
	a.mcp = mcp.NewServer(&mcp.Implementation{Name: "mcptaskd", Title: "mcptask demo server", Version: version()}, &mcp.ServerOptions{
		Logger: sdkLogger,
		Instructions: "Tools here can run as durable tasks (extension io.modelcontextprotocol/tasks): " +
			"declare the extension on a tools/call to get a task handle at once, then poll it with tasks/get, " +
			"answer its input requests with tasks/update, or stop it with tasks/cancel.",
	})
	// Traces: exported with OTLP when the OTEL_* variables ask for it,
	// else not recorded at all.
	tp, stopTracing, err := newTracerProvider(context.Background(), os.Getenv, logger)
	if err != nil {
		return nil, err
	}
	a.stopTracing = stopTracing
	undo = append(undo, func() { _ = stopTracing(context.Background()) })
	a.tasks, err = mcptask.New(a.mcp, a.eng, &mcptask.Options{Logger: logger, Limits: cfg.Limits, Notifications: cfg.Notifications,
		ResultLinkBytes: cfg.ResultLinkBytes, TracerProvider: tp, FastLane: true, // mcptaskd adds no go-sdk middleware of its own
		CorrelationKeys: fc.correlationKeys(), Events: eventsOptions(&cfg, fc)})
	if err != nil {
		return nil, err
	}
	// The tool sources, registered before Start: the recovery of
	// unfinished tasks asks each tool whether it may be re-run.
	a.sources = newToolSources(fc, logger, a.mcp.AddTool)
	undo = append(undo, func() { _ = a.sources.Close() })
	if err = a.sources.register(a.tasks, m); err != nil {
		return nil, err
	}
	if err = applyRollout(fc, a.tasks); err != nil {
		return nil, err
	}
	if err = a.applyDrainFile(fc); err != nil {
		return nil, err
	}
	if a.handler, err = a.routes(sdkLogger); err != nil {
		return nil, err
	}
	return a, nil
}

// loadFiles reads the token and key files and the configuration file of
// a.cfg, setting a's verifier, admin token and connection limits, and
// returns the configuration file (nil without one).
func (a *App) loadFiles() (fc *FileConfig, err error) {
	cfg := a.cfg
	if cfg.AuthEnabled() {
		a.verifier, err = authn.New(authn.Options{
			TokensFile:  cfg.Tokens,
			JWTKeyFile:  cfg.JWTKey,
			JWKSFile:    cfg.JWKS,
			Issuer:      cfg.JWTIssuer,
			Audience:    cfg.JWTAudience,
			TenantClaim: cfg.JWTTenantClaim,
		})
		if err != nil {
			return nil, err
		}
		a.conns.perSource, a.conns.perPrincipal = cfg.MaxConnsPerSource, cfg.MaxConnsPerPrincipal
	}
	if cfg.AdminTokenFile != "" {
		if a.adminTokens, err = loadAdminTokens(cfg.AdminTokenFile); err != nil {
			return nil, err
		}
	}
	if a.verifier != nil || a.adminTokens != nil {
		a.guesses = newGuessLimiter(cfg.AuthFailuresPerSource)
	}
	if cfg.ConfigFile != "" {
		if fc, err = loadFileConfig(cfg.ConfigFile, os.Getenv); err != nil {
			return nil, err
		}
	}
	return fc, nil
}

// newMetrics sets a's metrics handler: with -metrics, a registry of the
// app's own (Go and process metrics included) that the engine and the
// adapter update, and the gauges read from the store; it returns the
// metrics, nil without -metrics (the handler then serves an empty
// registry).
func (a *App) newMetrics() (*metrics.Metrics, error) {
	reg := prometheus.NewRegistry()
	a.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if !a.cfg.Metrics {
		return nil, nil
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	// Scraped only once NewApp has returned: a.tasks is set by then.
	declared := func() (tools, queues []string) {
		if a.tasks == nil {
			return nil, nil
		}
		tools = a.tasks.ToolNames()
		for _, t := range tools {
			if q, _ := a.tasks.ToolQueue(t); q != "" {
				queues = append(queues, q)
			}
		}
		return tools, queues
	}
	if err := m.CollectStore(a.store, 0, declared); err != nil {
		return nil, err
	}
	return m, nil
}

// engineOptions are the engine's options from a.cfg; m (if not nil)
// observes it.
func (a *App) engineOptions(m *metrics.Metrics, auditLog *audit.Logger, exclusive bool) engine.Options {
	cfg := a.cfg
	o := engine.Options{
		Store: a.store,
		Policy: task.Policy{
			DefaultTTL:   cfg.DefaultTTL,
			MaxTTL:       cfg.MaxTTL,
			PollInterval: cfg.PollInterval,
		},
		MaxResultBytes:  cfg.MaxResultBytes,
		FinishWithin:    finishWithin(cfg.FinishWithin),
		SweepInterval:   cfg.SweepInterval,
		LedgerRetention: cfg.LedgerRetention,
		Logger:          a.log,
		Audit:           auditLog,
		// One mcptaskd per SQLite file (lockDB): every unfinished task
		// found at start-up was left by a process that is gone. On
		// PostgreSQL, instances share the tasks and take over expired
		// leases.
		Exclusive:  exclusive,
		Lease:      cfg.Lease,
		InstanceID: instanceID(),
	}
	if m != nil {
		o.Observer = m
	}
	return o
}

// applyDrainFile applies the drain section of the configuration file
// fc: this instance's own drain switch.
func (a *App) applyDrainFile(fc *FileConfig) error {
	a.drain.file = fc.drainState()
	d := a.drain.file
	// Inactive too: its fallback is what a drain set later without one
	// gets (the dashboard's).
	if err := a.tasks.SetLocalDrain(context.Background(), d, "config"); err != nil {
		return err
	}
	if !d.Active() {
		return nil
	}
	a.log.Warn("draining (this instance, from the configuration file): new tasks are not served", "all", d.All, "tools", d.Tools, "fallback", d.Fallback)
	return nil
}

// routes returns the app's HTTP handler: /mcp, /healthz, the admin
// endpoint, /metrics (unless on its own listener) and the dashboard.
func (a *App) routes(sdkLogger *slog.Logger) (http.Handler, error) {
	// One endpoint for both wires: the handler sends 2026-07-28 requests
	// (stateless, per-request _meta) to a stateless go-sdk handler, the
	// only kind that accepts that wire, and 2025-11-25 sessions to a
	// stateful one. Both wires share the tasks.
	var mcpHandler http.Handler = a.tasks.Handler(&mcp.StreamableHTTPOptions{
		Logger: sdkLogger,
		// Closes 2025-11-25 sessions left idle; the stateless wire has none.
		SessionTimeout: 10 * time.Minute,
	})
	if isLoopbackAddr(a.cfg.Addr) {
		// DNS-rebinding protection: on loopback, only loopback Host and
		// Origin headers are served.
		mcpHandler = httpguard.LoopbackOnly(mcpHandler)
	}
	if a.verifier != nil {
		// Every /mcp request needs a bearer token; its TokenInfo makes
		// task.UserOwner(TENANT, PRINCIPAL) the owner of the tasks it creates, and
		// only that owner sees them. A missing or refused token gets 401
		// with an RFC 6750 challenge.
		// An authenticated request's connection then counts against its
		// principal's budget (-max-connections-per-principal).
		// A source that sent too many refused tokens is refused before its
		// token is checked (-auth-failures-per-source).
		mcpHandler = a.guesses.limitGuesses(authn.RequireBearerToken(a.verifier, "mcptaskd", a.cfg.requiredScopes()...), a.conns.principalBudget(mcpHandler))
	}
	mux := http.NewServeMux()
	// Browsers' cross-origin POSTs are refused; MCP clients outside a
	// browser send no Origin or Sec-Fetch-Site headers.
	mux.Handle("/mcp", http.NewCrossOriginProtection().Handler(mcpHandler))
	mux.HandleFunc("GET /healthz", a.healthz) // unauthenticated
	mux.Handle(adminDrainPath, a.adminHandler(a.serveAdminDrain))
	a.rolloutRoutes(mux)
	if a.cfg.Metrics && a.cfg.MetricsAddr == "" {
		mux.Handle("GET "+metricsPath, a.adminMetricsHandler())
	}
	if a.cfg.Dashboard {
		d, h, err := a.newDashboard()
		if err != nil {
			return nil, err
		}
		a.dashboard = d
		mux.Handle(dashboardPrefix, h)
		mux.Handle(dashboardPrefix+"/", h)
	}
	return bodyDeadline(mux, a.cfg.BodyTimeout), nil
}

// Start resolves the tasks a previous process left unfinished (re-running
// those of re-runnable tools, failing the others) and starts the sweeper
// of expired tasks. Call it once, before serving.
func (a *App) Start(ctx context.Context) error {
	return a.tasks.Start(ctx)
}

// Handler returns the HTTP handler: /mcp and /healthz.
func (a *App) Handler() http.Handler { return a.handler }

// Engine returns the task engine.
func (a *App) Engine() *engine.Engine { return a.eng }

// Close stops the engine and closes the store. Running tasks may finish
// until ctx is done; then they are stopped and resolved by their recovery
// policy: re-runnable ones run again at the next start, the others fail
// with an "outcome unknown" error.
func (a *App) Close(ctx context.Context) error {
	a.stopping.Store(true)
	err := a.tasks.Close(ctx)
	err = errors.Join(err, a.sources.Close())
	err = errors.Join(err, a.store.Close())
	a.unlock()
	// The spans of the last runs are flushed, within ctx.
	if a.stopTracing != nil {
		if terr := a.stopTracing(ctx); terr != nil {
			a.log.Warn("flushing the traces", "err", terr)
		}
	}
	return errors.Join(err, a.audit.Close())
}

// Reload re-reads the configuration file (SIGHUP) and applies its drain
// switch; a file that does not validate changes nothing. Changes to the
// served tools take a restart.
//
// A switch set through the admin endpoint since the file was last applied
// stands while the file's drain section is unchanged (a SIGHUP for
// another reason does not undo it; the log says it is kept); once the
// section changes, the file's switch replaces it, and the log says so.
func (a *App) Reload(ctx context.Context) error {
	if a.cfg.ConfigFile == "" {
		return errors.New("no -config file to re-read")
	}
	fc, err := loadFileConfig(a.cfg.ConfigFile, os.Getenv)
	if err != nil {
		return err
	}
	st := fc.drainState()
	a.drain.mu.Lock()
	defer a.drain.mu.Unlock()
	a.drain.file = st
	if err := a.tasks.SetLocalDrain(ctx, st, "SIGHUP"); err != nil {
		return err
	}
	a.log.Info("configuration re-read: this instance's drain switch applied (the fleet's, set through the admin endpoint, stays; changes to the served tools take a restart)", "all", st.All, "tools", st.Tools, "fallback", st.Fallback)
	return nil
}

// nopCloser closes nothing.
type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// openAudit returns the audit trail of cfg.AuditLog: records in the
// daemon's log (""), none ("off"), or JSON lines appended to a file that
// only the daemon's user may read. The returned io.Closer closes the file.
func openAudit(cfg Config, logger *slog.Logger) (*audit.Logger, io.Closer, error) {
	switch cfg.AuditLog {
	case "":
		return audit.New(logger), nopCloser{}, nil
	case "off":
		return nil, nopCloser{}, nil
	}
	f, err := os.OpenFile(cfg.AuditLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the audit log: %w", err)
	}
	return audit.New(slog.New(slog.NewJSONHandler(f, nil))), f, nil
}

// healthz answers 200 when the store answers, 503 otherwise or while
// shutting down.
func (a *App) healthz(w http.ResponseWriter, r *http.Request) {
	status, code, detail := "ok", http.StatusOK, ""
	if a.stopping.Load() {
		status, code = "stopping", http.StatusServiceUnavailable
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := a.store.Ping(ctx); err != nil {
			status, code, detail = "unhealthy", http.StatusServiceUnavailable, "task store: "+err.Error()
			a.log.Warn("health check failed", "err", err)
		} else if err := a.engineHealth(); err != nil {
			// The store answers reads but refuses writes (e.g. a full disk).
			status, code, detail = "unhealthy", http.StatusServiceUnavailable, "task engine: "+err.Error()
			a.log.Warn("health check failed", "err", err)
		}
	}
	// Each upstream "ok" or "down"; why it is down (the gateway's last
	// error, URLs redacted) only to a request the admin endpoint would
	// admit. An upstream down leaves the server "degraded", still 200:
	// it serves the other tools.
	var upstreams map[string]string
	if a.sources != nil && a.sources.gateway != nil {
		gw := a.sources.gateway
		details := a.healthzDetails(r)
		upstreams = map[string]string{}
		for name, err := range gw.Health() {
			upstreams[name] = "ok"
			if err != nil {
				upstreams[name] = "down"
				if details {
					upstreams[name] = "down: " + err.Error()
				}
				if status == "ok" {
					status = "degraded"
				}
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(struct {
		Status    string            `json:"status"`
		Version   string            `json:"version"`
		Detail    string            `json:"detail,omitempty"`
		Upstreams map[string]string `json:"upstreams,omitempty"`
	}{status, version(), detail, upstreams})
}

// healthzDetails reports whether a /healthz request may read why an
// upstream is down: a request the admin endpoint admits (on a loopback
// listener without authentication, one whose Host is loopback: not a page
// reached through DNS rebinding).
func (a *App) healthzDetails(r *http.Request) bool {
	if a.verifier == nil && a.adminTokens == nil && !httpguard.IsLoopbackHost(r.Host) {
		return false
	}
	_, ok := a.authorizeAdmin(discardResponse{}, r)
	return ok
}

// discardResponse is an http.ResponseWriter that writes nowhere.
type discardResponse struct{}

func (discardResponse) Header() http.Header         { return http.Header{} }
func (discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (discardResponse) WriteHeader(int)             {}

// run serves cfg until ctx is done, then shuts down gracefully: it stops
// accepting HTTP requests and waits for those in flight, lets running tasks
// finish within cfg.ShutdownGrace (shared with the HTTP shutdown), resolves
// the rest by their recovery policy, and closes the store.
//
// Once listening, it prints one line "listening on http://HOST:PORT/mcp"
// to stdout, whatever the log level.
func run(ctx context.Context, cfg Config, stdout io.Writer, logger, sdkLogger *slog.Logger) error {
	app, err := NewApp(cfg, logger, sdkLogger)
	if err != nil {
		return err
	}
	if err := app.Start(ctx); err != nil {
		app.Close(context.Background())
		return fmt.Errorf("recovering unfinished tasks: %w", err)
	}
	// SIGHUP re-reads the configuration file's drain switch.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := app.Reload(ctx); err != nil {
					logger.Error("SIGHUP: the configuration was not re-read; nothing changed", "err", err)
				}
			}
		}
	}()
	if cfg.Stdio {
		return runStdio(ctx, cfg, app, logger)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		app.Close(context.Background())
		return err
	}
	// Past -max-connections, connections wait in the kernel's queue
	// instead of taking the last file descriptors (and with them /healthz,
	// the store and every other client); with authentication, one source's
	// unauthenticated connections and one principal's are capped too.
	ln = newBudgetListener(ln, cfg.MaxConns, app.conns)
	srv := &http.Server{
		Handler:           app.Handler(),
		ConnContext:       connContext,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	// Notification streams end (listen streams with their result) as soon
	// as shutdown begins: Shutdown waits for active requests.
	srv.RegisterOnShutdown(app.tasks.CloseStreams)
	if app.dashboard != nil {
		srv.RegisterOnShutdown(app.dashboard.Close) // its live views too
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if cfg.Metrics && cfg.MetricsAddr != "" {
		stopMetrics, err := app.serveMetrics(cfg.MetricsAddr, stdout, logger)
		if err != nil {
			srv.Close()
			app.Close(context.Background())
			return err
		}
		defer stopMetrics()
	}

	root := "http://" + ln.Addr().String()
	url := root + "/mcp"
	fmt.Fprintf(stdout, "listening on %s\n", url)
	// Every other endpoint, one line each, after the line that scripts
	// read.
	endpoints := []any{"mcp", url, "healthz", root + "/healthz", "admin", root + adminDrainPath}
	if app.dashboard != nil {
		fmt.Fprintf(stdout, "dashboard on %s%s/\n", root, dashboardPrefix)
		endpoints = append(endpoints, "dashboard", root+dashboardPrefix+"/")
	}
	if cfg.Metrics && cfg.MetricsAddr == "" {
		fmt.Fprintf(stdout, "metrics on %s%s\n", root, metricsPath)
		endpoints = append(endpoints, "metrics", root+metricsPath)
	}
	fmt.Fprintf(stdout, "health on %s/healthz, admin on %s%s\n", root, root, adminDrainPath)
	logger.Info("endpoints", endpoints...)
	l := cfg.Limits
	logger.Info("mcptaskd listening", "url", url, "db", cfg.DB, "version", version(),
		"defaultTTL", cfg.DefaultTTL, "maxTTL", cfg.MaxTTL, "pollInterval", cfg.PollInterval,
		"maxActiveTasks", l.MaxActiveTasks, "createRate", l.CreateRate, "requestRate", l.RequestRate,
		"maxResultBytes", cfg.MaxResultBytes)
	switch {
	case app.verifier != nil:
		logger.Info("authentication: /mcp requires a bearer token; each task is visible to its creator only",
			"accepts", app.verifier.String())
	case isLoopbackAddr(cfg.Addr):
		logger.Info("no authentication: task IDs are the only protection of tasks; listening on loopback only")
	default:
		logger.Warn("no authentication and listening on a non-loopback address (-allow-remote): anyone who can reach " +
			"this server can call its tools, and anyone who learns a task ID can read its result or cancel it")
	}

	var serveErr error
	select {
	case serveErr = <-errc:
		logger.Error("HTTP server stopped", "err", serveErr)
	case <-ctx.Done():
		logger.Info("shutting down; a second signal exits at once", "grace", cfg.ShutdownGrace)
	}

	deadline := time.Now().Add(cfg.ShutdownGrace)
	httpCtx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := srv.Shutdown(httpCtx); err != nil {
		logger.Warn("HTTP requests still in flight at the end of the grace period; closing them", "err", err)
		srv.Close()
	}
	if serveErr == nil {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			serveErr = err
		}
	}
	engCtx, cancel2 := context.WithDeadline(context.Background(), deadline)
	defer cancel2()
	if err := app.Close(engCtx); err != nil {
		logger.Error("closing", "err", err)
		serveErr = errors.Join(serveErr, err)
	}
	logger.Info("mcptaskd stopped")
	return serveErr
}

// runStdio serves one client over stdin/stdout until it disconnects or ctx
// is done, then shuts down like the HTTP server does.
func runStdio(ctx context.Context, cfg Config, app *App, logger *slog.Logger) error {
	logger.Info("mcptaskd serving on stdio", "db", cfg.DB, "version", version())
	if app.verifier != nil {
		logger.Warn("authentication applies to HTTP only: the stdio client is not authenticated")
	}
	err := app.tasks.Run(ctx, &mcp.StdioTransport{})
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		err = nil
	}
	engCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	if cerr := app.Close(engCtx); cerr != nil {
		err = errors.Join(err, cerr)
	}
	logger.Info("mcptaskd stopped")
	return err
}

// version returns the module version the binary was built from.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// engineHealth is the engine's health (nil without an engine).
func (a *App) engineHealth() error {
	if a.eng == nil {
		return nil
	}
	return a.eng.Health()
}

// bodyDeadline cuts a client that takes longer than d to send a request's
// body (one byte every few seconds holds a connection, and a file
// descriptor, for ever): the connection's read deadline is set for the
// body and cleared once it has been read. Requests without a body (event
// streams) are not bounded. d <= 0 sets no deadline.
//
// It also makes a refusal written before the body was read (401, 403,
// 413, 429, ...: any status >= 400) go out at once and end the connection:
// the answer gets Connection: close, and once the handler returns the
// rest of the body is read for refusalLinger at most. (net/http otherwise reads an unread body,
// up to 256 KiB, before it writes the answer, to keep the connection: a
// client without a token trickling its body got its 401 only after d,
// holding a connection all along; issue 25, H2.)
func bodyDeadline(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		b := &deadlineBody{ReadCloser: r.Body, clear: func() {}}
		if d > 0 && rc.SetReadDeadline(time.Now().Add(d)) == nil {
			b.clear = func() { _ = rc.SetReadDeadline(time.Time{}) }
		}
		r.Body = b
		rw := &refusalWriter{ResponseWriter: w, body: b}
		next.ServeHTTP(rw, r)
		if rw.refused {
			// The answer is written before the server closes the body,
			// which reads what is left of it first (up to 256 KiB): for
			// refusalLinger at most, long enough for the client to read
			// the answer before the connection closes (closing with
			// unread data resets it).
			_ = rc.SetReadDeadline(time.Now().Add(refusalLinger))
		}
	})
}

// refusalLinger is how long what the client of a refused request (or
// connection) still sends is read before its connection closes: closing
// with unread data resets the connection, and the client may not have
// read the refusal yet.
const refusalLinger = time.Second

// deadlineBody clears the read deadline once the body has been read.
type deadlineBody struct {
	io.ReadCloser
	clear func()
	once  sync.Once
	eof   atomic.Bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
		b.once.Do(b.clear)
	}
	return n, err
}

// refusalWriter marks a refusal written while the request's body is
// unread: Connection: close, so that net/http writes it at once and
// closes the connection instead of reading the body first.
type refusalWriter struct {
	http.ResponseWriter
	body    *deadlineBody
	refused bool
}

// WriteHeader adds Connection: close to a refusal of an unread body.
func (w *refusalWriter) WriteHeader(code int) {
	if code >= 400 && !w.refused && !w.body.eof.Load() {
		w.refused = true
		w.Header().Set("Connection", "close")
	}
	w.ResponseWriter.WriteHeader(code)
}

// Flush flushes the answer.
func (w *refusalWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap returns the server's writer, for http.ResponseController.
func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finishWithin maps -finish-within (0: off) to engine.Options.FinishWithin
// (negative: off).
func finishWithin(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// webhookTimeout bounds one webhook delivery attempt of mcptaskd.
const webhookTimeout = 10 * time.Second

// eventsOptions are the MCP Events options of the flags and the
// configuration file.
func eventsOptions(cfg *Config, fc *FileConfig) mcptask.Events {
	o := mcptask.Events{Webhooks: cfg.Webhooks, AllowPrivateCallbacks: cfg.WebhooksAllowPrivate, Retention: cfg.EventsRetention}
	if cfg.Lease > 0 {
		// A crashed instance's deliveries are taken over as its tasks
		// are; an attempt ends well within the lease.
		o.Lease = cfg.Lease
		o.Timeout = min(webhookTimeout, cfg.Lease/2)
	}
	if fc != nil {
		o.Webhooks = o.Webhooks || fc.Events.Webhooks
		o.PublishLog = fc.Events.PublishLog
		o.VerifiedCallbacks = fc.Events.VerifiedCallbacks
		o.MaxSubscriptions = fc.Events.MaxSubscriptions
	}
	return o
}
