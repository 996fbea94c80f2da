// Package adapter holds what the server sides of the two task wires share:
// the [Wire] shape each of them implements, the [Core] they are built on
// (engine, requester, tool policies, limits, audit hooks, the mapping of
// engine errors to JSON-RPC errors, task creation and the in-process
// re-run of recovered tasks), and the [Request] a wire's method gets.
//
// The wires themselves live in the sub-packages wire2026 (the 2026-07-28
// io.modelcontextprotocol/tasks extension) and wire2025 (the 2025-11-25
// experimental tasks). Each imports this package and never the other; the
// root package mcptask picks one wire per request and dispatches to its
// [Table].
package adapter

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/rollout"
	"github.com/mcptask/mcptask/internal/tracing"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// Wire is the server side of one protocol revision.
type Wire interface {
	// Version is the protocol revision the wire serves.
	Version() string
	// Table maps the methods the wire answers to their handlers: always
	// tools/call and every tasks/* method (a method the revision does not
	// have answers with the wire's own error), plus the methods whose
	// results the wire decorates (initialize, tools/list, server/discover).
	Table() Table
}

// Table maps method names to the handlers of one wire.
type Table map[string]Handler

// Handler answers one request on one wire.
type Handler func(ctx context.Context, r *Request) (mcp.Result, error)

// Request is a request as a wire's handler gets it.
type Request struct {
	// Method is the request's method.
	Method string
	// Req is the request as the go-sdk decoded it.
	Req mcp.Request
	// Next is the rest of the go-sdk's handler chain: for tools/call the
	// tool itself, for decorated methods the go-sdk's own answer.
	Next mcp.MethodHandler
	// Params are the params of a tasks/* request as the go-sdk decoded
	// them (into the union of both wires' shapes for the method; a nil
	// pointer when the request had none); each wire reads them in its own
	// shapes with [Request.Decode].
	Params mcp.Params
	// Session is the session of a tasks/* request, if it has one.
	Session *mcp.ServerSession
}

// Meta returns the request's _meta, nil if it has none.
func (r *Request) Meta() map[string]any { return MetaOf(r.Req) }

// Decode sets p (a pointer to a params shape of the wire) from the
// params of a tasks/* request: copied as they are when the go-sdk decoded
// exactly that shape, else through their JSON; absent params leave p at
// its zero value.
func (r *Request) Decode(p any) error {
	src := reflect.ValueOf(r.Params)
	if r.Params == nil || (src.Kind() == reflect.Pointer && src.IsNil()) {
		return nil
	}
	if dst := reflect.ValueOf(p); dst.Type() == src.Type() {
		dst.Elem().Set(src.Elem())
		return nil
	}
	b, err := json.Marshal(r.Params)
	if err == nil {
		err = json.Unmarshal(b, p)
	}
	if err != nil {
		return InvalidParams("invalid params for " + r.Method + ": " + err.Error())
	}
	return nil
}

// CallParams returns the params of a tools/call, or nil if the go-sdk
// decoded none.
func (r *Request) CallParams() *mcp.CallToolParamsRaw {
	p, _ := r.Req.GetParams().(*mcp.CallToolParamsRaw)
	return p
}

// MetaOf returns the _meta of req's params, nil when it has no params.
func MetaOf(req mcp.Request) map[string]any {
	if req == nil {
		return nil
	}
	p := req.GetParams()
	if p == nil {
		return nil
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil // params absent or null: the go-sdk passes a nil pointer
	}
	return p.GetMeta()
}

// Support is a tool's task support on both wires.
type Support string

// The task support levels, as both wires name them.
const (
	Forbidden Support = "forbidden"
	Optional  Support = "optional"
	Required  Support = "required"
)

