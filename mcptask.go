// Package mcptask adds durable MCP Tasks to servers built on the official Go
// SDK (github.com/modelcontextprotocol/go-sdk). A complete server:
//
//	package main
//
//	import (
//		"context"
//		"log"
//		"net/http"
//
//		"github.com/mcptask/mcptask"
//		"github.com/mcptask/mcptask/engine"
//		"github.com/mcptask/mcptask/store/sqlite"
//		"github.com/modelcontextprotocol/go-sdk/mcp"
//	)
//
//	type Args struct {
//		Ref string `json:"ref"`
//	}
//
//	func runPipeline(ctx context.Context, req *mcp.CallToolRequest, in Args) (*mcp.CallToolResult, any, error) {
//		if t := mcptask.FromContext(ctx); t != nil { // running as a task
//			t.SetStatusMessage(ctx, "stage 2 of 5: unit tests")
//		}
//		// ... the long work; ctx is cancelled if the client cancels the task
//		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Ref + ": passed"}}}, nil, nil
//	}
//
//	func main() {
//		st, err := sqlite.Open("tasks.db", nil) // the durable store
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer st.Close()
//		eng, err := engine.New(engine.Options{Store: st})
//		if err != nil {
//			log.Fatal(err)
//		}
//		srv := mcp.NewServer(&mcp.Implementation{Name: "ci", Version: "1"}, nil)
//		ts, err := mcptask.New(srv, eng, nil)
//		if err != nil {
//			log.Fatal(err)
//		}
//		mcptask.AddTool(ts, &mcp.Tool{Name: "run_pipeline", Description: "Runs the CI pipeline"},
//			runPipeline, mcptask.ToolOptions{Support: mcptask.Optional})
//		if err := ts.Start(context.Background()); err != nil { // recovers unfinished tasks
//			log.Fatal(err)
//		}
//		defer ts.Close(context.Background())
//		http.Handle("/mcp", ts.Handler(nil)) // both wires, one endpoint
//		log.Fatal(http.ListenAndServe("127.0.0.1:8080", nil))
//	}
//
// A server installs tasks with [New], registers its tools with [AddTool]
// (or marks tools registered otherwise with [Server.SetTaskSupport]), runs
// them with [Server.Start] and [Server.Close], and serves Streamable HTTP
// through [Server.Handler] or one client over stdio with [Server.Run]. Tool
// handlers stay ordinary go-sdk handlers; when a call runs as a task,
// [FromContext] gives the handler its [Task]: it can set a status message
// and ask the client for input, and its context is cancelled when the
// client cancels the task.
//
// Both task wires are served, chosen per request: the 2026-07-28
// io.modelcontextprotocol/tasks extension and the 2025-11-25 experimental
// tasks. The tasks live in an engine ([engine.Engine]) on a durable store
// (store/sqlite, or store/postgres for several servers sharing one task
// space), so they survive restarts of the server.
package mcptask

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/internal/adapter/wire2025"
	"github.com/mcptask/mcptask/internal/adapter/wire2026"
	"github.com/mcptask/mcptask/internal/delivery"
	"github.com/mcptask/mcptask/internal/rollout"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
)

