package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/httpguard"
)

// Config is mcptaskd's configuration, from flags and environment variables.
type Config struct {
	Addr            string        // listen address, host:port
	DB              string        // SQLite file
	SQLiteSync      string        // SQLite synchronous setting: full or normal
	SQLiteViewCache int           // tasks whose views are kept in memory (0: none)
	Postgres        string        // PostgreSQL DSN; when set, the store is PostgreSQL, not SQLite
	PostgresSchema  string        // PostgreSQL schema holding the tasks
	Lease           time.Duration // how long an instance holds a task without a heartbeat
	AllowRemote     bool          // allow a non-loopback listen address
	Stdio           bool          // serve one client on stdin/stdout instead of HTTP
	DefaultTTL      time.Duration // retention when a client asks for none
	MaxTTL          time.Duration // cap on requested retention
	PollInterval    time.Duration // suggested delay between polls
	MaxResultBytes  int           // cap on a stored result
	ResultLinkBytes int           // size above which a result is answered as a link to its resource; 0: always inline
	ShutdownGrace   time.Duration // how long running tasks may finish at shutdown
	FinishWithin    time.Duration // work ending this soon after its call is answered terminal; 0: off
	SweepInterval   time.Duration // how often expired tasks are deleted
	LedgerRetention time.Duration // how long the operation ledger keeps an operation after its last change
	BodyTimeout     time.Duration // how long a client may take to send a request body; 0: no limit
	RequiredScope   string        // scopes (comma-separated) every token must carry; "" for none
	AdminScope      string        // scope a token needs for the admin endpoint (/admin/drain)
	AdminTokenFile  string        // file holding the admin endpoint's own bearer token; "" for none
	MaxConns        int           // most HTTP connections served at once; 0: no limit
	Metrics         bool          // serve Prometheus metrics at /metrics
	MetricsAddr     string        // a separate listener for /metrics; "" serves it on Addr behind the admin authentication
	Dashboard       bool          // serve the operator dashboard at /dashboard/
	ConfigFile      string        // the configuration file of the served tools (-config); "" for the demo tools only
	CheckConfig     string        // validate this configuration file and exit (-check-config)
	LogFormat       string        // text or json
	LogLevel        slog.Level

	// With authentication: the most open connections of one source IP
	// that no request has authenticated yet, and of one principal; 0: no
	// limit.
	MaxConnsPerSource, MaxConnsPerPrincipal int
	// With authentication: the refused bearer tokens a source IP may
	// send at once (then one a second); 0: no limit.
	AuthFailuresPerSource int

	// Per-requester limits (mcptask.Limits) and the audit trail.
	Limits   mcptask.Limits
	AuditLog string // "" (the daemon's log), "off", or a file of JSON lines

	// Task notifications pushed to clients (mcptask.Notifications).
	Notifications mcptask.Notifications

	// MCP Events (mcptask.Events): webhook delivery, and callbacks to
	// loopback over plain http (tests only).
	Webhooks             bool
	WebhooksAllowPrivate bool
	EventsRetention      time.Duration

	// Authentication of /mcp (package authn); off when all three files
	// are empty.
	Tokens         string // static tokens file (JSON)
	JWTKey         string // HMAC secret or PEM public key verifying JWTs
	JWKS           string // local JWKS file verifying JWTs
	JWTIssuer      string // required "iss" of JWTs, if set
	JWTAudience    string // required "aud" of JWTs, if set
	JWTTenantClaim string // JWT claim holding the tenant
}

// AuthEnabled reports whether /mcp requires a bearer token.
func (c *Config) AuthEnabled() bool {
	return c.Tokens != "" || c.JWTKey != "" || c.JWKS != ""
}

// envPrefix prefixes the environment variable of each flag: -max-ttl is
// MCPTASK_MAX_TTL.
const envPrefix = "MCPTASK_"

