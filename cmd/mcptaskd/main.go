// Command mcptaskd serves MCP tools with durable tasks on both task wires
// (the 2026-07-28 io.modelcontextprotocol/tasks extension, SEP-2663, and
// the 2025-11-25 experimental tasks) over Streamable HTTP or stdio, with
// tasks kept in a SQLite file, or in PostgreSQL for several instances
// sharing one task space, so that they survive restarts and crashes.
//
// It serves the demo tools of package demo, and the tools of the upstream
// MCP servers a -config file declares (package gateway; see
// docs/gateway.md), on /mcp, and /healthz for health checks. Tasks left running by a crash are resolved at the next
// start (SQLite) or about one lease later by another instance
// (PostgreSQL): those of re-runnable tools run again, the others fail with
// an "outcome unknown" error.
//
// Usage (every flag; `mcptaskd -h` describes each):
//
//	mcptaskd [-addr 127.0.0.1:8080 | -stdio] [-allow-remote] [-config FILE] [-check-config FILE]
//	         store:    [-db ./mcptask.db] [-sqlite-sync full|normal] [-sqlite-view-cache N]
//	                   [-postgres DSN] [-postgres-schema mcptask] [-lease 15s]
//	         tasks:    [-default-ttl 1h] [-max-ttl 24h] [-poll-interval 500ms]
//	                   [-max-result-bytes 4194304] [-result-link-bytes 0] [-finish-within D]
//	                   [-shutdown-grace 10s] [-sweep-interval 1m] [-ledger-retention D]
//	         HTTP:     [-body-timeout 30s] [-max-connections 512]
//	                   [-max-connections-per-source 64] [-max-connections-per-principal 128]
//	                   [-auth-failures-per-source 20]
//	         auth:     [-tokens FILE] [-jwt-key FILE | -jwks FILE] [-jwt-issuer ISS]
//	                   [-jwt-audience AUD] [-jwt-tenant-claim tenant] [-required-scope SCOPE]
//	                   [-admin-scope mcptask:admin] [-admin-token-file FILE]
//	         limits:   [-max-active-tasks 100] [-create-rate 10] [-create-burst 50]
//	                   [-request-rate 50] [-request-burst 100] [-max-poll-interval 30s]
//	         push:     [-notify-interval 50ms] [-notify-keepalive 0] [-max-listen-streams 16]
//	                   [-max-listen-tasks 256]
//	         events:   [-webhooks] [-webhooks-allow-private] [-events-retention 24h]
//	         operate:  [-metrics=true] [-metrics-addr HOST:PORT] [-dashboard=true]
//	                   [-audit-log FILE|off] [-log-format text|json] [-log-level info]
//
// Once listening, mcptaskd prints "listening on http://HOST:PORT/mcp" to
// standard output (useful with -addr 127.0.0.1:0, which picks a free
// port); logs go to standard error. With -stdio it serves one client on
// standard input and output instead, and stops when that client does.
//
// With -postgres DSN the tasks live in PostgreSQL (schema
// -postgres-schema, created if missing): every mcptaskd on that database
// and schema serves the same tasks, a cancel or an answer given to one
// instance reaches the work on another at once (LISTEN/NOTIFY), and the
// running tasks of an instance that dies are taken over by another one
// about -lease later. Without it, one mcptaskd owns the -db SQLite file
// (a second one on the same file refuses to start).
//
// Every flag has an environment variable: MCPTASK_ADDR, MCPTASK_DB,
// MCPTASK_ALLOW_REMOTE, MCPTASK_DEFAULT_TTL, and so on; the command line
// wins. With -tokens, -jwt-key or -jwks, /mcp requires a bearer token
// (package authn) and each task is visible to its creator only; without
// them there is no authentication, and the server listens on loopback only
// unless -allow-remote is given.
//
// Each requester (an authenticated principal, or without authentication
// all clients together) is held to the limits of mcptask.Limits: over one,
// a request gets JSON-RPC error -32000 with the reason and a retry hint.
// The audit trail (tasks created, status changes, results retrieved,
// cancellations, denied access, limited requests; never payloads) goes to
// the log, or to the -audit-log file.
//
// SIGINT or SIGTERM shuts down gracefully: HTTP stops, running tasks get
// -shutdown-grace to finish, then those still running are stopped and
// resolved by their recovery policy. A second signal exits at once.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/mcptask/mcptask/source/command"
)

