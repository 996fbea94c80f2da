// Package gateway re-exports the tools of other MCP servers (upstreams)
// from an mcptask server, so that their slow tools become durable,
// resumable, cancellable tasks on both task wires, whatever the upstream
// supports:
//
//	gw := gateway.New([]gateway.Upstream{{
//		Name:    "everything",
//		Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"},
//		Default: gateway.ToolPolicy{Support: mcptask.Optional},
//	}}, logger, nil)
//	defer gw.Close()
//	if err := gw.Register(ctx, ts); err != nil { ... }
//
// A task's work is the upstream tools/call. The upstream's progress
// notifications become the task's status message; its elicitation and
// sampling requests become the task's input_required, answered by the
// client as for any task, and the answer goes back upstream; a
// tasks/cancel cancels the upstream call (the go-sdk sends it
// notifications/cancelled); the upstream's result, error or isError
// result is the task's outcome.
//
// Each upstream call runs on a session of its own for its duration (a
// small pool of sessions per upstream, one child process each for a stdio
// upstream), so that the requests an upstream sends during a call belong
// to that call: stdio carries no link between them. A session serves the
// calls of one requester only, and what the upstream asks between calls
// is refused. An upstream that cannot be reached at Register is tried again
// in the background; URLs are redacted in everything the gateway logs or
// reports.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/tracing"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Upstream is an MCP server whose tools the gateway re-exports. Exactly
// one of Command (stdio) and URL (Streamable HTTP) is set, as in the
// mcpServers block of a host's configuration.
type Upstream struct {
	// Name names the upstream in logs, errors and, on a collision, in
	// the names of its tools.
	Name string

	// Command, Args, Env and Dir start a stdio upstream: a child process
	// per session, which never outlives the gateway (on Linux, a
	// parent-death signal; Close stops them elsewhere). Env is added to
	// the gateway's environment.
	Command string
	Args    []string
	Env     map[string]string
	Dir     string

	// URL and Headers reach a Streamable HTTP upstream.
	URL     string
	Headers map[string]string

	// Tools, if not empty, lists the upstream tools re-exported; the
	// others are not. Empty re-exports them all.
	Tools []string
	// Prefix is prepended to the name of every re-exported tool. When it
	// is empty and a name is taken (by another upstream, or the server's
	// own tools), the tool is exported as Name + "_" + its name.
	Prefix string

	// Default is the policy of the upstream's tools; Policies overrides
	// it per upstream tool name.
	Default  ToolPolicy
	Policies map[string]ToolPolicy

	// ProtocolVersion is the MCP revision the gateway asks the upstream
	// for; empty means DefaultProtocolVersion. On 2025-11-25 an upstream
	// asks for input during a call with server-to-client requests; on
	// 2026-07-28 with input-required results, which the go-sdk client
	// answers through the same handlers.
	ProtocolVersion string

	// MaxSessions bounds the sessions (stdio: processes) open at once to
	// the upstream, and so the calls in flight from this process; a call
	// beyond it waits for one to free. Zero means DefaultMaxSessions.
	MaxSessions int

	// MaxConcurrent, if positive, caps the tasks of all the upstream's
	// tools together (one durable queue, named "upstream:" + Name, shared
	// by every instance on the task store): the backpressure on the
	// system behind the upstream. A tool with a cap of its own
	// (ToolPolicy.MaxConcurrent) has its own queue instead.
	MaxConcurrent int

	// LogLevel is the level the gateway sets on each session of an
	// upstream that offers logging (logging/setLevel): the upstream's
	// notifications/message at that level or above, sent during a call
	// that runs as a task, go to the task's log (stream "upstream", or
	// the upstream's logger name). Empty means DefaultLogLevel; "off"
	// sets none, and the upstream sends nothing.
	LogLevel string

	// ToolMeta adds entries to the _meta of the upstream's tools in
	// tools/list (both wires), by upstream tool name, "*" for every tool
	// of the upstream (a tool's own entry wins over "*", both over the
	// upstream's own _meta of the tool): e.g. a host's hint of the result
	// size it accepts. See toolMeta.
	ToolMeta map[string]map[string]any
}

// Defaults of an Upstream.
const (
	// DefaultMaxSessions is the default of Upstream.MaxSessions.
	DefaultMaxSessions = 4
	// DefaultProtocolVersion is the default of Upstream.ProtocolVersion:
	// the revision most servers speak today.
	DefaultProtocolVersion = "2025-11-25"
	// DefaultLogLevel is the default of Upstream.LogLevel.
	DefaultLogLevel = "info"
)