// ToolPolicy is how one tool runs as a task.
type ToolPolicy struct {
	// Support is the tool's task support; "" means Forbidden.
	Support Support
	// Rerunnable says a task of the tool found unfinished is run again.
	Rerunnable bool
	// Reattach says a task of the tool found unfinished with an external
	// reference is run again, for its handler to re-attach to its work.
	Reattach bool
	// AwaitExternalRef, if positive, bounds how long the creation of a
	// task waits for its work to record its external reference (see
	// engine.StartSpec.AwaitExternalRef).
	AwaitExternalRef time.Duration
	// Synchronous, if set, says a call must be answered synchronously
	// although the client accepts a task.
	Synchronous func(*mcp.CallToolRequest) bool
	// Lane says the tool's definition is known (added with mcptask's
	// AddTool or AddRawTool) and declares no parameter headers
	// (x-mcp-header, which the go-sdk checks against the request's HTTP
	// headers before any middleware): the fast lane may create its tasks.
	Lane bool
	// CheckArguments, if set, checks a call's arguments against the
	// tool's input schema before a task is created for it (see
	// [Core.RejectedArguments]).
	CheckArguments func(args json.RawMessage) error
	// Queue names the concurrency queue of the tool's tasks, "" for none
	// (see engine.Engine.SetQueue).
	Queue string
	// MaxTTL, if positive, caps the retention of the tool's tasks.
	MaxTTL time.Duration
	// Fallback is what the tool's task-augmented calls get when the
	// fleet's switches do not serve them as tasks ("": the switch's).
	Fallback rollout.Fallback
	// Approval, if set, holds each new task of the tool for an approval
	// (engine gate GateApproval): it returns the status message of a
	// task created at now while it waits.
	Approval func(now time.Time) string
}

// OnLane reports whether the fast lane may create the tasks of the tool
// whose policy p is, if its wire answers the call with a task: it supports
// tasks, its definition is known and declares no parameter headers
// (Lane), no Synchronous function may answer a call synchronously, and
// its create does not wait for the work's external reference (the work's
// notifications meanwhile go on the call's own stream).
func (p ToolPolicy) OnLane() bool {
	return p.Support != Forbidden && p.Lane && p.Synchronous == nil && p.AwaitExternalRef <= 0
}

// The gates of held tasks (see engine.StartSpec.Gate).
const (
	// GateApproval holds a task until an approver approves it (its work
	// then starts) or denies it, or it expires.
	GateApproval = engine.GatePrefix + "approval"
	// GateHandoff holds a task until an operator records its outcome by
	// hand.
	GateHandoff = engine.GatePrefix + "handoff"
)

// Config configures a [Core].
type Config struct {
	// Server is the go-sdk server the tools are registered on.
	Server *mcp.Server
	// Engine runs the tasks.
	Engine *engine.Engine
	// Logger receives the adapter's records; nil means slog.Default().
	Logger *slog.Logger
	// Owner returns the requester of a request; nil means [DefaultOwner].
	Owner func(ctx context.Context, req mcp.Request) task.Owner
	// Tool returns the policy of a tool by name.
	Tool func(name string) ToolPolicy
	// Links, if set, returns the links a stored task's tool gives about
	// it (see wire.MetaLinks), nil for none: asked in every tasks/get,
	// so it must be quick.
	Links func(*task.Task) map[string]string
	// Gate, if set, returns the _meta entries that describe a task held
	// in a gate (GateApproval, GateHandoff): who may release it and
	// until when. Asked for held tasks only.
	Gate func(*task.Task) map[string]any
	// Direct, if set, calls a tool for a re-run (a recovered task, a
	// task that waited in its queue) directly through the go-sdk's
	// handler chain below the server's middleware, instead of through an
	// in-memory client session, which costs a connection per run: the
	// tool's argument validation and typed handler run alike, receiving
	// middleware does not see the call. ok false means it could not call
	// (the in-memory session is then used).
	Direct func(ctx context.Context, p *mcp.CallToolParamsRaw) (res mcp.Result, err error, ok bool)
	// Limits bounds each requester.
	Limits Limits
	// ResultLinkBytes, if positive, is the size above which a completed
	// task's result is answered as a link to its result resource instead
	// of inline (see [Core.Presented]).
	ResultLinkBytes int
	// TracerProvider makes the spans of task creation, runs and input
	// waits (see [Core.Tracer]); nil means otel.GetTracerProvider(), a
	// no-op unless the program installed one.
	TracerProvider trace.TracerProvider
	// CorrelationKeys are the host correlation keys read from a call's
	// _meta and stored with the task it creates (see [Core.Correlation]);
	// none when empty. The caller resolves any default and checks them
	// ([CheckCorrelationKeys]).
	CorrelationKeys []string
}

