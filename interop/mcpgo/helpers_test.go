package mcpgo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
)

// The binaries built once for the whole run: mcptaskd (the main module's
// daemon) and the mcp-go upstream of this module.
var daemonBin, upstreamBin string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mcpgo-interop-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	daemonBin = filepath.Join(dir, "mcptaskd")
	upstreamBin = filepath.Join(dir, "mcpgo-upstream")
	ctx := context.Background()
	// mcptaskd is built in the main module (its own go.mod and go.sum),
	// without -race: the daemon's race tests live there.
	build := exec.CommandContext(ctx, "go", "build", "-C", "../..", "-o", daemonBin, "./cmd/mcptaskd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building mcptaskd: %v\n", err)
		return 1
	}
	if err := proctest.Build(ctx, upstreamBin, "./cmd/mcpgo-upstream", false, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "building mcpgo-upstream: %v\n", err)
		return 1
	}
	return m.Run()
}

// daemonFlags are given to every mcptaskd: no per-requester limits (the
// flows are one anonymous requester), JSON logs.
var daemonFlags = []string{"-log-format", "json", "-log-level", "info", "-shutdown-grace", "2s",
	"-max-active-tasks", "0", "-create-rate", "0", "-request-rate", "0", "-max-poll-interval", "0"}

// daemon is a running mcptaskd over HTTP.
type daemon struct {
	*proctest.Process
	t   testing.TB
	URL string
}

// startDaemon starts mcptaskd on a free loopback port on the SQLite file
// db, with extra flags, and waits until it serves /healthz.
func startDaemon(t testing.TB, db string, extra ...string) *daemon {
	t.Helper()
	args := append(append([]string{"-addr", "127.0.0.1:0", "-db", db}, daemonFlags...), extra...)
	p, err := proctest.Start(proctest.Config{Path: daemonBin, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{Process: p, t: t}
	t.Cleanup(func() {
		d.Kill()
		if t.Failed() {
			t.Logf("--- mcptaskd log ---\n%s", d.Logs())
		}
	})
	d.URL, err = d.WaitListening(context.Background(), 60*time.Second)
	if err != nil {
		t.Fatalf("mcptaskd did not start listening: %v\n%s", err, d.Logs())
	}
	if err := proctest.WaitHTTPOK(context.Background(), strings.TrimSuffix(d.URL, "/mcp")+"/healthz", 30*time.Second); err != nil {
		t.Fatalf("mcptaskd /healthz: %v\n%s", err, d.Logs())
	}
	return d
}

// kill9 kills mcptaskd with SIGKILL, as a crash would, and waits for it.
func (d *daemon) kill9() {
	d.t.Helper()
	if err := d.Signal(syscall.SIGKILL); err != nil {
		d.t.Fatal(err)
	}
	select {
	case <-d.Exited():
	case <-time.After(10 * time.Second):
		d.t.Fatal("mcptaskd did not exit within 10s of SIGKILL")
	}
}

// upstream is a running mcpgo-upstream over HTTP.
type upstream struct {
	*proctest.Process
	URL string
}

// startUpstream starts mcpgo-upstream over HTTP on a free loopback port
// with flags (-stateless, -detach; a later -http names the address).
func startUpstream(t testing.TB, flags ...string) *upstream {
	t.Helper()
	p, err := proctest.Start(proctest.Config{Path: upstreamBin, Args: append([]string{"-http", "127.0.0.1:0"}, flags...)})
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{Process: p}
	t.Cleanup(func() {
		u.Kill()
		if t.Failed() {
			t.Logf("--- mcpgo-upstream log ---\n%s", u.Logs())
		}
	})
	u.URL, err = u.WaitListening(context.Background(), 30*time.Second)
	if err != nil {
		t.Fatalf("mcpgo-upstream did not start listening: %v\n%s", err, u.Logs())
	}
	return u
}

// writeConfig writes an mcptaskd configuration file (JSON is YAML) and
// returns its path.
func writeConfig(t testing.TB, cfg map[string]any) string {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mcptaskd.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// host is what an mcp-go client's host answers and records: elicitation
// (accept with a name, or decline) and sampling.
type host struct {
	mu      sync.Mutex
	decline bool
	// accept is the content of an accepted elicitation (default
	// {"confirm": true}, what deploy_with_confirmation asks).
	accept map[string]any
	// hold, if not nil, delays every answer until it is closed.
	hold     <-chan struct{}
	asked    []string // elicitation messages
	sampled  int
	lastMeta map[string]any
}

func (h *host) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	if h.hold != nil {
		select {
		case <-h.hold:
		case <-ctx.Done():
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked = append(h.asked, req.Params.Message)
	if req.Params.Meta != nil {
		h.lastMeta = req.Params.Meta.AdditionalFields
	}
	if h.decline {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
	}
	content := h.accept
	if content == nil {
		content = map[string]any{"confirm": true}
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: content}}, nil
}

func (h *host) CreateMessage(_ context.Context, _ mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	h.mu.Lock()
	h.sampled++
	h.mu.Unlock()
	return &mcp.CreateMessageResult{Model: "test-model-7", StopReason: "endTurn",
		SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("the sampled answer: 42")}}, nil
}

// holdUntilEnd returns a channel closed when the test ends.
func holdUntilEnd(t *testing.T) <-chan struct{} {
	ch := make(chan struct{})
	t.Cleanup(func() { close(ch) })
	return ch
}

// meta returns the _meta of the last elicitation.
func (h *host) meta() map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastMeta
}

// samples returns how many sampling requests the host answered.
func (h *host) samples() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sampled
}