// ToolPolicy is how one re-exported tool runs.
type ToolPolicy struct {
	// Support is its task support; empty means mcptask.Optional.
	Support mcptask.TaskSupport
	// Rerunnable declares the upstream call safe to make again after a
	// crash of the gateway (see mcptask.ToolOptions.Rerunnable).
	Rerunnable bool
	// Timeout, if positive, bounds each upstream call; the task then fails
	// saying so.
	Timeout time.Duration
	// MaxConcurrent, if positive, caps the tool's tasks running at once,
	// across every instance sharing the task store; the others wait in a
	// durable queue (see mcptask.ToolOptions.MaxConcurrent). It overrides
	// the upstream's cap (Upstream.MaxConcurrent) for this tool.
	MaxConcurrent int
	// MaxTTL, if positive, caps the retention of the tool's tasks.
	MaxTTL time.Duration
	// Observe exports the tool in shadow mode: a call watches a task the
	// upstream already runs, named by its argument "taskId", and
	// projects it as a task here (status, messages, log, outcome),
	// without ever calling the upstream tool or cancelling its task (a
	// cancel here stops the watch). Only for a tool the upstream runs as
	// a task over HTTP; the exported tool takes taskId alone and runs
	// only as a task.
	Observe bool
}

// observeSchema is the input schema of a tool exported in shadow mode.
var observeSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"taskId": map[string]any{"type": "string", "minLength": 1, "description": "the ID of the upstream task to watch"},
	},
	"required":             []any{"taskId"},
	"additionalProperties": false,
}

// Gateway holds the upstream connections of a server: a tool source
// (Register, Health, Close), made by [New].
type Gateway struct {
	log       *slog.Logger
	ups       []Upstream // as given to New
	upstreams []*upstream
	ts        *mcptask.Server
	addTool   func(*mcp.Tool, mcp.ToolHandler) // Options.AddTool

	mu       sync.Mutex
	late     map[string]bool // the names of the tools added after Register
	observed map[string]bool // the names of the tools exported in shadow mode
}

// Observes reports whether the exported tool name watches upstream tasks
// in shadow mode (ToolPolicy.Observe).
func (g *Gateway) Observes(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.observed[name]
}

// Options are the optional settings of a [Gateway].
type Options struct {
	// AddTool, if set, adds a tool to the server after it started: the
	// go-sdk's mcp.Server.AddTool, which tells the clients (list_changed).
	// It registers the tools of an upstream that could not be reached at
	// Register once it comes up; they run as plain calls until the next
	// start (task support is set before the server starts). Without it,
	// such an upstream's tools are served from the next start on.
	AddTool func(*mcp.Tool, mcp.ToolHandler)
}

// New returns the gateway to ups; it connects to none of them until
// Register. log receives its records (nil: slog.Default()); opts may be
// nil.
func New(ups []Upstream, log *slog.Logger, opts *Options) *Gateway {
	if log == nil {
		log = slog.Default()
	}
	g := &Gateway{log: redactLogger(log), ups: ups, late: map[string]bool{}}
	if opts != nil {
		g.addTool = opts.AddTool
	}
	return g
}

// Register connects to every upstream, lists its tools and registers
// them on ts, which must not have started yet (its recovery of
// unfinished tasks asks every tool whether it may run again). An
// upstream that cannot be reached does not fail it: it is reported down
// (Health), tried again with backoff, and its tools registered when it
// answers (see Options.AddTool). A name that cannot be given, or a tool
// of Tools the upstream lacks, fails it; the caller then closes the
// gateway. Register is called once.
func (g *Gateway) Register(ctx context.Context, ts *mcptask.Server) error {
	g.ts = ts
	seen := map[string]bool{}
	var down []*upstream
	for _, cfg := range g.ups {
		if err := validate(cfg); err != nil {
			return err
		}
		if seen[cfg.Name] {
			return fmt.Errorf("gateway: two upstreams are named %q", cfg.Name)
		}
		seen[cfg.Name] = true
		u := newUpstream(cfg, g.log.With("upstream", cfg.Name))
		u.tracer = ts.TracerProvider().Tracer(tracing.TracerName)
		g.upstreams = append(g.upstreams, u)
		d, err := u.discover(ctx)
		if err != nil {
			u.setPending(err)
			u.log.Warn("the upstream cannot be reached: starting without its tools; trying again with backoff", "err", err)
			down = append(down, u)
			continue
		}
		if err := g.export(u, d, false); err != nil {
			return err
		}
	}
	for _, u := range down {
		go g.retry(u)
	}
	return nil
}