// Options configures a [Server]. The zero value is usable.
type Options struct {
	// Owner returns the requester a request acts for; tasks are bound to
	// it and invisible to any other requester. Nil means: the
	// authenticated user of the request's bearer token if any
	// ([task.TokenOwner]), else an anonymous requester
	// ([task.AnonymousOwner]) scoped to the request's 2025-11-25 session,
	// if it has one.
	Owner func(ctx context.Context, req mcp.Request) task.Owner
	// Logger receives the adapter's records. Nil means slog.Default().
	Logger *slog.Logger
	// Limits bounds what each requester may do. The zero value sets no
	// limit; see DefaultLimits.
	Limits Limits
	// Notifications configures the task notifications pushed to clients.
	// The zero value uses the defaults.
	Notifications Notifications
	// ResultLinkBytes, if positive, is the size (of its JSON) above which
	// a completed task's result is answered (tasks/get on 2026-07-28,
	// tasks/result on 2025-11-25) as a result with one resource_link
	// content to the task's result resource (wire.ResultURI), which its
	// owner reads with resources/read, instead of inline. Zero answers
	// every result inline.
	ResultLinkBytes int
	// TracerProvider receives the server's OpenTelemetry spans (see
	// docs/tracing.md): mcptask.create for a tools/call becoming a task,
	// mcptask.run for each run attempt of a task's work, mcptask.input
	// for a wait on the client's answer, parented on the W3C trace
	// context (traceparent, tracestate) of the call's _meta. When set, it
	// also receives a span per store operation of the engine
	// (mcptask.store.<op>, see engine.Options.TracerProvider). Nil means
	// otel.GetTracerProvider() for the create, run and input spans, which
	// records nothing unless the program installed a provider, and no
	// store spans (the store is then called directly).
	TracerProvider trace.TracerProvider
	// FastLane turns on the fast lane of [Server.Handler]: the
	// 2026-07-28 tasks/get, tasks/update, tasks/cancel and tasks/delete,
	// the 2026-07-28 tools/call answered with a task (of a tool added with
	// AddTool or AddRawTool), and the 2025-11-25 tasks/get and
	// tasks/result of a finished task on a session, are answered without
	// the go-sdk's per-request machinery (a get in a fifth to two fifths
	// of the time, a tenth of the memory; a create in a sixth of the
	// memory; see docs/perf). A task created on the lane calls its tool
	// through the go-sdk's handler chain (argument validation, typed
	// handler) on a session of the server's own, as a re-run does. The
	// answers are the same byte for byte (the lane
	// only takes the requests it answers exactly as the go-sdk would), but
	// receiving middleware the program added to the go-sdk server does
	// not see those requests (mcptask's own handling, limits, audit and
	// metrics all run): turn it on when the server has none, as mcptaskd
	// does. A server with an Owner function has no fast lane: Owner may
	// look at anything in the request, which the lane does not build
	// as the go-sdk does. The 2025-11-25 part needs no EventStore in the
	// handler's options (the go-sdk's event IDs cannot be reproduced).
	FastLane bool
	// CorrelationKeys are the host correlation keys read from the _meta
	// of a tools/call that becomes a task: each key present with a
	// non-empty string value is stored with the task
	// (task.Task.Correlation) and the ledger operations its work records,
	// shown by tasks/get under wire.MetaCorrelation on both wires, and
	// recorded by the audit trail. Values of other types are ignored; a
	// value longer than task.MaxCorrelationValue bytes refuses the call
	// with invalid params (-32602), rather than store a cut ID. Nil means
	// [DefaultCorrelationKeys]; an empty non-nil slice reads none. At most
	// task.MaxCorrelationKeys keys of at most task.MaxCorrelationKey
	// bytes each (New refuses more).
	CorrelationKeys []string
	// Events configures the MCP Events the server serves: task status
	// and output events by events/poll and events/stream, and by
	// webhook when Events.Webhooks is set (docs/events.md).
	Events Events
}

// DefaultCorrelationKeys returns the host correlation keys a server reads
// when Options.CorrelationKeys is nil: Claude Code's tool-use ID
// (wire.MetaClaudeCodeToolUseID, "claudecode/toolUseId").
func DefaultCorrelationKeys() []string { return []string{wire.MetaClaudeCodeToolUseID} }