func (h *host) questions() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.asked...)
}

// The wires the mcp-go client is tried on, as a host picks them with its
// public API.
const (
	// wireDefault: no protocol version pinned (the client probes
	// server/discover and speaks 2026-07-28 when the server answers it).
	wireDefault = "default (2026-07-28 core)"
	// wire2025: WithProtocolVersion("2025-11-25"): the initialize
	// handshake and the experimental tasks of that revision.
	wire2025 = "2025-11-25"
)

// connect starts an mcp-go client on tr and initializes it on wire.
func connect(t *testing.T, tr transport.Interface, wire string, h *host, opts ...mcpclient.ClientOption) *mcpclient.Client {
	t.Helper()
	if h != nil {
		opts = append(opts, mcpclient.WithElicitationHandler(h), mcpclient.WithSamplingHandler(h))
	}
	if wire == wire2025 {
		opts = append(opts, mcpclient.WithProtocolVersion(mcp.ProtocolVersion20251125))
	}
	c := mcpclient.NewClient(tr, opts...)
	// Start's context is the stdio child's life (mcp-go starts it with
	// exec.CommandContext): the test's, not the handshake's.
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "mcpgo-interop", Version: "1"}
	if wire == wire2025 {
		req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize on %s: %v", wire, err)
	}
	return c
}

// textOf returns the concatenated text content of a result.
func textOf(content []mcp.Content) string {
	var b strings.Builder
	for _, c := range content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// rpcCode returns the JSON-RPC error code that err stands for (mcp-go's
// client turns a JSON-RPC error into a sentinel error wrapping its
// message, and keeps the code only through the sentinel), or 0.
func rpcCode(err error) int {
	for _, c := range []struct {
		err  error
		code int
	}{{mcp.ErrInvalidParams, mcp.INVALID_PARAMS}, {mcp.ErrMethodNotFound, mcp.METHOD_NOT_FOUND},
		{mcp.ErrInternalError, mcp.INTERNAL_ERROR}, {mcp.ErrInvalidRequest, mcp.INVALID_REQUEST}} {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	var mc mcp.MissingRequiredClientCapabilityError
	if errors.As(err, &mc) {
		return mcp.MISSING_REQUIRED_CLIENT_CAPABILITY
	}
	return 0
}
