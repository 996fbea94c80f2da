package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/demo"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
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
		SweepInterval: time.Minute, LedgerRetention: 30 * 24 * time.Hour, BodyTimeout: 30 * time.Second, MaxConns: 512, MaxConnsPerSource: 64, MaxConnsPerPrincipal: 128, AuthFailuresPerSource: 20, LogFormat: "text", LogLevel: slog.LevelInfo, JWTTenantClaim: "tenant",
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

// aliasBomb is a "billion laughs" document under a command's
// inputSchema (decoded as any): levels of lists of aliases of the level
// below, long enough that the decoder's own alias ratio lets it through.
func aliasBomb(levels int) string {
	b := "      l0: &l0 [" + strings.Repeat("x,", 99) + "x]\n"
	for i := 1; i <= levels; i++ {
		b += fmt.Sprintf("      l%d: &l%d [%s*l%d]\n", i, i, strings.Repeat(fmt.Sprintf("*l%d,", i-1), 99), i-1)
	}
	return "demo: false\ncommands:\n  bomb:\n    argv: [/bin/true]\n    inputSchema:\n      type: object\n" + b
}

// TestCheckConfigGaps: what -check-config refused too little, or said
// without a line or a field; each problem as LINE: field: problem.
func TestCheckConfigGaps(t *testing.T) {
	t.Parallel()
	cmd := func(name, extra string) string {
		return "commands:\n  " + name + ":\n    argv: [/bin/true]\n" + extra
	}
	for _, c := range []struct {
		name, config, want string
	}{
		{"command named like a demo tool", cmd("echo", ""), "2: commands.echo: the name is also a demo tool's"},
		{"http job named like a demo tool", "httpJobs:\n  lint_report:\n    start: {url: http://127.0.0.1:1/j, jobId: /id}\n    status: {url: \"http://127.0.0.1:1/j/{jobId}\", state: /s, working: [a], completed: [b]}\n",
			"2: httpJobs.lint_report: the name is also a demo tool's"},
		{"command named like a job tool", "demo: false\njobTools: {enabled: true}\n" + cmd("job_status", ""), "4: commands.job_status: the name is also a job tool's"},
		{"command named like an upstream's tool", "demo: false\nmcpServers:\n  up: {url: http://127.0.0.1:1/mcp, prefix: u_, tools: [build]}\n" + cmd("u_build", ""),
			"5: commands.u_build: the name is also a tool's of mcpServers.up"},
		{"env.set name with =", "demo: false\n" + cmd("x", "    env: {set: {A=B: v}}\n"), `5: commands.x.env.set.A=B: "A=B" is not an environment variable's name`},
		{"empty env.set name", "demo: false\n" + cmd("x", "    env:\n      set:\n        \"\": v\n"), `7: commands.x.env.set.: "" is not an environment variable's name`},
		{"maxConcurrent 1.5", "demo: false\n" + cmd("x", "    maxConcurrent: 1.5\n"), "5: commands.x.maxConcurrent: 1.5: want a whole number"},
		{"maxSessions 2.5", "demo: false\nmcpServers:\n  up:\n    url: http://127.0.0.1:1/mcp\n    maxSessions: 2.5\n", "5: mcpServers.up.maxSessions: 2.5: want a whole number"},
		{"tailKiB 0.5", "demo: false\n" + cmd("x", "    log: {tailKiB: 0.5}\n"), "5: commands.x.log.tailKiB: 0.5: want a whole number"},
		{"unknown drain tool", "demo: true\ndrain:\n  tools: [echo, nope]\n", `3: drain.tools: "nope" names no tool of this file`},
		{"bad duration", "demo: false\n" + cmd("x", "    timeout: 10 minutes\n"), `5: commands.x.timeout: "10 minutes" is not a duration`},
		{"wrong type", "demo: false\n" + cmd("x", "    maxConcurrent: lots\n"), "5: commands.x.maxConcurrent: want a whole number, not `lots`"},
		{"wrong type of a list", "demo: false\ncommands:\n  x:\n    argv: /bin/true\n", "4: commands.x.argv: want a list, not `/bin/true`"},
		{"invalid UTF-8", "demo: false\n" + cmd("x", "    description: \"caf\xe9\"\n"), "5: the file is not valid UTF-8 (byte 0xe9 in column 22)"},
		{"unknown field of an http job's cancel", "demo: false\nhttpJobs:\n  bb_build:\n    start: {url: http://127.0.0.1:1/j, jobId: /id}\n" +
			"    status: {url: \"http://127.0.0.1:1/j/{jobId}\", state: /s, working: [a], completed: [b]}\n    cancel:\n      url: \"http://127.0.0.1:1/j/{jobId}\"\n      bodyy: {id: \"{jobId}\"}\n",
			"8: httpJobs.bb_build.cancel.bodyy: unknown field"},
		{"unknown field in a flow mapping", "demo: false\n" + cmd("x", "    log: {tailKiB: 1, tial: 2}\n"), "5: commands.x.log.tial: unknown field"},
		{"alias bomb", aliasBomb(6), "11: commands.bomb.inputSchema.l4: the aliases (*l3) expand the document past 1048576 nodes: refused (a YAML alias bomb?)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, err := parseFileConfig([]byte(c.config), func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("errors:\n%v\nwant one with %q", err, c.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refused after %v", d)
			}
		})
	}
	// What is right stays accepted: a drain of an upstream's tool whose
	// tools are not listed, of a command, of a job tool.
	ok := "demo: false\njobTools: {enabled: true}\ndrain: {tools: [u_any, x, job_start]}\nmcpServers:\n  up: {url: http://127.0.0.1:1/mcp, prefix: u_}\n" + cmd("x", "    maxConcurrent: 2\n")
	if _, err := parseFileConfig([]byte(ok), func(string) string { return "" }); err != nil {
		t.Fatalf("a good file: %v", err)
	}
}