// Server serves MCP Tasks for one mcp.Server from one engine.
type Server struct {
	mcp  *mcp.Server
	eng  *engine.Engine
	core *adapter.Core
	w26  *wire2026.Wire
	w25  *wire2025.Wire
	// traceStore: the engine makes store spans (Options.TracerProvider
	// set), which tasks/* requests parent on their _meta trace context.
	traceStore bool
	// fastLane: Handler serves the tasks requests its fast lane takes
	// (internal/httpedge).
	fastLane bool
	// fastServed counts the requests answered on the fast lane (for
	// tests).
	fastServed atomic.Uint64
	// next is the rest of the go-sdk's handler chain below the
	// middleware, and lane the session the work of a task created on the
	// fast lane runs on (see laneCall).
	next mcp.MethodHandler
	lane adapter.OwnSession

	mu      sync.RWMutex
	tools   map[string]ToolOptions
	schemas map[string]*jsonschema.Resolved // input schemas of tools added with AddTool
	// laneTools: the tools added with AddTool or AddRawTool, each with
	// whether the fast lane may create its tasks (ToolPolicy.Lane).
	laneTools map[string]bool
	// outputSchemas holds the resolved OutputSchema of each tool
	// (*resolvedSchema), resolved at its first Emit.
	resolvedOutputs sync.Map
	started         bool
	// fleet is the fleet's switches as last read from the store, with
	// localDrain this instance's own drain (SetLocalDrain); stopControls
	// ends the service that reads them (set by Start).
	fleet   *rollout.Watcher
	applyMu sync.Mutex // serializes applyControls
	// stepApprovals are the children's own approvals seen (key →
	// *Approval, see approvalOf); swept is set by the first sweep of
	// expired approvals, which reads every held approval.
	stepApprovals sync.Map
	swept         atomic.Bool
	// jobStart is the name of the job tools' start tool ("" without job
	// tools), whose calls' unknown effects are those of the tool they
	// start (see effectTool).
	jobStart     atomic.Value
	localDrain   rollout.Drain
	stopControls func()

	closeOnce sync.Once
	closeErr  error

	// deliverer sends webhook deliveries and applies the events'
	// retention; stopEvents ends it (set by Start).
	deliverer  *delivery.Service
	publishAll []string // Events.PublishLog
	noDelivery bool     // Events.Workers < 0
	stopEvents func()
	// streamsCtx ends the events/stream streams (CloseStreams).
	streamsCtx    context.Context
	cancelStreams context.CancelFunc
}