// discovery is what an upstream says of itself: its tools and whether it
// speaks tasks.
type discovery struct {
	tools       []*mcp.Tool
	support     map[string]string // each tool's task support upstream, if it speaks tasks
	speaksTasks bool
	tc          *taskConn // its connection, if it speaks tasks
}

// retry tries, with backoff, an upstream that could not be reached at
// Start, until it answers (then registers its tools) or the gateway
// closes.
func (g *Gateway) retry(u *upstream) {
	for {
		wait := max(time.Until(u.nextAttempt()), backoffMin)
		select {
		case <-u.done:
			return
		case <-time.After(wait):
		}
		limit := u.dialLimit()
		ctx, cancel := context.WithTimeout(context.Background(), 2*limit)
		d, err := u.discover(ctx)
		cancel()
		if err != nil {
			u.setPending(err) // the failure counted for the backoff
			if errors.Is(err, context.DeadlineExceeded) {
				// Too slow to start: give the next attempt longer.
				u.mu.Lock()
				u.dialFor = min(2*limit, maxDialTimeout)
				u.mu.Unlock()
			}
			continue
		}
		u.mu.Lock()
		u.dialFor = 0
		u.mu.Unlock()
		select {
		case <-u.done:
			if d.tc != nil {
				d.tc.close()
			}
			return
		default:
		}
		u.setPending(nil)
		if g.addTool == nil {
			u.log.Warn("the upstream answers now; its tools are served from the next start")
			if d.tc != nil {
				d.tc.close()
			}
			return
		}
		if err := g.export(u, d, true); err != nil {
			u.log.Error("registering the upstream's tools", "err", err)
		}
		return
	}
}

func validate(u Upstream) error {
	switch {
	case u.Name == "":
		return errors.New("gateway: an upstream needs a name")
	case u.Command == "" && u.URL == "":
		return fmt.Errorf("gateway: upstream %q: set command (stdio) or url (HTTP)", u.Name)
	case u.Command != "" && u.URL != "":
		return fmt.Errorf("gateway: upstream %q: set command (stdio) or url (HTTP), not both", u.Name)
	case u.MaxSessions < 0:
		return fmt.Errorf("gateway: upstream %q: negative maxSessions", u.Name)
	case u.MaxConcurrent < 0:
		return fmt.Errorf("gateway: upstream %q: negative maxConcurrent", u.Name)
	case !validLogLevel(u.LogLevel):
		return fmt.Errorf("gateway: upstream %q: logLevel %q: want off or an MCP logging level (debug, info, notice, warning, error, critical, alert, emergency)", u.Name, u.LogLevel)
	}
	for name, p := range u.Policies {
		if err := checkSupport(p.Support); err != nil {
			return fmt.Errorf("gateway: upstream %q, tool %q: %w", u.Name, name, err)
		}
	}
	return checkSupport(u.Default.Support)
}

// validLogLevel reports whether l is a valid Upstream.LogLevel.
func validLogLevel(l string) bool {
	switch l {
	case "", "off", "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency":
		return true
	}
	return false
}

func checkSupport(s mcptask.TaskSupport) error {
	switch s {
	case "", mcptask.Optional, mcptask.Required, mcptask.Forbidden:
		return nil
	}
	return fmt.Errorf("task support %q: want optional, required or forbidden", s)
}

// Close closes every upstream session (stopping stdio upstreams).
func (g *Gateway) Close() error {
	var errs []error
	for _, u := range g.upstreams {
		errs = append(errs, u.close())
	}
	return errors.Join(errs...)
}

// Health reports each upstream's state: nil when it answered last, else
// why it did not.
func (g *Gateway) Health() map[string]error {
	out := map[string]error{}
	for _, u := range g.upstreams {
		out[u.cfg.Name] = u.health()
	}
	return out
}

// upstream is one upstream and its pool of sessions.
type upstream struct {
	cfg    Upstream
	log    *slog.Logger
	tracer trace.Tracer // makes the spans of the upstream calls

	mu      sync.Mutex
	idle    []*session
	open    int           // sessions open or opening
	freed   chan struct{} // closed and replaced when a session frees
	lastErr error
	closed  bool
	// failures counts the dial failures and session deaths since the
	// upstream last worked; no dial is tried before retryAt.
	failures int
	retryAt  time.Time
	// pending, while the upstream's tools are not registered (it could
	// not be reached at Register), says why.
	pending error
	done    chan struct{} // closed by close
	// dialFor, if set, bounds a dial instead of dialTimeout (see retry).
	dialFor time.Duration

	// tasks, set when the upstream speaks tasks itself, carries the
	// calls of its task-capable tools as upstream tasks.
	tasks *taskConn
}