func main() {
	// The supervisor of mcptaskd's commands is a copy of mcptaskd (see
	// package source/command): it supervises them and exits here.
	command.Supervise()
	cfg, err := parseConfig(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcptaskd: %v\n", err)
		os.Exit(2)
	}
	if cfg.CheckConfig != "" {
		os.Exit(checkConfig(cfg.CheckConfig, os.Getenv, os.Stdout, os.Stderr))
	}
	logger, sdkLogger := newLogger(os.Stderr, cfg.LogFormat, cfg.LogLevel)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process at once
	}()
	if err := run(ctx, cfg, os.Stdout, logger, sdkLogger); err != nil {
		logger.Error("mcptaskd failed", "err", err)
		os.Exit(1)
	}
}

// publicURL is raw as -check-config shows it: without its userinfo, query
// and fragment, any of which may hold a secret (${VAR} values are
// expanded by then).
func publicURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that does not parse)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// checkConfig is -check-config: it validates the file and says what it
// declares (exit 0) or what is wrong (exit 2). It starts no upstream.
func checkConfig(path string, getenv func(string) string, stdout, stderr io.Writer) int {
	fc, err := loadFileConfig(path, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "mcptaskd: %v\n", err)
		return 2
	}
	fmt.Fprintf(stdout, "%s: ok: demo tools %s, %d upstream server(s)\n", path, map[bool]string{true: "on", false: "off"}[fc.demoEnabled()], len(fc.MCPServers))
	for _, u := range fc.upstreams() {
		where := publicURL(u.URL)
		if u.Command != "" {
			where = "stdio: " + u.Command
		}
		var notes []string
		if u.MaxConcurrent > 0 {
			notes = append(notes, fmt.Sprintf("at most %d tasks at once", u.MaxConcurrent))
		}
		for _, tool := range slices.Sorted(maps.Keys(u.Policies)) {
			if n := u.Policies[tool].MaxConcurrent; n > 0 {
				notes = append(notes, fmt.Sprintf("%s: at most %d at once", tool, n))
			}
		}
		if len(u.ToolMeta) > 0 {
			notes = append(notes, "_meta added to "+strings.Join(slices.Sorted(maps.Keys(u.ToolMeta)), ", "))
		}
		if len(notes) > 0 {
			where += "; " + strings.Join(notes, ", ")
		}
		fmt.Fprintf(stdout, "  %s (%s)\n", u.Name, where)
	}
	if keys := fc.correlationKeys(); keys != nil {
		fmt.Fprintf(stdout, "  host correlation keys: %s\n", cmp.Or(strings.Join(keys, ", "), "none"))
	}
	for _, l := range fc.describeCommands() {
		fmt.Fprintf(stdout, "  %s\n", l)
	}
	for _, name := range slices.Sorted(maps.Keys(fc.HTTPJobs)) {
		j := fc.HTTPJobs[name]
		if j.Observe {
			fmt.Fprintf(stdout, "  %s (http job, observe: %s %s, never started)\n", name, cmp.Or(j.Status.Method, "GET"), publicURL(j.Status.URL))
			continue
		}
		fmt.Fprintf(stdout, "  %s (http job: %s %s)\n", name, cmp.Or(j.Start.Method, "POST"), publicURL(j.Start.URL))
	}
	for _, l := range fc.describeWorkflows() {
		fmt.Fprintf(stdout, "  %s\n", l)
	}
	if d := fc.Drain; d.All || len(d.Tools) > 0 {
		what := "all tools"
		if !d.All {
			what = strings.Join(d.Tools, ", ")
		}
		fb := d.Fallback
		if fb == "" {
			fb = "refuse"
		}
		fmt.Fprintf(stdout, "  drain: %s (fallback %s)\n", what, fb)
	}
	if fc.JobTools.Enabled {
		fmt.Fprintf(stdout, "  job tools: on (prefix %q)\n", fc.JobTools.prefix())
	}
	for _, name := range slices.Sorted(maps.Keys(fc.Rollout)) {
		rc := fc.Rollout[name]
		line := "  rollout " + name + ": fallback " + cmp.Or(rc.Fallback, "refuse")
		if a := rc.Approval; a != nil {
			line += ", approval by " + strings.Join(a.Approvers, " or ") + " (expires " + cmp.Or(a.Expires, "1h") + ")"
		}
		fmt.Fprintln(stdout, line)
	}
	return 0
}