// New installs tasks on srv, backed by eng: the receiving middleware that
// turns tool calls into tasks, the tasks/* methods of both wires, the
// tasks capability of 2025-11-25 and the tasks extension in
// server/discover, and, when eng's store keeps task logs, the resource
// template of the task logs (wire.LogURITemplate, read by each task's
// owner only; the server then advertises resources). It installs the server's recovery policy on eng (a task
// of a tool declared Rerunnable is run again, any other fails "outcome
// unknown"), so eng must have none: one engine serves one Server. Call it
// once per mcp.Server, then register the tools, then [Server.Start].
func New(srv *mcp.Server, eng *engine.Engine, opts *Options) (*Server, error) {
	if srv == nil || eng == nil {
		return nil, errors.New("mcptask: New needs an mcp.Server and an engine")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.CorrelationKeys == nil {
		o.CorrelationKeys = DefaultCorrelationKeys()
	}
	if err := adapter.CheckCorrelationKeys(o.CorrelationKeys); err != nil {
		return nil, fmt.Errorf("mcptask: Options.CorrelationKeys: %w", err)
	}
	s := &Server{mcp: srv, eng: eng, tools: map[string]ToolOptions{}, schemas: map[string]*jsonschema.Resolved{}, laneTools: map[string]bool{}}
	s.fastLane = o.FastLane && o.Owner == nil
	var direct func(context.Context, *mcp.CallToolParamsRaw) (mcp.Result, error, bool)
	if s.fastLane {
		// No receiving middleware of the program's to see re-runs (see
		// Options.FastLane).
		direct = s.callDirect
	}
	s.core = adapter.NewCore(adapter.Config{
		Server: srv,
		Engine: eng,
		Logger: o.Logger,
		Owner:  o.Owner,
		Tool:   s.toolPolicy,
		Links:  s.toolLinks,
		Gate:   s.gateMeta,
		Limits: adapter.Limits(o.Limits),

		ResultLinkBytes: o.ResultLinkBytes,
		TracerProvider:  o.TracerProvider,
		CorrelationKeys: o.CorrelationKeys,
		Direct:          direct,
	})
	s.fleet = rollout.NewWatcher(eng.Store(), ControlsInterval, s.core.Log(), s.applyControls)
	// The store spans: only with a provider set here, so that a server
	// without one calls its store directly.
	if err := eng.SetHooks(engine.Hooks{
		Recover:        s.core.Recover,
		Reconcile:      s.reconcile,
		Cancel:         s.cancelWork,
		WorkOf:         s.core.WorkOf,
		Spawn:          s.core.Spawn,
		Hold:           s.queueHeld,
		PublishLog:     s.publishLog,
		CheckEmit:      s.checkEmit,
		TracerProvider: o.TracerProvider,
	}); err != nil {
		return nil, fmt.Errorf("mcptask: %w", err)
	}
	s.traceStore = o.TracerProvider != nil
	s.w26 = wire2026.New(s.core, o.Notifications.options())
	s.w25 = wire2025.New(s.core, o.Notifications.options())
	if err := s.addMethods(); err != nil {
		return nil, err
	}
	s.streamsCtx, s.cancelStreams = context.WithCancel(context.Background())
	s.setupEvents(o.Events)
	if err := s.addApprovalMethods(); err != nil {
		return nil, err
	}
	if err := s.addEventsMethods(); err != nil {
		return nil, err
	}
	// The task logs: a resource of each task, read by its owner only.
	srv.AddResourceTemplate(adapter.LogTemplate(), s.core.ReadLogResource)
	if o.ResultLinkBytes > 0 {
		srv.AddResourceTemplate(adapter.ResultTemplate(), s.core.ReadResultResource)
	}
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		s.next = next // what the fast lane's tasks call (laneCall)
		return s.middleware(next)
	})
	return s, nil
}

// TracerProvider returns the provider of the server's spans
// (Options.TracerProvider, else the global one). The gateway and the HTTP
// job tools trace their calls with it.
func (s *Server) TracerProvider() trace.TracerProvider { return s.core.TracerProvider() }

// Engine returns the engine the server runs tasks on.
func (s *Server) Engine() *engine.Engine { return s.eng }

// Start starts the engine ([engine.Engine.Run]): it resolves the tasks a
// previous process left unfinished by the tools' recovery policy
// (re-running those of Rerunnable tools, failing the others "outcome
// unknown"), and starts the lease renewal, takeover and sweeping of
// expired tasks. Register every tool before Start: the recovery asks each
// tool whether it may run again. Call it once, before serving; a Start that
// fails leaves the Server unusable (Close it, and build a new one).
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("mcptask: Server.Start called twice")
	}
	s.started = true
	caps := map[string]int{}
	var err error
	for _, name := range slices.Sorted(maps.Keys(s.tools)) {
		o := s.tools[name]
		q := o.queue(name)
		if q == "" {
			continue
		}
		if c, ok := caps[q]; ok && c != o.MaxConcurrent {
			err = fmt.Errorf("mcptask: the tools of queue %q give it different caps (%d and %d)", q, c, o.MaxConcurrent)
			break
		}
		caps[q] = o.MaxConcurrent
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	for q, c := range caps {
		if err := s.eng.SetQueue(q, c); err != nil {
			return fmt.Errorf("mcptask: %w", err)
		}
	}
	if err := s.eng.Run(ctx); err != nil {
		return err
	}
	s.startEvents()
	s.startControls()
	return nil
}

