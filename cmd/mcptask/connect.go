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
		Sample:          a.sample,
		TTL:             a.ttl,
		// Only 'call --despite-unknown' calls a tool whose earlier call
		// left its effect unknown.
		AllowUnknownEffects: a.cmd.call.despiteUnknown,
		DisablePush:         a.cmd.noPush,
	}
	if a.g.verbose {
		opts.Logger = slog.New(slog.NewTextHandler(logWriter{a}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	token, tokenFrom, err := a.g.bearerToken()
	if err != nil {
		return nil, err
	}
	opts.BearerToken = token
	if j := a.g.journalPath(); j != "" {
		if err := os.MkdirAll(filepath.Dir(j), 0o700); err != nil {
			return nil, fmt.Errorf("creating the journal's directory: %w", err)
		}
		opts.Journal = j
	}
	timeout := a.dialTimeout
	if timeout <= 0 {
		timeout = connectTimeout
	}
	// The timeout cancels the dial, which closes what it had made (the
	// HTTP request and connection; a --stdio server's pipes, and waits
	// for the server to exit) before it returns: nothing is left behind.
	dctx, cancel := context.WithTimeoutCause(ctx, timeout, errConnectTimeout)
	defer cancel()
	c, err := a.dial(dctx, target, opts)
	switch {
	case err == nil:
		return c, nil
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case errors.Is(context.Cause(dctx), errConnectTimeout):
		return nil, fmt.Errorf("cannot connect to %s: no answer within %v%s", target, timeout, a.startHint(target))
	}
	var unauthorized *client.UnauthorizedError
	if errors.As(err, &unauthorized) {
		if !unauthorized.TokenSent {
			return nil, fmt.Errorf("cannot connect to %s: %v: give it with --token-file FILE, %s or %s (or --token)", target, unauthorized, envToken, envTokenFile)
		}
		return nil, fmt.Errorf("cannot connect to %s: %v (the token came from %s)", target, unauthorized, tokenFrom)
	}
	hint := ""
	if unreachable(err) {
		hint = a.startHint(target)
	}
	if strings.Contains(err.Error(), target) {
		return nil, fmt.Errorf("%w%s", err, hint)
	}
	return nil, fmt.Errorf("connecting to %s: %w%s", target, err, hint)
}

// errConnectTimeout is the cause of a dial cut short by the connection
// timeout.
var errConnectTimeout = errors.New("the connection timed out")

// dial connects to target with opts: over Streamable HTTP, or by running
// a "stdio:COMMAND" target's command and talking to it on its stdin and
// stdout.
func (a *app) dial(ctx context.Context, target string, opts *client.Options) (*client.Client, error) {
	command, ok := strings.CutPrefix(target, "stdio:")
	if !ok {
		return client.Dial(ctx, target, opts)
	}
	argv, err := splitCommand(command)
	if err != nil {
		return nil, err
	}
	// Not exec.CommandContext: the server outlives the dial's context; the
	// client stops it when the connection closes.
	cmd := exec.Command(argv[0], argv[1:]...)
	if a.g.verbose {
		cmd.Stderr = logWriter{a}
	}
	return client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, target, opts)
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