// Restarting an upstream that keeps failing (a stdio process that dies, an
// HTTP server that refuses): the first failure is retried at once, then
// the pause doubles from backoffMin up to backoffMax. A call that finds
// the upstream in a pause of at most maxDialWait waits it out; a longer
// pause fails the call at once, saying the upstream is down.
const (
	backoffMin  = 250 * time.Millisecond
	backoffMax  = 30 * time.Second
	maxDialWait = time.Second
)

// backoff is the pause before the next dial after n failures in a row.
func backoff(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	d := backoffMin
	for i := 2; i < n && d < backoffMax; i++ {
		d *= 2
	}
	return min(d, backoffMax)
}

// mayDial returns nil when a dial may be tried now, after waiting out a
// short pause; an error that says the upstream is down otherwise.
func (u *upstream) mayDial() error {
	u.mu.Lock()
	wait := time.Until(u.retryAt)
	last := u.lastErr
	u.mu.Unlock()
	switch {
	case wait <= 0:
		return nil
	case wait <= maxDialWait:
		time.Sleep(wait) // the upstream's restart pause: at most maxDialWait
		return nil
	}
	return fmt.Errorf("down after %d failures in a row, next attempt in %v (last: %v)", u.failureCount(), wait.Round(time.Millisecond), redactErr(last))
}

func (u *upstream) failureCount() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.failures
}

// dialed records the outcome of a dial (or the death of a session:
// err not nil) for the restart backoff and /healthz.
func (u *upstream) dialed(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.failedLocked(err)
}

func (u *upstream) failedLocked(err error) {
	if err == nil {
		u.failures, u.retryAt, u.lastErr = 0, time.Time{}, nil
		return
	}
	u.failures++
	u.lastErr = err
	if d := backoff(u.failures); d > 0 {
		u.retryAt = time.Now().Add(d)
		u.log.Warn("upstream failing; pausing before the next attempt", "failures", u.failures, "pause", d, "err", err)
	}
}

func newUpstream(cfg Upstream, log *slog.Logger) *upstream {
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.ProtocolVersion == "" {
		cfg.ProtocolVersion = DefaultProtocolVersion
	}
	return &upstream{cfg: cfg, log: log, freed: make(chan struct{}), done: make(chan struct{}), tracer: noop.NewTracerProvider().Tracer(tracing.TracerName)}
}

// discover lists the upstream's tools and asks whether it speaks tasks.
// Its errors say the upstream cannot be reached (or answers wrong).
func (u *upstream) discover(ctx context.Context) (*discovery, error) {
	s, err := u.acquire(ctx, "", nil)
	if err != nil {
		return nil, fmt.Errorf("gateway: upstream %q: %w", u.cfg.Name, redactErr(err))
	}
	var tools []*mcp.Tool
	for t, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			u.release(s, err)
			return nil, fmt.Errorf("gateway: upstream %q: listing its tools: %w", u.cfg.Name, redactErr(err))
		}
		tools = append(tools, t)
	}
	u.release(s, nil)
	// Does the upstream speak tasks itself? Asked with the client that
	// speaks them (the go-sdk's does not); kept open if it does.
	tc := newTaskConn(u)
	support, speaksTasks, err := tc.probe(ctx)
	if err != nil {
		return nil, fmt.Errorf("gateway: upstream %q: asking whether it speaks tasks: %w", u.cfg.Name, redactErr(err))
	}
	d := &discovery{tools: tools, support: support, speaksTasks: speaksTasks}
	if speaksTasks {
		d.tc = tc
	}
	return d, nil
}