// Close shuts the engine down ([engine.Engine.Shutdown]): no new task is
// accepted, running tasks may finish until ctx is done, then they are
// stopped and resolved by their recovery policy (Rerunnable ones run again
// at the next start, the others fail "outcome unknown"). Every call waits
// for that shutdown and returns its result, so the caller may close the
// engine's store (which Close leaves open) once Close returns.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.CloseStreams()
		if s.stopEvents != nil {
			s.stopEvents()
		}
		if s.stopControls != nil {
			s.stopControls()
		}
		s.closeErr = s.eng.Shutdown(ctx)
		s.lane.Close()
	})
	return s.closeErr
}

// CloseStreams ends the long-lived notification streams of [Server.Handler]:
// each subscriptions/listen stream with its result, and the standalone GET
// streams of 2025-11-25 sessions. An http.Server's Shutdown waits for
// active requests, these included: register it with RegisterOnShutdown.
// [Server.Close] calls it too.
func (s *Server) CloseStreams() {
	s.cancelStreams()
	s.w26.Close()
	s.w25.Close()
}

// Run serves one client on t (e.g. &mcp.StdioTransport{}) until the client
// disconnects or ctx is done. The connection carries the 2025-11-25 `task`
// parameter of tools/call (which the go-sdk would drop) and receives a
// notifications/tasks/status at each status change of the 2025-11-25
// tasks created on it.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	return s.w25.Serve(ctx, s.mcp, t)
}

// reconcile is the engine's Reconcile: the task's tool's
// ToolOptions.Reconcile, or engine.ErrNoReconcile.
func (s *Server) reconcile(ctx context.Context, t *task.Task, op task.Operation) (task.OpState, string, error) {
	s.mu.RLock()
	fn := s.tools[t.Tool].Reconcile
	s.mu.RUnlock()
	if fn == nil {
		return "", "", engine.ErrNoReconcile
	}
	return fn(ctx, op)
}

// toolLinks is the adapter's Config.Links: the task's tool's
// ToolOptions.Links, nil for a tool without them (one map lookup per
// tasks/get, not the tool's whole policy).
func (s *Server) toolLinks(t *task.Task) map[string]string {
	s.mu.RLock()
	fn := s.tools[t.Tool].Links
	s.mu.RUnlock()
	if fn == nil {
		return nil
	}
	return fn(t)
}

// cancelWork is the engine's Hooks.Cancel: the task's tool's
// ToolOptions.Cancel, nil for a tool without one.
func (s *Server) cancelWork(ctx context.Context, t *task.Task) error {
	s.mu.RLock()
	fn := s.tools[t.Tool].Cancel
	s.mu.RUnlock()
	if fn == nil {
		return nil
	}
	return fn(ctx, t)
}

// Links returns the links t's tool gives about it (ToolOptions.Links:
// what tasks/get shows under wire.MetaLinks), nil for none: e.g. for an
// operator's view of the task.
func (s *Server) Links(t *task.Task) map[string]string { return s.core.Links(t) }

// RunAgain makes the call of the finished task t (as read from the
// store) again, as a new task of the same owner (same tool, arguments and
// wire, without the old call's _meta): an operator's re-run, e.g. of a
// build that failed for a reason since fixed. nonce (e.g. a token of the
// operator's form) makes the re-run's idempotency key: the same t and
// nonce return the task made the first time (a resubmitted form starts
// nothing more); "" picks a fresh one. It is refused, with an error that
// says why, for a task that has not ended, a tool that no longer runs as
// a task, or a task with an operation not settled on the ledger
// (reconcile it first); and as any creation is, by the drain switch and
// the limits.
func (s *Server) RunAgain(ctx context.Context, t *task.Task, nonce string) (*task.Task, error) {
	if nonce == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		nonce = hex.EncodeToString(b)
	}
	sum := sha256.Sum256([]byte(string(t.ID) + "\x00" + nonce))
	return s.core.RunAgain(ctx, t, "rerun-"+hex.EncodeToString(sum[:16]))
}

// RunAgainError is why [Server.RunAgain] refused to run a task's call
// again: its Reason says it in words.
type RunAgainError = adapter.RunAgainError
