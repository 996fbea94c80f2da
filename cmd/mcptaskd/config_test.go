package main

import (
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/store/sqlite"
)

func TestParseConfigDefaults(t *testing.T) {
	c, err := parseConfig(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Addr: "127.0.0.1:8080", DB: "./mcptask.db", SQLiteSync: "full", SQLiteViewCache: sqlite.DefaultViewCacheEntries, PostgresSchema: "mcptask", Lease: 15 * time.Second, DefaultTTL: time.Hour, MaxTTL: 24 * time.Hour,
		PollInterval: 500 * time.Millisecond, MaxResultBytes: 4 << 20, ShutdownGrace: 10 * time.Second, FinishWithin: 5 * time.Millisecond,
		SweepInterval: time.Minute, LedgerRetention: 30 * 24 * time.Hour, BodyTimeout: 30 * time.Second, MaxConns: 512, MaxConnsPerSource: 64, MaxConnsPerPrincipal: 128, LogFormat: "text", LogLevel: slog.LevelInfo, JWTTenantClaim: "tenant",
		AdminScope: "mcptask:admin", Metrics: true, Dashboard: true,
		Limits:        mcptask.DefaultLimits,
		Notifications: mcptask.Notifications{MinInterval: 50 * time.Millisecond, MaxStreams: 16, MaxTasksPerStream: 256},
	}
	if c != want {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c, want)
	}
}