// export registers the upstream's tools on the server: before it started
// (ts.AddRawTool, with their task support), or late with g.addTool, as
// plain tools.
func (g *Gateway) export(u *upstream, d *discovery, late bool) error {
	ts := g.ts
	tools, support, speaksTasks := d.tools, d.support, d.speaksTasks
	if late && d.tc != nil {
		d.tc.close() // a late tool is a plain call
		speaksTasks = false
	}
	if speaksTasks {
		u.tasks = d.tc
		u.log.Info("the upstream speaks tasks: its task-capable tools run as upstream tasks, re-attached after a crash")
	}
	for _, want := range u.cfg.Tools {
		if !slices.ContainsFunc(tools, func(t *mcp.Tool) bool { return t.Name == want }) {
			return fmt.Errorf("gateway: upstream %q has no tool %q (its tools: %s)", u.cfg.Name, want, toolNames(tools))
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	taken := func(name string) bool { return ts.HasTool(name) || g.late[name] }
	for _, t := range tools {
		if len(u.cfg.Tools) > 0 && !slices.Contains(u.cfg.Tools, t.Name) {
			continue
		}
		name := u.cfg.Prefix + t.Name
		if u.cfg.Prefix == "" && taken(name) {
			name = u.cfg.Name + "_" + t.Name
			u.log.Info("tool name taken; exported with the upstream's name", "tool", t.Name, "as", name)
		}
		if taken(name) {
			return fmt.Errorf("gateway: upstream %q: the tool name %q is taken (set a prefix)", u.cfg.Name, name)
		}
		p := u.cfg.Default
		if tp, ok := u.cfg.Policies[t.Name]; ok {
			p = tp
		}
		if p.Support == "" {
			p.Support = mcptask.Optional
		}
		exported := *t
		exported.Name = name
		exported.Meta = u.toolMeta(t)
		if exported.InputSchema == nil {
			exported.InputSchema = map[string]any{"type": "object"}
		}
		h := u.handler(t.Name, p)
		if late && p.Observe {
			// A shadow tool runs only as a task, whose support is set at
			// the start: exported as a plain call it would call the
			// upstream tool, the one thing a shadow never does.
			u.log.Warn("a shadow (observe) tool of an upstream that was down at the start is not exported until the next start", "tool", t.Name, "as", name)
			continue
		}
		if late {
			g.late[name] = true
			g.addTool(&exported, h)
			u.log.Warn("re-exported an upstream tool after the start: it runs as a plain call until the next start", "tool", t.Name, "as", name)
			continue
		}
		opts := mcptask.ToolOptions{Support: p.Support, Rerunnable: p.Rerunnable, MaxTTL: p.MaxTTL}
		switch {
		case p.MaxConcurrent > 0:
			opts.MaxConcurrent = p.MaxConcurrent // a queue of the tool's own
		case u.cfg.MaxConcurrent > 0:
			opts.MaxConcurrent, opts.Queue = u.cfg.MaxConcurrent, "upstream:"+u.cfg.Name
		}
		upstreamTasks := false
		s := support[t.Name]
		// A stdio upstream dies with mcptaskd, its tasks with it: nothing
		// to re-attach to after a crash, and its process's death is
		// better seen by a plain call. Its tools run as plain calls,
		// but those it only runs as tasks.
		stdio := u.cfg.URL == ""
		if p.Observe && (!speaksTasks || stdio || s == "" || s == "forbidden") {
			return fmt.Errorf("gateway: upstream %q: tool %q: observe needs a tool the upstream runs as a task over HTTP", u.cfg.Name, t.Name)
		}
		if p.Observe {
			if g.observed == nil {
				g.observed = map[string]bool{}
			}
			g.observed[name] = true
			exported.InputSchema = observeSchema
			exported.Description = "Shadow of " + t.Name + ": watches a task the upstream already runs, by its taskId; starts nothing."
		}
		if speaksTasks && (s == "required" || s == "optional" && !stdio) {
			// The upstream task's ID is durable before our client is
			// told of the task, and a crash re-attaches to it.
			upstreamTasks = true
			h = u.taskHandler(t.Name, p, h)
			opts.Cancel = u.cancelTask
			opts.Reattach = !stdio
			if p.Observe {
				opts.Cancel, opts.Support = nil, mcptask.Required
			}
			opts.AwaitExternalRef = DefaultAwaitExternalRef
			if p.Timeout > 0 {
				opts.AwaitExternalRef = min(p.Timeout, DefaultAwaitExternalRef)
			}
			if s == "required" && p.Support == mcptask.Optional {
				// A plain call of ours would be a plain call upstream,
				// which it refuses.
				opts.Support = mcptask.Required
			}
		}
		ts.AddRawTool(&exported, h, opts)
		u.log.Info("re-exported an upstream tool", "tool", t.Name, "as", name, "task", opts.Support, "rerunnable", p.Rerunnable, "upstreamTasks", upstreamTasks,
			"maxConcurrent", opts.MaxConcurrent, "queue", opts.Queue)
	}
	return nil
}

func toolNames(tools []*mcp.Tool) string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

// upstreamOnlyMeta are the _meta keys of an upstream's result that
// describe the upstream's own exchange with the gateway, not the result:
// the upstream's server software (a 2026-07-28 key, which names the
// server producing the response: mcptask's answer says its own), and the
// upstream's task (its ID is the gateway's reference, never shown).
var upstreamOnlyMeta = []string{"io.modelcontextprotocol/serverInfo", "io.modelcontextprotocol/related-task"}

// relayed returns an upstream's result as the gateway answers it: without
// the upstream's upstreamOnlyMeta keys (res is changed in place).
func relayed(res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil || res.Meta == nil {
		return res
	}
	for _, k := range upstreamOnlyMeta {
		delete(res.Meta, k)
	}
	if len(res.Meta) == 0 {
		res.Meta = nil
	}
	return res
}

// handler is the work of a re-exported tool: the upstream call.
func (u *upstream) handler(name string, p ToolPolicy) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if p.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeoutCause(ctx, p.Timeout, errTimeout)
			defer cancel()
		}
		tk := mcptask.FromContext(ctx)
		for attempt := 1; ; attempt++ {
			res, err, died := u.call(ctx, tk, name, req)
			switch {
			case !died:
				return relayed(res), err
			case !p.Rerunnable:
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
					"upstream %s died during the call of %s (its process exited or its connection broke: %v); the outcome is unknown, and %s is not declared rerunnable, so it was not called again",
					u.cfg.Name, name, redactErr(err), name)}
			case attempt >= maxCallAttempts:
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
					"upstream %s died during each of %d calls of %s (last: %v)", u.cfg.Name, attempt, name, redactErr(err))}
			}
			u.log.Warn("the upstream died during a call of a rerunnable tool; calling again", "tool", name, "attempt", attempt+1, "err", err)
			if tk != nil {
				_ = tk.SetStatusMessage(ctx, fmt.Sprintf("upstream %s died during the call; calling %s again (attempt %d of %d)", u.cfg.Name, name, attempt+1, maxCallAttempts))
			}
		}
	}
}

