package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// logWriter sends log lines to stderr above the status line.
type logWriter struct{ a *app }

func (w logWriter) Write(p []byte) (int, error) {
	w.a.notef("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// connect connects to target (a URL, or "stdio:COMMAND") on the given wire
// ("" for the newest).
func (a *app) connect(ctx context.Context, target, wire string) (*client.Client, error) {
	opts := &client.Options{
		ClientInfo:      &mcp.Implementation{Name: "mcptask-cli", Version: version()},
		ProtocolVersion: wire,
		Elicit:          a.elicit,
		TTL:             a.ttl,
	}
	if a.g.verbose {
		opts.Logger = slog.New(slog.NewTextHandler(logWriter{a}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if j := a.g.journalPath(); j != "" {
		if err := os.MkdirAll(filepath.Dir(j), 0o700); err != nil {
			return nil, fmt.Errorf("creating the journal's directory: %w", err)
		}
		opts.Journal = j
	}
	type dialed struct {
		c   *client.Client
		err error
	}
	done := make(chan dialed, 1)
	go func() {
		var d dialed
		if command, ok := strings.CutPrefix(target, "stdio:"); ok {
			argv, err := splitCommand(command)
			if err != nil {
				done <- dialed{err: err}
				return
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			if a.g.verbose {
				cmd.Stderr = logWriter{a}
			}
			d.c, d.err = client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, target, opts)
		} else {
			d.c, d.err = client.Dial(ctx, target, opts)
		}
		done <- d
	}()
	timer := time.NewTimer(connectTimeout)
	defer timer.Stop()
	select {
	case d := <-done:
		if d.err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			hint := ""
			if unreachable(d.err) {
				hint = a.startHint(target)
			}
			if strings.Contains(d.err.Error(), target) {
				return nil, fmt.Errorf("%w%s", d.err, hint)
			}
			return nil, fmt.Errorf("connecting to %s: %w%s", target, d.err, hint)
		}
		return d.c, nil
	case <-timer.C:
		return nil, fmt.Errorf("cannot connect to %s: no answer within %v%s", target, connectTimeout, a.startHint(target))
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// unreachable reports whether err says that nothing answered at the
// server's address.
func unreachable(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"connection refused", "no such host", "dial tcp", "i/o timeout", "connection reset"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// startHint tells a newcomer how to get a server at target.
func (a *app) startHint(target string) string {
	if strings.HasPrefix(target, "stdio:") {
		return ""
	}
	return "\nmcptask: is the server running? Start the demo server with 'mcptaskd', or point mcptask " +
		"at yours with --url URL or " + envURL + "=URL."
}