func TestParseConfigEnvAndFlags(t *testing.T) {
	env := map[string]string{
		"MCPTASK_ADDR":             "[::1]:9000",
		"MCPTASK_DB":               "/tmp/env.db",
		"MCPTASK_DEFAULT_TTL":      "30m",
		"MCPTASK_MAX_TTL":          "2h",
		"MCPTASK_POLL_INTERVAL":    "1s",
		"MCPTASK_MAX_RESULT_BYTES": "1000",
		"MCPTASK_SHUTDOWN_GRACE":   "0s",
		"MCPTASK_LOG_FORMAT":       "json",
		"MCPTASK_LOG_LEVEL":        "debug",
		"MCPTASK_MAX_ACTIVE_TASKS": "7",
		"MCPTASK_CREATE_RATE":      "0.5",
		"MCPTASK_REQUEST_BURST":    "3",
		"MCPTASK_AUDIT_LOG":        "/var/log/mcptask-audit.jsonl",
	}
	c, err := parseConfig([]string{"-db", "/tmp/flag.db", "-log-level", "warn", "-request-rate", "0", "-max-poll-interval", "1m"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "[::1]:9000" || c.DB != "/tmp/flag.db" || c.DefaultTTL != 30*time.Minute || c.MaxTTL != 2*time.Hour ||
		c.PollInterval != time.Second || c.MaxResultBytes != 1000 || c.ShutdownGrace != 0 || c.LogFormat != "json" ||
		c.LogLevel != slog.LevelWarn || c.AuditLog != "/var/log/mcptask-audit.jsonl" {
		t.Fatalf("got %+v", c)
	}
	if want := (mcptask.Limits{MaxActiveTasks: 7, CreateRate: 0.5, CreateBurst: 50, RequestRate: 0, RequestBurst: 3, MaxPollInterval: time.Minute}); c.Limits != want {
		t.Fatalf("limits: got %+v, want %+v", c.Limits, want)
	}

	env = map[string]string{
		"MCPTASK_TOKENS":           "/etc/mcptask/tokens.json",
		"MCPTASK_JWKS":             "/etc/mcptask/jwks.json",
		"MCPTASK_JWT_ISSUER":       "https://idp.example",
		"MCPTASK_JWT_AUDIENCE":     "mcptaskd",
		"MCPTASK_JWT_TENANT_CLAIM": "org",
		"MCPTASK_ADDR":             "0.0.0.0:8080",
	}
	c, err = parseConfig([]string{"-jwt-audience", "other"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.AuthEnabled() || c.Tokens != "/etc/mcptask/tokens.json" || c.JWKS != "/etc/mcptask/jwks.json" || c.JWTIssuer != "https://idp.example" ||
		c.JWTAudience != "other" || c.JWTTenantClaim != "org" || c.AllowRemote {
		t.Fatalf("auth from env: %+v", c)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-addr", "0.0.0.0:8080"}, nil, "-allow-remote"},
		{[]string{"-addr", ":8080"}, nil, "not a loopback address"},
		{[]string{"-addr", "example.com:8080"}, nil, "not a loopback address"},
		{nil, map[string]string{"MCPTASK_ADDR": "10.0.0.1:80"}, "not a loopback address"},
		{[]string{"-addr", "nonsense"}, nil, "invalid -addr"},
		{[]string{"-log-format", "xml"}, nil, "invalid -log-format"},
		{[]string{"-log-level", "loud"}, nil, "invalid -log-level"},
		{[]string{"-default-ttl", "48h"}, nil, "must not exceed -max-ttl"},
		{[]string{"-poll-interval", "0s"}, nil, "-poll-interval must be positive"},
		{[]string{"-max-result-bytes", "-1"}, nil, "-max-result-bytes must be positive"},
		{nil, map[string]string{"MCPTASK_MAX_TTL": "forever"}, "MCPTASK_MAX_TTL"},
		{[]string{"extra"}, nil, "unexpected arguments"},
		{[]string{"-jwt-key", "k", "-jwks", "j"}, nil, "not both"},
		{[]string{"-jwt-issuer", "https://idp"}, nil, "need -jwt-key or -jwks"},
		{[]string{"-tokens", "t", "-jwt-audience", "a"}, nil, "need -jwt-key or -jwks"},
		{[]string{"-jwt-key", "k", "-jwt-tenant-claim", ""}, nil, "-jwt-tenant-claim"},
		{[]string{"-max-active-tasks", "-1"}, nil, "-max-active-tasks must not be negative"},
		{[]string{"-create-rate", "-2"}, nil, "-create-rate must not be negative"},
		{[]string{"-request-rate", "5", "-request-burst", "0"}, nil, "-request-burst must be at least 1"},
		{[]string{"-create-burst", "0"}, nil, "-create-burst must be at least 1"},
		{[]string{"-max-poll-interval", "-1s"}, nil, "-max-poll-interval must not be negative"},
		{[]string{"-metrics-addr", "9100"}, nil, "invalid -metrics-addr"},
		{[]string{"-metrics-addr", "0.0.0.0:9100", "-tokens", "t"}, nil, "-metrics-addr \"0.0.0.0:9100\" is not a loopback address"},
		{nil, map[string]string{"MCPTASK_METRICS_ADDR": "10.0.0.1:9100"}, "give -allow-remote to serve metrics there"},
	} {
		_, err := parseConfig(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("args %q env %v: error %v, want one containing %q", tc.args, tc.env, err, tc.want)
		}
	}
	for _, args := range [][]string{
		{"-addr", "0.0.0.0:8080", "-allow-remote"},
		{"-addr", "localhost:0"},
		{"-addr", "127.0.0.2:0"},
		{"-addr", "0.0.0.0:8080", "-tokens", "tokens.json"},
		{"-addr", ":8080", "-jwt-key", "key.pem", "-jwt-issuer", "https://idp", "-jwt-audience", "mcptaskd"},
		{"-metrics-addr", "127.0.0.1:9100"},
		{"-metrics-addr", "0.0.0.0:9100", "-allow-remote"},
		{"-metrics=false"},
	} {
		if _, err := parseConfig(args, func(string) string { return "" }, io.Discard); err != nil {
			t.Errorf("args %q: %v", args, err)
		}
	}
}

// TestRefusesRemoteAddress checks the binary itself refuses to listen on
// a non-loopback address without -allow-remote.
func TestRefusesRemoteAddress(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(daemonBin, "-addr", "0.0.0.0:0", "-db", t.TempDir()+"/x.db").CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "-allow-remote") {
		t.Fatalf("want exit status 2 mentioning -allow-remote, got %v: %s", err, out)
	}
}

// TestOneServerPerDatabase checks that a second server refuses to open a
// task database another one is using: its start-up recovery would fail the
// live server's running tasks.
func TestOneServerPerDatabase(t *testing.T) {
	t.Parallel()
	db := t.TempDir() + "/tasks.db"
	d := startDaemon(t, "mcptaskd#1", db)
	out, err := exec.Command(daemonBin, "-addr", "127.0.0.1:0", "-db", db).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "in use by another mcptaskd") {
		t.Fatalf("second server on the same database: want exit status 1 saying it is in use, got %v: %s", err, out)
	}
	if !d.running() {
		t.Fatal("the first server stopped")
	}
}