// envName returns the environment variable backing a flag.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseConfig parses the command line; a flag not given on it takes its
// value from its environment variable (see envName), else its default.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("mcptaskd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "`host:port` to listen on (port 0 picks a free port)")
	fs.StringVar(&c.DB, "db", "./mcptask.db", "SQLite `file` holding the tasks (created if missing)")
	fs.IntVar(&c.SQLiteViewCache, "sqlite-view-cache", sqlite.DefaultViewCacheEntries, "tasks whose tasks/get reads are kept in memory until they change, on SQLite (the file is locked to this process, so every write to it drops what it changes); 0 turns it off")
	fs.StringVar(&c.SQLiteSync, "sqlite-sync", "full", "SQLite synchronous setting: full (every commit on disk before it is acknowledged) or normal (faster single-client writes; a power loss may lose the last commits, a process crash loses nothing)")
	fs.StringVar(&c.Postgres, "postgres", "", "PostgreSQL `DSN` (e.g. postgres://user@127.0.0.1:5432/db); when set, tasks live in PostgreSQL, shared by every mcptaskd on the same database and schema, instead of the SQLite -db file")
	fs.StringVar(&c.PostgresSchema, "postgres-schema", "mcptask", "PostgreSQL schema holding the tasks (created if missing)")
	fs.DurationVar(&c.Lease, "lease", 15*time.Second, "with -postgres: how long an instance holds a running task without renewing it; a crashed instance's tasks are taken over after about this long")
	fs.BoolVar(&c.Stdio, "stdio", false, "serve one MCP client over stdin/stdout (both wires) instead of HTTP; logs go to stderr")
	fs.BoolVar(&c.AllowRemote, "allow-remote", false, "allow listening on a non-loopback address without authentication (task IDs are then the only protection); not needed with -tokens, -jwt-key or -jwks")
	fs.StringVar(&c.Tokens, "tokens", "", "JSON `file` of static bearer tokens ([{\"token_sha256\": HEX, \"principal\": P, \"tenant\": T, \"scopes\": [...], \"expires\": RFC3339}]); enables authentication of /mcp")
	fs.StringVar(&c.JWTKey, "jwt-key", "", "`file` verifying JWT bearer tokens: an HMAC secret (32+ bytes) or a PEM RSA, ECDSA or Ed25519 public key; enables authentication of /mcp")
	fs.StringVar(&c.JWKS, "jwks", "", "local JWKS `file` verifying JWT bearer tokens (key chosen by \"kid\"; nothing is fetched); enables authentication of /mcp")
	fs.StringVar(&c.JWTIssuer, "jwt-issuer", "", "required \"iss\" of JWTs (unchecked if empty)")
	fs.StringVar(&c.JWTAudience, "jwt-audience", "", "required \"aud\" of JWTs (unchecked if empty)")
	fs.StringVar(&c.JWTTenantClaim, "jwt-tenant-claim", "tenant", "JWT `claim` holding the tenant (the principal is \"sub\")")
	fs.StringVar(&c.RequiredScope, "required-scope", "", "with authentication: the `scope` (or comma-separated scopes) every token must carry to use /mcp; a valid token without it gets 403 insufficient_scope (empty: any valid token)")
	fs.StringVar(&c.AdminScope, "admin-scope", "mcptask:admin", "with authentication: the `scope` a token must carry to use the admin endpoint /admin/drain (a valid token without it gets 403)")
	fs.StringVar(&c.AdminTokenFile, "admin-token-file", "", "`file` holding a bearer token (16+ characters), or a JSON list [{\"token\": ..., \"operator\": \"alice\"}] that names each token's operator for the audit trail, for the admin endpoint /admin/drain, the dashboard and /metrics, accepted besides admin-scoped tokens; without authentication it is required to reach the endpoint on a non-loopback -addr")
	fs.BoolVar(&c.Metrics, "metrics", true, "serve Prometheus metrics at /metrics (see docs/metrics.md): on -addr behind the admin endpoint's authentication (-admin-scope, -admin-token-file; loopback only without authentication), or on -metrics-addr")
	fs.BoolVar(&c.Dashboard, "dashboard", true, "serve the operator dashboard at /dashboard/ (see docs/dashboard.md): signed in with -admin-token-file's token or a token with -admin-scope; loopback only without authentication")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "`host:port` of a separate listener serving only /metrics, without authentication (a non-loopback address needs -allow-remote); empty serves /metrics on -addr")
	fs.DurationVar(&c.DefaultTTL, "default-ttl", time.Hour, "how long a task is kept when the client asks for no TTL")
	fs.DurationVar(&c.MaxTTL, "max-ttl", 24*time.Hour, "the longest TTL granted, whatever the client asks")
	fs.DurationVar(&c.PollInterval, "poll-interval", 500*time.Millisecond, "poll interval suggested to clients")
	fs.IntVar(&c.MaxResultBytes, "max-result-bytes", 4<<20, "largest tool result stored, in `bytes`; a larger result fails its task")
	fs.BoolVar(&c.Webhooks, "webhooks", false, "deliver MCP Events by webhook (events/subscribe) to authenticated requesters: https callbacks, verified by a challenge, signed per Standard Webhooks (docs/events.md)")
	fs.BoolVar(&c.WebhooksAllowPrivate, "webhooks-allow-private", false, "FOR TESTS ONLY: let webhook callbacks be plain http on loopback and resolve to loopback or private addresses")
	fs.DurationVar(&c.EventsRetention, "events-retention", 0, "how long MCP Events (task status and output events) and dead letters are kept; 0: 24h")
	fs.IntVar(&c.ResultLinkBytes, "result-link-bytes", 0, "answer a task's result larger than this many `bytes` as a resource_link to mcptask://tasks/ID/result (read by its owner with resources/read) instead of inline; 0: always inline")
	fs.DurationVar(&c.FinishWithin, "finish-within", engine.DefaultFinishWithin, "a task whose work ends this soon after its call is answered already completed or failed (no poll needed), committed first; 0: always answer working")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", 10*time.Second, "at shutdown, how long running tasks may finish before they are stopped and resolved by their recovery policy")
	fs.DurationVar(&c.SweepInterval, "sweep-interval", time.Minute, "how often expired tasks are deleted")
	fs.DurationVar(&c.LedgerRetention, "ledger-retention", engine.DefaultLedgerRetention, "how long the operation ledger keeps an operation after its last change, whatever happened to its task")
	fs.DurationVar(&c.BodyTimeout, "body-timeout", 30*time.Second, "how long a client may take to send a request's body; a slower one is cut (0: no limit)")
	fs.IntVar(&c.MaxConns, "max-connections", 512, "most HTTP connections served at once (keep it below the open-files limit, ulimit -n); more wait to be accepted (0: no limit)")
	fs.IntVar(&c.MaxConnsPerSource, "max-connections-per-source", defaultConnsPerSource, "with authentication: most open connections of one source IP not yet authenticated by a request; more are answered 429 and closed (behind a reverse proxy every connection comes from the proxy: raise it; 0: no limit)")
	fs.IntVar(&c.AuthFailuresPerSource, "auth-failures-per-source", defaultAuthFailures, "with authentication: refused bearer tokens (on /mcp, /admin/drain, /metrics and the dashboard) a source IP may send at once, then one a second; past that its requests with a token are answered 429 with Retry-After (0: no limit)")
	fs.IntVar(&c.MaxConnsPerPrincipal, "max-connections-per-principal", defaultConnsPerPrincipal, "with authentication: most open connections of one principal; a request on one more is answered 429 and its connection closed (0: no limit)")
	d := mcptask.DefaultLimits
	fs.IntVar(&c.Limits.MaxActiveTasks, "max-active-tasks", d.MaxActiveTasks, "most unfinished tasks a requester (an authenticated principal; without authentication, all clients together, or one 2025-11-25 session) may have at once; 0: no limit")
	fs.Float64Var(&c.Limits.CreateRate, "create-rate", d.CreateRate, "task creations per second allowed per requester; 0: no limit")
	fs.IntVar(&c.Limits.CreateBurst, "create-burst", d.CreateBurst, "task creations a requester may make in a burst above -create-rate")
	fs.Float64Var(&c.Limits.RequestRate, "request-rate", d.RequestRate, "tasks/* requests (get, update, cancel, result, list) per second allowed per requester; 0: no limit")
	fs.IntVar(&c.Limits.RequestBurst, "request-burst", d.RequestBurst, "tasks/* requests a requester may send in a burst above -request-rate")
	fs.DurationVar(&c.Limits.MaxPollInterval, "max-poll-interval", d.MaxPollInterval, "the most the poll interval suggested to a client that polls a task faster than suggested is raised to (doubling on each early poll); 0: never raised")
	fs.DurationVar(&c.Notifications.MinInterval, "notify-interval", 50*time.Millisecond, "task notifications (2025-11-25 notifications/tasks/status; 2026-07-28 subscriptions/listen): a task's changes closer together than this are sent as one, its state at the end (negative: every change)")
	fs.DurationVar(&c.Notifications.KeepAlive, "notify-keepalive", 0, "re-send the status of a running task to its subscribed clients after this long without a change, for clients that drop a task they have not heard of for a while (e.g. 25s for clients with a 30 s timeout); 0: off")
	fs.IntVar(&c.Notifications.MaxStreams, "max-listen-streams", 16, "most subscriptions/listen streams with task IDs a requester may hold open at once; -1: no limit")
	fs.IntVar(&c.Notifications.MaxTasksPerStream, "max-listen-tasks", 256, "most task IDs one subscriptions/listen stream follows; the IDs beyond are not agreed")
	fs.StringVar(&c.AuditLog, "audit-log", "", "where the audit trail (tasks created, status changes, results retrieved, cancellations, denied access, limited requests) goes: empty for the daemon's log, a `file` to append JSON lines to, or off")
	fs.StringVar(&c.ConfigFile, "config", "", "YAML (or JSON) `file` declaring the tools served: the demo tools (demo: true, the default) and upstream MCP servers (mcpServers, as in a host's configuration) whose tools become tasks; see docs/gateway.md")
	fs.StringVar(&c.CheckConfig, "check-config", "", "validate this configuration `file`, print what it declares or what is wrong (file:line: field: problem), and exit")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: mcptaskd [flags]\n\n"+
			"Serves MCP tools with durable tasks on both task wires (2026-07-28\n"+
			"io.modelcontextprotocol/tasks and 2025-11-25 experimental tasks) over Streamable\n"+
			"HTTP on /mcp, or over stdio with -stdio. Tasks live in the SQLite file -db, or with\n"+
			"-postgres in PostgreSQL, shared by every mcptaskd on that database. Every flag can\n"+
			"also be set with an environment variable: -max-ttl is %sMAX_TTL; a flag on the\n"+
			"command line wins.\n\nFlags:\n", envPrefix)
		fs.PrintDefaults()
	}

	// Environment first, so that the command line overrides it.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		v := getenv(name)
		if v == "" || envErr != nil {
			return
		}
		if err := f.Value.Set(v); err != nil {
			envErr = fmt.Errorf("invalid value %q for %s: %v", v, name, err)
		}
	})
	if envErr != nil {
		return c, envErr
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if err := c.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return c, fmt.Errorf("invalid -log-level %q: use debug, info, warn or error", *level)
	}
	return c, c.validate()
}