// maxCallAttempts bounds the calls of a rerunnable tool whose upstream
// dies during them.
const maxCallAttempts = 3

// call makes one upstream call of the tool name. died reports that the
// call reached the upstream and ended without its answer and without the
// call's own cancellation or timeout: the upstream process exited or the
// connection broke, and what the upstream did of the call is unknown.
func (u *upstream) call(ctx context.Context, tk *mcptask.Task, name string, req *mcp.CallToolRequest) (_ *mcp.CallToolResult, _ error, died bool) {
	key := callKey(tk, req)
	s, err := u.acquire(ctx, key, func() {
		// Only when the call has to wait: a status message is a
		// durable write.
		if tk != nil {
			_ = tk.SetStatusMessage(ctx, "waiting for a free session of "+u.cfg.Name)
		}
	})
	if err != nil {
		return nil, u.callError(ctx, name, err), false
	}
	s.begin(ctx, key, tk)
	params := &mcp.CallToolParams{Name: name}
	if req.Params != nil && len(req.Params.Arguments) > 0 {
		params.Arguments = req.Params.Arguments
	}
	params.SetProgressToken(s.token())
	// The upstream call gets the call's cancellation, not its values:
	// those of the server's own request (its session, say) are not
	// the upstream session's business.
	cctx, cancel := detach(ctx)
	cctx, span := u.startCall(cctx, ctx, name, req)
	if span.SpanContext().IsValid() {
		// The upstream continues the trace.
		if params.Meta == nil {
			params.Meta = mcp.Meta{}
		}
		tracing.ToMeta(cctx, params.Meta)
	}
	res, err := s.cs.CallTool(cctx, params)
	endCall(span, res, err)
	cancel()
	s.notes.settle(ctx) // the log lines sent before the answer are the call's
	lost := s.wasLost()
	s.end()
	u.release(s, err)
	if err == nil {
		return res, nil, false
	}
	// A JSON-RPC error is an answer (the upstream's own), or, with the
	// go-sdk's transport code, a request its transport could not send
	// (an HTTP upstream that refused the POST): the upstream is
	// unavailable, the call never ran. But the go-sdk says the same of a
	// POST that went out and whose connection broke before the answer:
	// that call may have run (lost). The end of the connection (EOF,
	// closed, reset) cut a call in flight. Anything else (an answer that
	// does not decode, say) is an error of that call, not a death.
	var je *jsonrpc.Error
	if ctx.Err() == nil && (lost && errors.As(err, &je) && je.Code == codeRejected || !errors.As(err, &je) && connectionLost(err)) {
		return nil, err, true
	}
	return nil, u.callError(ctx, name, err), false
}