// Core is what both wires are built on.
type Core struct {
	srv    *mcp.Server
	eng    *engine.Engine
	log    *slog.Logger
	owner  func(ctx context.Context, req mcp.Request) task.Owner
	tool   func(name string) ToolPolicy
	links  func(*task.Task) map[string]string // Config.Links
	gate   func(*task.Task) map[string]any    // Config.Gate
	limits limiters
	nonce  string                                                                  // authenticates in-process re-runs
	direct func(context.Context, *mcp.CallToolParamsRaw) (mcp.Result, error, bool) // Config.Direct
	// resultLink is Config.ResultLinkBytes.
	resultLink int
	// tp and its tracer make the adapter's spans (see trace.go).
	tp     trace.TracerProvider
	tracer trace.Tracer
	// runSpans holds the span of each re-run attempt in progress, by
	// task ID, for RunAttached.
	runSpans sync.Map

	rollout atomic.Pointer[rollout.State] // the fleet's switches; nil: none

	corrKeys []string // Config.CorrelationKeys

	events *eventsState // SetEvents
	// defaultOwner: owner is DefaultOwner.
	defaultOwner bool
}

// SyncFallback reports whether a task-augmented call of the tool name,
// whose policy is p, is answered synchronously instead of as a task: the
// fleet's switches (see package rollout) do not serve it as a task now,
// its fallback is sync, and the tool may run without a task (Optional).
// Both wires ask it at the one point where they would create a task.
func (c *Core) SyncFallback(ctx context.Context, req mcp.Request, name string, p ToolPolicy) bool {
	why, sync := c.syncFallback(ctx, req, name, p)
	if !sync {
		return false
	}
	c.eng.Observer().CallRouted(name, "sync")
	c.log.Debug("tool called as a task answered synchronously (fallback sync)", "tool", name, "why", why)
	return true
}

// FallsBackSync is SyncFallback without its metrics and log: whether the
// call would be answered synchronously.
func (c *Core) FallsBackSync(ctx context.Context, req mcp.Request, name string, p ToolPolicy) bool {
	_, sync := c.syncFallback(ctx, req, name, p)
	return sync
}

func (c *Core) syncFallback(ctx context.Context, req mcp.Request, name string, p ToolPolicy) (rollout.Why, bool) {
	st := c.rollout.Load()
	if st == nil || p.Support != Optional {
		return "", false
	}
	owner := c.Requester(ctx, req)
	d := st.Decide(name, owner, p.Fallback)
	if d.Task() || d.Fallback != rollout.Sync {
		return "", false
	}
	if key, err := IdempotencyKey(MetaOf(req)); err == nil && key != "" {
		if raw, err := json.Marshal(req.GetParams()); err == nil && c.retryOf(ctx, owner, key, name, raw) != nil {
			return "", false // a retry of a call that made a task: the task
		}
	}
	return d.Why, true
}

// SetRollout sets the fleet's switches as this instance applies them
// (nil: every call is served as a task).
func (c *Core) SetRollout(st *rollout.State) { c.rollout.Store(st) }

// Rollout returns the fleet's switches as this instance applies them.
func (c *Core) Rollout() *rollout.State { return c.rollout.Load() }