func (c *Config) validate() error {
	var errs []error
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("invalid -log-format %q: use text or json", c.LogFormat))
	}
	if c.DB == "" {
		errs = append(errs, errors.New("-db must name a file"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"-default-ttl", c.DefaultTTL}, {"-max-ttl", c.MaxTTL}, {"-poll-interval", c.PollInterval}, {"-sweep-interval", c.SweepInterval}, {"-ledger-retention", c.LedgerRetention}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %v", d.name, d.v))
		}
	}
	if c.AuthFailuresPerSource < 0 {
		errs = append(errs, fmt.Errorf("-auth-failures-per-source must not be negative, got %d", c.AuthFailuresPerSource))
	}
	if c.MaxConnsPerSource < 0 || c.MaxConnsPerPrincipal < 0 {
		errs = append(errs, fmt.Errorf("-max-connections-per-source and -max-connections-per-principal must not be negative, got %d and %d", c.MaxConnsPerSource, c.MaxConnsPerPrincipal))
	}
	if c.BodyTimeout < 0 || c.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("-body-timeout and -max-connections must not be negative, got %v and %d", c.BodyTimeout, c.MaxConns))
	}
	if c.FinishWithin < 0 {
		errs = append(errs, fmt.Errorf("-finish-within must not be negative (0 turns it off)"))
	}
	if c.ShutdownGrace < 0 {
		errs = append(errs, fmt.Errorf("-shutdown-grace must not be negative, got %v", c.ShutdownGrace))
	}
	if c.DefaultTTL > c.MaxTTL && c.MaxTTL > 0 {
		errs = append(errs, fmt.Errorf("-default-ttl (%v) must not exceed -max-ttl (%v)", c.DefaultTTL, c.MaxTTL))
	}
	if c.Lease <= 0 {
		errs = append(errs, fmt.Errorf("-lease must be positive, got %v", c.Lease))
	}
	switch strings.ToLower(c.SQLiteSync) {
	case "full", "normal":
	default:
		errs = append(errs, fmt.Errorf("-sqlite-sync must be full or normal, got %q", c.SQLiteSync))
	}
	l := c.Limits
	for _, v := range []struct {
		name string
		v    float64
	}{{"-max-active-tasks", float64(l.MaxActiveTasks)}, {"-create-rate", l.CreateRate}, {"-request-rate", l.RequestRate}, {"-max-poll-interval", float64(l.MaxPollInterval)}} {
		if v.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative (0 disables it)", v.name))
		}
	}
	if l.CreateRate > 0 && l.CreateBurst < 1 {
		errs = append(errs, fmt.Errorf("-create-burst must be at least 1 with a -create-rate, got %d", l.CreateBurst))
	}
	if l.RequestRate > 0 && l.RequestBurst < 1 {
		errs = append(errs, fmt.Errorf("-request-burst must be at least 1 with a -request-rate, got %d", l.RequestBurst))
	}
	if c.ResultLinkBytes < 0 {
		errs = append(errs, fmt.Errorf("-result-link-bytes must not be negative, got %d", c.ResultLinkBytes))
	}
	if c.MaxResultBytes <= 0 {
		errs = append(errs, fmt.Errorf("-max-result-bytes must be positive, got %d", c.MaxResultBytes))
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("invalid -addr %q: %v", c.Addr, err))
	} else if !c.AllowRemote && !c.AuthEnabled() && !isLoopbackAddr(c.Addr) {
		errs = append(errs, fmt.Errorf("-addr %q is not a loopback address; without authentication "+
			"(anyone who can reach mcptaskd and learns a task ID can read or cancel that task) it listens on "+
			"loopback only: enable authentication with -tokens, -jwt-key or -jwks, or give -allow-remote", c.Addr))
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("invalid -metrics-addr %q: %v", c.MetricsAddr, err))
		} else if !c.AllowRemote && !isLoopbackAddr(c.MetricsAddr) {
			errs = append(errs, fmt.Errorf("-metrics-addr %q is not a loopback address; its listener has no authentication: give -allow-remote to serve metrics there", c.MetricsAddr))
		}
	}
	if c.JWTKey != "" && c.JWKS != "" {
		errs = append(errs, errors.New("give -jwt-key or -jwks, not both"))
	}
	if c.JWTKey == "" && c.JWKS == "" && (c.JWTIssuer != "" || c.JWTAudience != "") {
		errs = append(errs, errors.New("-jwt-issuer and -jwt-audience need -jwt-key or -jwks"))
	}
	if c.AuthEnabled() && strings.TrimSpace(c.AdminScope) == "" {
		errs = append(errs, errors.New("-admin-scope must name a scope: the admin endpoint is never open to every token"))
	}
	if c.JWTTenantClaim == "" {
		errs = append(errs, errors.New("-jwt-tenant-claim must name a claim"))
	}
	return errors.Join(errs...)
}