// callKey names the requester of a call for the pool of sessions, which
// gives a session only to calls of the requester it first carried: the
// user of the call's bearer token; else, for a task, the task itself (the
// call of a re-run or of a queued task carries no token: its session
// serves no other task); else the anonymous requester (every anonymous
// requester may use the others' tasks anyway).
func callKey(tk *mcptask.Task, req *mcp.CallToolRequest) string {
	if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil && ex.TokenInfo.UserID != "" {
		return "user:" + ex.TokenInfo.UserID
	}
	if tk != nil {
		return taskKeyPrefix + tk.ID()
	}
	return "anonymous"
}

// taskKeyPrefix starts the key of a session that serves one task only.
const taskKeyPrefix = "task:"

// startCall starts the client span of a call of the upstream's tool name:
// in cctx (the call's context), parented on the span of ctx (the tool
// handler's: the task's run attempt) or else on the trace context of the
// request's _meta.
func (u *upstream) startCall(cctx, ctx context.Context, name string, req *mcp.CallToolRequest) (context.Context, trace.Span) {
	parent := ctx
	if !trace.SpanContextFromContext(ctx).IsValid() && req.Params != nil {
		parent = tracing.FromMeta(ctx, req.Params.Meta)
	}
	cctx = trace.ContextWithSpanContext(cctx, trace.SpanContextFromContext(parent))
	cctx, span := u.tracer.Start(cctx, tracing.SpanUpstream, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrUpstream, u.cfg.Name), attribute.String(tracing.AttrTool, name))
	}
	return cctx, span
}

// endCall ends the span of an upstream call with its outcome.
func endCall(span trace.Span, res *mcp.CallToolResult, err error) {
	if span.IsRecording() {
		switch {
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		case res != nil && res.IsError:
			span.SetAttributes(attribute.Bool(tracing.AttrToolError, true))
		}
	}
	span.End()
}

// connectionLost reports whether err says the upstream's connection
// ended: its process exited, or its network connection broke.
func connectionLost(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, mcp.ErrConnectionClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

var errTimeout = errors.New("the upstream call timed out")

// detach returns a context with ctx's cancellation (and its cause) but
// none of its values: those of the server's own request (its session,
// its protocol version) are not an upstream request's business.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithCancelCause(context.Background())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	return dctx, func() { stop(); cancel(nil) }
}

// callError is the error of a failed upstream call: the upstream's own
// JSON-RPC error as it is, else an internal error that names the
// upstream.
func (u *upstream) callError(ctx context.Context, name string, err error) error {
	if errors.Is(context.Cause(ctx), errTimeout) {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("upstream %s: %s: %v", u.cfg.Name, name, errTimeout)}
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code != codeRejected {
		return je
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("upstream %s unavailable: %v", u.cfg.Name, redactErr(err))}
}

// dialTimeout bounds the opening of one upstream session (a process that
// starts but never answers initialize, an HTTP upstream that hangs).
// While an upstream that could not be reached at Register is tried again,
// the bound doubles after each attempt that ran out of time, up to
// maxDialTimeout: an upstream that takes longer to start (npx under load)
// comes up all the same.
var dialTimeout = 30 * time.Second

// maxDialTimeout bounds the growing dial timeout of an upstream tried
// again.
var maxDialTimeout = 5 * time.Minute

// cancelGrace is how long the session of a cancelled upstream call stays
// open for the cancellation to reach the upstream.
const cancelGrace = time.Second

// codeRejected is the go-sdk's code of a request lost in its transport.
const codeRejected = wire.CodeRejectedByTransport