// TestDemoToolNames: the names -check-config knows as the demo tools' are
// the tools package demo registers.
func TestDemoToolNames(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Register: func(ts *mcptask.Server) (func(), error) {
		demo.Register(ts)
		for _, n := range demoTools {
			if !ts.HasTool(n) {
				return nil, fmt.Errorf("demo registers no tool %s", n)
			}
		}
		return nil, nil
	}})
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	c := &wiretest.Client{URL: s.URL}
	if err := c.Result(t.Context(), "tools/list", map[string]any{}, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if slices.Sort(names); !slices.Equal(names, slices.Sorted(slices.Values(demoTools))) {
		t.Errorf("demo tools %v; demoTools says %v", names, demoTools)
	}
}

// TestCheckConfigGapsBinary: the real binary's -check-config says the
// problems as FILE:LINE: field: problem, and refuses an alias bomb fast.
func TestCheckConfigGapsBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("commands:\n  echo:\n    argv: [/bin/true]\n    maxConcurrent: 1.5\n    timeout: soon\ndrain: {tools: [nope]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(daemonBin, "-check-config", bad).CombinedOutput()
	if ee, isExit := err.(*exec.ExitError); !isExit || ee.ExitCode() != 2 {
		t.Fatalf("-check-config: %v\n%s", err, out)
	}
	if want := bad + ":4: commands.echo.maxConcurrent: 1.5: want a whole number"; !strings.Contains(string(out), want) {
		t.Errorf("-check-config output lacks %q:\n%s", want, out)
	}
	fixed := "commands:\n  echo:\n    argv: [/bin/true]\n    timeout: soon\ndrain: {tools: [nope]}\n"
	if err := os.WriteFile(bad, []byte(fixed), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ = exec.Command(daemonBin, "-check-config", bad).CombinedOutput()
	if want := bad + `:4: commands.echo.timeout: "soon" is not a duration`; !strings.Contains(string(out), want) {
		t.Errorf("-check-config output lacks %q:\n%s", want, out)
	}
	fixed = "commands:\n  echo:\n    argv: [/bin/true]\ndrain: {tools: [nope]}\n"
	if err := os.WriteFile(bad, []byte(fixed), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ = exec.Command(daemonBin, "-check-config", bad).CombinedOutput()
	for _, want := range []string{bad + ":2: commands.echo: the name is also a demo tool's", bad + `:4: drain.tools: "nope" names no tool of this file`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("-check-config output lacks %q:\n%s", want, out)
		}
	}
	bomb := filepath.Join(dir, "bomb.yaml")
	if err := os.WriteFile(bomb, []byte(aliasBomb(8)), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, _ = exec.Command(daemonBin, "-check-config", bomb).CombinedOutput()
	if want := bomb + ":11: commands.bomb.inputSchema.l4: the aliases (*l3) expand the document past"; !strings.Contains(string(out), want) {
		t.Errorf("-check-config of an alias bomb lacks %q:\n%s", want, out)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the alias bomb took %v", d)
	}
}

// TestCommandSecretsFromConfig: the values of a command's env.set
// ${NAME} and ${file:PATH} references are its secrets (scrubbed from its
// output); plain values are not.
func TestCommandSecretsFromConfig(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-a-file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := "demo: false\ncommands:\n  x:\n    argv: [/bin/true]\n    env:\n      set: {A: \"Bearer ${CMD_TEST_SECRET}\", B: \"${file:" + file + "}\", LANG: C.UTF-8}\n"
	fc, err := parseFileConfig([]byte(cfg), func(n string) string { return map[string]string{"CMD_TEST_SECRET": "from-the-env-secret"}[n] })
	if err != nil {
		t.Fatal(err)
	}
	tools := fc.commandTools()
	if len(tools) != 1 || !slices.Equal(slices.Sorted(slices.Values(tools[0].Secrets)), []string{"from-a-file-secret", "from-the-env-secret"}) {
		t.Fatalf("secrets %v", tools[0].Secrets)
	}
}