// isLoopbackAddr reports whether a listen address (host:port) is on a
// loopback interface only: localhost, 127.0.0.0/8 or ::1. An empty host
// means every interface, so it is not.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && host != "" && httpguard.IsLoopbackHost(host)
}

// newLogger returns the daemon's logger and the quieter one given to the
// SDK, which logs every stateless request's session at info level: it only
// logs warnings and errors unless the level is debug.
func newLogger(w io.Writer, format string, level slog.Level) (logger, sdk *slog.Logger) {
	mk := func(l slog.Level) slog.Handler {
		o := &slog.HandlerOptions{Level: l}
		if format == "json" {
			return slog.NewJSONHandler(w, o)
		}
		return slog.NewTextHandler(w, o)
	}
	sdkLevel := level
	if level > slog.LevelDebug {
		sdkLevel = max(level, slog.LevelWarn)
	}
	return slog.New(mk(level)), slog.New(mk(sdkLevel)).With("component", "go-sdk")
}

// requiredScopes returns the scopes of -required-scope.
func (c *Config) requiredScopes() []string {
	var scopes []string
	for _, s := range strings.Split(c.RequiredScope, ",") {
		if s = strings.TrimSpace(s); s != "" {
			scopes = append(scopes, s)
		}
	}
	return scopes
}