// NewCore returns the core of cfg.
func NewCore(cfg Config) *Core {
	c := &Core{
		srv:    cfg.Server,
		eng:    cfg.Engine,
		log:    cfg.Logger,
		owner:  cfg.Owner,
		tool:   cfg.Tool,
		links:  cfg.Links,
		gate:   cfg.Gate,
		limits: newLimiters(cfg.Limits),
		nonce:  string(task.NewID()),
		direct: cfg.Direct,

		resultLink: cfg.ResultLinkBytes,
		corrKeys:   slices.Clone(cfg.CorrelationKeys),
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	c.tp, c.tracer = tp, tp.Tracer(tracing.TracerName)
	if c.owner == nil {
		c.owner, c.defaultOwner = DefaultOwner, true
	}
	if c.tool == nil {
		c.tool = func(string) ToolPolicy { return ToolPolicy{Support: Forbidden} }
	}
	return c
}

// Engine returns the engine the tasks run on.
func (c *Core) Engine() *engine.Engine { return c.eng }

// Log returns the adapter's logger.
func (c *Core) Log() *slog.Logger { return c.log }

// Tool returns the policy of the tool name (Forbidden support when the
// tool has none). A tools/call looks it up once, under the server's lock,
// and passes it down (StartTask, RejectedArguments, SyncFallback).
func (c *Core) Tool(name string) ToolPolicy {
	p := c.tool(name)
	if p.Support == "" {
		p.Support = Forbidden
	}
	return p
}

// Requester returns the requester a request acts for.
func (c *Core) Requester(ctx context.Context, req mcp.Request) task.Owner {
	if o, ok := ctx.Value(sessionOwnerKey{}).(task.Owner); ok && c.defaultOwner {
		return o
	}
	return c.owner(ctx, req)
}

type sessionOwnerKey struct{}

// WithSessionRequester returns ctx for a request of the 2025-11-25
// session sid served outside the go-sdk (no session at hand): without a
// bearer token, its requester is the session's anonymous one, as
// DefaultOwner would say (a server with an Owner function decides
// itself).
func WithSessionRequester(ctx context.Context, sid string) context.Context {
	return context.WithValue(ctx, sessionOwnerKey{}, task.AnonymousOwner(sid))
}

// DefaultOwner is the requester of a request when the server sets no
// owner function: the authenticated user of its bearer token if any, else
// an anonymous requester scoped to its 2025-11-25 session, if it has one.
func DefaultOwner(_ context.Context, req mcp.Request) task.Owner {
	if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil && extra.TokenInfo.UserID != "" {
		return task.TokenOwner(extra.TokenInfo.UserID)
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		if p := ss.InitializeParams(); p != nil && p.ProtocolVersion < ext2026.Version {
			return task.AnonymousOwner(ss.ID())
		}
	}
	return task.AnonymousOwner("")
}

// ParseID validates a client-supplied task ID.
func ParseID(raw string) (task.ID, error) {
	id, err := task.ParseID(raw)
	if err != nil {
		return "", InvalidParams(err.Error())
	}
	return id, nil
}

// InvalidParams is a JSON-RPC invalid-params error (-32602).
func InvalidParams(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}

// MethodNotFound is a JSON-RPC method-not-found error (-32601) whose
// message reaches the client. (The go-sdk, v1.8.0, replaces the message
// of every handler error that errors.Is its method-not-found error, a
// comparison of codes, with `method not found: "tools/call"`: this error
// is not one for errors.Is, and converts to the wire error with
// errors.As, which the go-sdk uses to keep the code.)
func MethodNotFound(msg string) error {
	return &methodNotFound{&jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: msg}}
}

// methodNotFound is the error of [MethodNotFound].
type methodNotFound struct{ e *jsonrpc.Error }

func (m *methodNotFound) Error() string { return m.e.Message }

// As lets errors.As find the wire error.
func (m *methodNotFound) As(target any) bool {
	if p, ok := target.(**jsonrpc.Error); ok {
		*p = m.e
		return true
	}
	return false
}

// InternalError is a JSON-RPC internal error (-32603).
func InternalError(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
}

// Mode is how the fleet's switches serve req's requester's task-augmented
// calls of the tool name (policy p) now, as tools/list tells it (the
// _meta key wire.MetaMode): {"mode": "task" | "approval" | a fallback,
// "reason": why not a task, when not}.
func (c *Core) Mode(ctx context.Context, req mcp.Request, name string, p ToolPolicy) map[string]string {
	d := c.rollout.Load().Decide(name, c.Requester(ctx, req), p.Fallback)
	switch {
	case !d.Task():
		if d.Fallback == rollout.Sync && p.Support != Optional {
			d.Fallback = rollout.Refuse
		}
		return map[string]string{"mode": string(d.Fallback), "reason": string(d.Why)}
	case p.Approval != nil:
		return map[string]string{"mode": "approval"}
	}
	return map[string]string{"mode": "task"}
}

// WithGate returns meta with what describes t when a gate holds it (see
// Config.Gate): meta itself otherwise.
func (c *Core) WithGate(t *task.Task, meta mcp.Meta) mcp.Meta {
	if c.gate == nil || t == nil || !t.Queued || t.Status.Terminal() || !strings.HasPrefix(t.Queue, engine.GatePrefix) {
		return meta
	}
	add := c.gate(t)
	if len(add) == 0 {
		return meta
	}
	if meta == nil {
		meta = mcp.Meta{}
	}
	maps.Copy(meta, add)
	return meta
}