// acquire returns an idle session of the requester key (or one that has
// carried no call yet), opening one if the pool allows (closing an idle
// session of another requester if it must), or waits for one to free,
// calling waiting (if not nil) once before it waits.
func (u *upstream) acquire(ctx context.Context, key string, waiting func()) (*session, error) {
	for {
		u.mu.Lock()
		if u.closed {
			u.mu.Unlock()
			return nil, errors.New("the gateway is closing")
		}
		if s := u.takeIdleLocked(key); s != nil {
			u.mu.Unlock()
			return s, nil
		}
		var evicted *session
		if u.open >= u.cfg.MaxSessions && len(u.idle) > 0 {
			// Only other requesters' sessions idle: the oldest makes room.
			evicted = u.idle[0]
			u.idle = u.idle[1:]
			u.open--
		}
		if u.open < u.cfg.MaxSessions {
			u.open++
			u.mu.Unlock()
			if evicted != nil {
				evicted.cs.Close()
			}
			err := u.mayDial()
			var s *session
			if err == nil {
				// Not the call's values: the go-sdk reads the server
				// request's protocol version from them.
				dctx, cancel := detach(ctx)
				dctx, cancelT := context.WithTimeout(dctx, u.dialLimit())
				s, err = u.dial(dctx)
				cancelT()
				cancel()
				u.mu.Lock()
				if ctx.Err() == nil {
					u.failedLocked(err)
				}
			} else {
				u.mu.Lock()
			}
			if err != nil {
				u.open--
				u.signalLocked()
			}
			u.mu.Unlock()
			return s, err
		}
		freed := u.freed
		u.mu.Unlock()
		if waiting != nil {
			waiting()
			waiting = nil
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// release puts a session back after a call that ended with err. A
// session whose call did not end with an answer of the upstream's (its
// connection failed, or the call was cancelled or timed out, and the
// upstream may still be working on it, and could still send requests that
// would be taken for the next call's) is closed instead: a stdio
// upstream's process with it.
func (u *upstream) release(s *session, err error) {
	var je *jsonrpc.Error
	answered := err == nil || (errors.As(err, &je) && je.Code != codeRejected)
	u.mu.Lock()
	if answered {
		u.failedLocked(nil)
	}
	// A session that served a task of its own serves no other; one whose
	// upstream sent a request outside any call is not trusted with one.
	if answered && (strings.HasPrefix(s.key, taskKeyPrefix) || s.isTainted()) {
		u.open--
		u.signalLocked()
		u.mu.Unlock()
		s.cs.Close()
		return
	}
	if !answered || u.closed {
		u.open--
		if !answered && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			// The session died mid-call (a stdio upstream's process
			// exited): a failure, for the restart backoff.
			u.failedLocked(err)
		}
		u.signalLocked()
		u.mu.Unlock()
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			// The go-sdk sends notifications/cancelled on its own, just
			// after the call returns: close once it had time to go out.
			time.AfterFunc(cancelGrace, func() { s.cs.Close() })
			return
		}
		s.cs.Close()
		return
	}
	u.idle = append(u.idle, s)
	u.signalLocked()
	u.mu.Unlock()
}

// drop closes s if it is idle (else its call's release closes it), once
// the answer to the request it is handling had the time to go out.
func (u *upstream) drop(s *session) {
	u.mu.Lock()
	i := slices.Index(u.idle, s)
	if i >= 0 {
		u.idle = slices.Delete(u.idle, i, i+1)
		u.open--
		u.signalLocked()
	}
	u.mu.Unlock()
	if i >= 0 {
		time.AfterFunc(cancelGrace, func() { s.cs.Close() })
	}
}

// takeIdleLocked takes from the idle sessions the newest one of the
// requester key, or else one that has carried no call, if any.
func (u *upstream) takeIdleLocked(key string) *session {
	for _, fresh := range []bool{false, true} {
		for i := len(u.idle) - 1; i >= 0; i-- {
			s := u.idle[i]
			if s.isTainted() {
				continue // drop closes it
			}
			if (fresh && s.key == "") || (!fresh && s.key == key && key != "") {
				u.idle = slices.Delete(u.idle, i, i+1)
				return s
			}
		}
	}
	return nil
}

func (u *upstream) signalLocked() {
	close(u.freed)
	u.freed = make(chan struct{})
}

// health is nil when the upstream answered last, else why it did not
// (URLs redacted).
func (u *upstream) health() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.pending != nil:
		return fmt.Errorf("not reached since the start, its tools not registered: %w", redactErr(u.pending))
	case u.lastErr != nil:
		return redactErr(u.lastErr)
	}
	return nil
}

// setPending records why the upstream's tools are not registered yet
// (nil: they are).
func (u *upstream) setPending(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.pending = err
}

// dialLimit bounds the opening of a session now.
func (u *upstream) dialLimit() time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.dialFor > 0 {
		return u.dialFor
	}
	return dialTimeout
}

// nextAttempt is when a dial may be tried again.
func (u *upstream) nextAttempt() time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.retryAt
}

func (u *upstream) close() error {
	u.mu.Lock()
	if !u.closed {
		close(u.done)
	}
	u.closed = true
	idle := u.idle
	u.idle = nil
	u.mu.Unlock()
	var errs []error
	for _, s := range idle {
		errs = append(errs, s.cs.Close())
	}
	if u.tasks != nil {
		errs = append(errs, u.tasks.close())
	}
	return errors.Join(errs...)
}
