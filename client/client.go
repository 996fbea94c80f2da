// Package client is the host side of mcptask: an MCP client, built on the
// official Go SDK's client, that never loses a long-running tool call.
//
// It speaks both task wires: on 2026-07-28 it declares the
// io.modelcontextprotocol/tasks extension in each request's capabilities;
// on 2025-11-25 it reads the server's tasks capability and each tool's
// execution.taskSupport and adds params.task. Where the server has no tasks
// it falls back to a plain call and says so ([Call.Fallback]).
//
// A call returns either the immediate result or a task. [Client.Wait]
// follows the task until it ends, the deadline passes or ctx is done,
// answering the task's input requests through the host's handlers. Where
// the server pushes task notifications (2026-07-28: a subscriptions/listen
// stream over Streamable HTTP; 2025-11-25: notifications/tasks/status,
// advertised as the experimental io.mcptask/task-notifications), it reads
// them and polls only slowly as a safety net; otherwise, or once the
// stream breaks, it polls at the server's latest pollInterval (with
// jitter). With a journal file
// ([Options.Journal]), a host that crashes mid-wait reattaches to its tasks
// on restart ([Client.Resume]) instead of calling the tools again.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Wire revisions a client may speak.
const (
	// Wire20260728 is the 2026-07-28 revision, with the
	// io.modelcontextprotocol/tasks extension.
	Wire20260728 = ext2026.Version
	// Wire20251125 is the 2025-11-25 revision, with experimental tasks.
	Wire20251125 = v1.Version
)

// Options configures [Dial] and [Connect]. The zero value is usable.
type Options struct {
	// ClientInfo names the host to the server. Nil means "mcptask-client".
	ClientInfo *mcp.Implementation
	// HTTPClient carries Streamable HTTP requests ([Dial] only). Nil means
	// a client with keep-alive and no overall timeout (waits are bounded by
	// contexts and deadlines instead).
	HTTPClient *http.Client
	// BearerToken, if set, is sent as "Authorization: Bearer TOKEN" on
	// every Streamable HTTP request ([Dial] only): for a server that
	// requires authentication (mcptaskd with -tokens, -jwt-key or -jwks).
	// The client never logs it, nor writes it to the journal.
	BearerToken string
	// ProtocolVersion forces a wire revision (Wire20260728 or
	// Wire20251125). Empty means the newest the server speaks.
	ProtocolVersion string
	// Elicit answers a server's elicitation request, made by a task
	// (taskID set) or by a plain call (taskID empty). Nil declines every
	// elicitation.
	Elicit func(ctx context.Context, taskID string, params *mcp.ElicitParams) (*mcp.ElicitResult, error)
	// Sample answers a server's sampling request. Nil means the client
	// does not declare sampling. A nil result with a nil error leaves the
	// request unanswered (a program that cannot sample says so, and goes
	// on waiting): on 2026-07-28 another client of the requester may
	// answer it; on 2025-11-25 the server is told this client has no
	// answer.
	Sample func(ctx context.Context, taskID string, params *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)
	// Journal is the path of the durable journal of tasks in flight. Empty
	// means no journal (and no Resume).
	Journal string
	// TTL is the retention to ask for on the 2025-11-25 wire. Zero lets the
	// server choose.
	TTL time.Duration
	// Logger receives the client's records. Nil discards them.
	Logger *slog.Logger
	// AllowUnknownEffects lets CallTool call a tool although an earlier
	// call of it left an operation whose effect is unknown on the server's
	// ledger (see [UnknownEffectError]). By default CallTool refuses: the
	// caller must reconcile first, or say so.
	AllowUnknownEffects bool
	// DisablePush forces [Client.Wait] to poll: it then never opens a
	// 2026-07-28 subscriptions/listen stream, and ignores the 2025-11-25
	// notifications/tasks/status a server sends. By default Wait uses the
	// server's task notifications where it offers them (and polls only
	// slowly, as a safety net, while they flow), and polls at the
	// server's interval where it does not or the stream breaks.
	DisablePush bool
	// RequestMeta, if set, is called before the client sends a tools/call
	// or a tasks/* request (tasks/get, tasks/result, tasks/update,
	// tasks/cancel, tasks/list, tasks/delete), with the context of the
	// call that sends it and the request's _meta (never nil), to add
	// entries to it: e.g. the W3C trace context (traceparent,
	// tracestate) of the caller's span, so that the server continues the
	// caller's trace. It must not remove or change the entries the client
	// set (an idempotency key, the task request) and must be safe for
	// concurrent use. A tasks/result shared by several Waits of one task
	// has the context of the first.
	RequestMeta func(ctx context.Context, meta map[string]any)
}

// UnknownEffectError is CallTool's refusal to call a tool while an earlier
// call of it (by the same requester, directly or as a job through the
// server's job tools) left a domain operation whose effect is unknown on
// the server's ledger: the deployment, payment or publish may have
// happened, and calling again may do it twice. Reconcile it with the
// system of record first, or set Options.AllowUnknownEffects (mcptask
// call --despite-unknown). CallTool also refuses, with Err set and no
// Operations, when it could not list the operations to check (the server
// rate-limited or failed the listing, the network failed): it fails
// closed.
type UnknownEffectError struct {
	// Tool is the tool refused (for a job tool's call, the tool it
	// would start).
	Tool string
	// Operations are the operations in state unknown, newest first.
	Operations []Operation
	// Err, when set, is why the operations could not be listed.
	Err error
}

func (e *UnknownEffectError) Error() string {
	if len(e.Operations) == 0 {
		return fmt.Sprintf("could not check whether an earlier call of %s left its effect unknown (listing the operations failed: %v); nothing was sent: retry later, or allow it explicitly (Options.AllowUnknownEffects)",
			e.Tool, e.Err)
	}
	op := e.Operations[0]
	receipt := ""
	if op.Receipt != "" {
		receipt = ", receipt " + op.Receipt
	}
	more := ""
	if n := len(e.Operations) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more)", n)
	}
	return fmt.Sprintf("an earlier call of %s left its effect unknown: operation %q of task %s (%s%s)%s; reconcile it with the system of record before calling again, or allow it explicitly (Options.AllowUnknownEffects)",
		e.Tool, op.Key, op.TaskID, op.Effect, receipt, more)
}

// Unwrap returns Err.
func (e *UnknownEffectError) Unwrap() error { return e.Err }

// Client is a connection to one MCP server. It is safe for concurrent use.
type Client struct {
	impl *clientImpl
}

// Dial connects to the Streamable HTTP endpoint at url. A connection that
// fails, or that ctx cuts short, is closed before Dial returns.
func Dial(ctx context.Context, url string, opts *Options) (*Client, error) {
	return dial(ctx, url, opts)
}

// Connect connects over any go-sdk transport, e.g. an mcp.CommandTransport
// running a server on stdio. The journal records the endpoint as target. A
// connection that fails, or that ctx cuts short, is closed before Connect
// returns (for an mcp.CommandTransport: the server's stdin closed and the
// process waited for, as [Client.Close] does).
func Connect(ctx context.Context, t mcp.Transport, target string, opts *Options) (*Client, error) {
	return connect(ctx, t, target, opts)
}

// Close ends the connection. Tasks keep running on the server.
func (c *Client) Close() error { return c.impl.close() }

// Wire returns the wire revision negotiated with the server.
func (c *Client) Wire() string { return c.impl.wire }

// TasksSupported reports whether the server offers tasks on this wire.
func (c *Client) TasksSupported() bool { return c.impl.tasksSupported() }

// Tool is a tool of the server, with its task support when the server says
// it ("forbidden", "optional", "required"; empty when unknown: on the
// 2026-07-28 wire, which has no such field, only an mcptask server states
// it, in the tool's _meta).
type Tool struct {
	*mcp.Tool
	TaskSupport string
}

// Tools lists the server's tools.
func (c *Client) Tools(ctx context.Context) ([]Tool, error) { return c.impl.tools(ctx) }

// Call is the answer to a tool call: a result, or a task to wait for.
type Call struct {
	// Result is the immediate result when the server ran the call
	// synchronously.
	Result *mcp.CallToolResult
	// Task is the task the server created, when it did.
	Task *TaskStatus
	// EventSource, when the server links the task to its output events
	// (MCP Events), is what Client.Events follows to receive them while
	// the task runs.
	EventSource *EventSource
	// Fallback, when not empty, says why the call ran as a plain call
	// although the client would have accepted a task (e.g. "the server
	// has no tasks capability").
	Fallback string
}

// CallTool calls a tool with arguments (any JSON-encodable value, or nil).
// A task the server creates is recorded in the journal before CallTool
// returns.
//
// Unless Options.AllowUnknownEffects is set, a call of a server that
// keeps an operation ledger is refused with an *UnknownEffectError, and
// nothing runs, if an earlier call of the tool (or of the tool a job
// tool's call would start) left an operation in state unknown: a server
// that says it checks the call itself (mcptask's) is asked to, in the
// call (no request more); any other is first asked for the requester's
// operations in state unknown, and a listing that fails refuses the call
// too.
func (c *Client) CallTool(ctx context.Context, name string, args any) (*Call, error) {
	if !c.impl.opts.AllowUnknownEffects {
		if c.impl.effectCheck && c.impl.opsAdvertised {
			call, err := c.impl.callTool(ctx, name, args, true)
			if e := unknownEffectOf(name, args, err); e != nil {
				return nil, e
			}
			return call, err
		}
		if err := c.impl.unknownEffects(ctx, name, args); err != nil {
			return nil, err
		}
	}
	return c.impl.callTool(ctx, name, args, false)
}

// TaskStatus is a snapshot of a task.
type TaskStatus struct {
	ID            string
	Status        string // working, input_required, completed, failed, cancelled
	StatusMessage string
	CreatedAt     time.Time
	LastUpdatedAt time.Time
	TTL           time.Duration // zero when unlimited
	PollInterval  time.Duration // zero when the server suggests none
	// Operation is the task's latest domain operation on the server's
	// ledger (tasks/get's io.mcptask/operation): what the downstream
	// system confirmed of the task's side effect, apart from its status.
	// Nil when the server shows none.
	Operation *wire.Operation
	// Log links the task's log (tasks/get's io.mcptask/log: its resource,
	// its latest line's number) once the task's work logged a line; read
	// it with ReadLog. Nil when the server shows none.
	Log *wire.LogLink
	// Correlation holds the host correlation keys of the call that
	// created the task (tasks/get's io.mcptask/correlation, e.g.
	// "claudecode/toolUseId" → the host's tool-use ID). Nil when the
	// server shows none.
	Correlation map[string]string
	// Links are links about the task that its tool gives (e.g. its job's
	// page in the job system), by name; nil when none.
	Links map[string]string
	// Outcome is how the finished task ended, as the server tells
	// (tasks/get's io.mcptask/outcome): "ok", "tool_error" (the tool
	// reported its own failure, isError: true), "failed" or "cancelled";
	// "" while it runs or when the server does not say.
	Outcome string
	// Parent is the ID of the task whose work started this one as a child
	// (tasks/get's io.mcptask/parentTaskId, see mcptask.Task.Spawn); ""
	// when the task is no child or the server does not say.
	Parent string
	// Children are the child tasks the task's work started, oldest first
	// (tasks/get's io.mcptask/children; the server lists at most
	// wire.MaxChildrenShown, the newest). Each is a task of its own: read
	// it by its ID with Get. Nil when the task has none or the server
	// does not say.
	Children []wire.Child
}

// parentOf reads the io.mcptask/parentTaskId entry of an answer's _meta.
func parentOf(raw json.RawMessage) string {
	var m struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(raw, &m) != nil || m.Meta[wire.MetaParent] == nil {
		return ""
	}
	var p string
	json.Unmarshal(m.Meta[wire.MetaParent], &p)
	return p
}

// childrenOf reads the io.mcptask/children entry of an answer's _meta
// (entries without a task ID are dropped).
func childrenOf(raw json.RawMessage) []wire.Child {
	var m struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(raw, &m) != nil || m.Meta[wire.MetaChildren] == nil {
		return nil
	}
	var cs []wire.Child
	if json.Unmarshal(m.Meta[wire.MetaChildren], &cs) != nil {
		return nil
	}
	out := cs[:0]
	for _, c := range cs {
		if c.TaskID != "" {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// outcomeOf reads the io.mcptask/outcome entry of an answer's _meta.
func outcomeOf(raw json.RawMessage) string {
	var m struct {
		Meta struct {
			Outcome string `json:"io.mcptask/outcome"`
		} `json:"_meta"`
	}
	json.Unmarshal(raw, &m)
	return m.Meta.Outcome
}

// linksOf reads the io.mcptask/links entry of an answer's _meta (string
// values only).
func linksOf(raw json.RawMessage) map[string]string {
	var m struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(raw, &m) != nil || m.Meta[wire.MetaLinks] == nil {
		return nil
	}
	var l map[string]string
	if json.Unmarshal(m.Meta[wire.MetaLinks], &l) != nil || len(l) == 0 {
		return nil
	}
	return l
}

// correlationOf reads the io.mcptask/correlation entry of an answer's
// _meta (string values only).
func correlationOf(raw json.RawMessage) map[string]string {
	var m struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(raw, &m) != nil || m.Meta[wire.MetaCorrelation] == nil {
		return nil
	}
	var c map[string]string
	if json.Unmarshal(m.Meta[wire.MetaCorrelation], &c) != nil || len(c) == 0 {
		return nil
	}
	return c
}

// operationOf reads the io.mcptask/operation entry of an answer's _meta.
func operationOf(raw json.RawMessage) *wire.Operation {
	var m struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(raw, &m) != nil || m.Meta[wire.MetaOperation] == nil {
		return nil
	}
	var op wire.Operation
	if json.Unmarshal(m.Meta[wire.MetaOperation], &op) != nil || op.State == "" {
		return nil
	}
	return &op
}

// logOf reads the io.mcptask/log entry of an answer's _meta.
func logOf(raw json.RawMessage) *wire.LogLink {
	var m struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(raw, &m) != nil || m.Meta[wire.MetaLog] == nil {
		return nil
	}
	var l wire.LogLink
	if json.Unmarshal(m.Meta[wire.MetaLog], &l) != nil || l.URI == "" {
		return nil
	}
	return &l
}

// Terminal reports whether the task has ended.
func (s *TaskStatus) Terminal() bool {
	return s.Status == "completed" || s.Status == "failed" || s.Status == "cancelled"
}

// WaitOptions configures [Client.Wait]. The zero value is usable.
type WaitOptions struct {
	// Deadline bounds the whole wait; zero means none (ctx still applies).
	Deadline time.Duration
	// OnStatus, if set, is called with each new status seen (status,
	// status message, last update, the log's latest line or the list of
	// children changed).
	OnStatus func(*TaskStatus)
	// Unreachable bounds how long the wait keeps polling, with backoff, a
	// server that does not answer (connection refused or cut, a restart),
	// before it returns an *UnreachableError; the task keeps running.
	// Zero means DefaultUnreachable.
	Unreachable time.Duration
}

// DefaultUnreachable is the WaitOptions.Unreachable of a zero value.
const DefaultUnreachable = 2 * time.Minute

// UnreachableError ends a wait whose server did not answer for
// WaitOptions.Unreachable: the task may still be running, and a later Wait
// or Resume picks it up.
type UnreachableError struct {
	TaskID string
	// For is how long the server did not answer.
	For time.Duration
	// Err is the last failure.
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("task %s: the server did not answer for %v (last: %v); the task may still be running", e.TaskID, e.For.Round(time.Millisecond), e.Err)
}

// Unwrap returns the last failure.
func (e *UnreachableError) Unwrap() error { return e.Err }

// Wait follows a task until it ends and returns its result: from the
// server's task notifications when it pushes them (returning as soon as
// the terminal status arrives), else by polling at the latest
// pollInterval with jitter (see [Options.DisablePush]). It honours the
// deadline and ctx; it hands each input
// request to the Elicit / Sample handlers once per key and sends the
// answers. A failed task returns a *TaskError, a cancelled one
// ErrCancelled, a task the server no longer knows ErrTaskNotFound; a wait
// cut short returns ctx's error or ErrDeadline, and the task keeps
// running. The task leaves the journal once it has ended. A result the
// server answered as a link to its result resource (a result larger than
// it answers inline: mcptask.Options.ResultLinkBytes) is read whole with
// resources/read and returned as if it had been inline.
func (c *Client) Wait(ctx context.Context, taskID string, opts *WaitOptions) (*mcp.CallToolResult, error) {
	return c.impl.wait(ctx, taskID, opts)
}

// Get returns the current status of a task.
//
// Get is a one-time look, not a poll: it tells the server so
// (io.mcptask/look), which then does not count it toward the pacing of
// this requester's polls; Wait polls. A server's refusal by its request
// rate (or its store briefly unavailable) is answered by asking again
// after the pause the server asks for, until ctx is done: a program that
// reads many tasks in a row (mcptask list) is paced by the server.
func (c *Client) Get(ctx context.Context, taskID string) (*TaskStatus, error) {
	var st *TaskStatus
	err := c.impl.paced(ctx, wire.MethodTasksGet, func() (err error) {
		st, err = c.impl.get(ctx, taskID)
		return err
	})
	return st, err
}

// Cancel asks the server to cancel a task and returns its status after.
func (c *Client) Cancel(ctx context.Context, taskID string) (*TaskStatus, error) {
	return c.impl.cancel(ctx, taskID)
}

// Delete asks the server to delete a finished task and everything it
// holds (result, error, input requests and answers: mcptask's
// tasks/delete, on both wires), and drops it from the journal. A task
// that has not ended is refused with ErrNotTerminal (cancel it first); a
// task the server does not know, or that belongs to someone else,
// ErrTaskNotFound; a server that does not advertise the method
// ErrUnsupported.
func (c *Client) Delete(ctx context.Context, taskID string) error {
	return c.impl.delete(ctx, taskID)
}

// List returns a page of the requester's tasks (2025-11-25 wire only; on
// 2026-07-28 it returns ErrUnsupported) and the cursor of the next page
// ("" at the end).
func (c *Client) List(ctx context.Context, cursor string) ([]TaskStatus, string, error) {
	return c.impl.list(ctx, cursor)
}

// Pending returns the journal's tasks in flight for this client's target.
func (c *Client) Pending() ([]JournalEntry, error) { return c.impl.pending() }

// Outcome is the end of one resumed task.
type Outcome struct {
	Entry  JournalEntry
	Result *mcp.CallToolResult
	Err    error
}

// Resume waits for every task of the journal that belongs to this
// client's target, without calling any tool again, and returns their
// outcomes. A call whose answer never came ([JournalEntry.Unsent]) is sent
// again with its idempotency key first ([Client.ResendCall]): the server
// returns the task it created for it, or creates it now; either way the
// tool runs once.
func (c *Client) Resume(ctx context.Context, opts *WaitOptions) ([]Outcome, error) {
	return c.impl.resume(ctx, opts)
}

// ResendCall finishes a call of the journal whose answer never came
// ([JournalEntry.Unsent]): it sends it again with its idempotency key,
// which returns the task the server created for it, if it did, and
// creates it otherwise, and records the outcome in the journal.
func (c *Client) ResendCall(ctx context.Context, e JournalEntry) (*Call, error) {
	if !e.Unsent() {
		return nil, fmt.Errorf("client: ResendCall: the call of %s already has its task %s", e.Tool, e.TaskID)
	}
	return c.impl.resend(ctx, e)
}

// Errors of the client.
var (
	// ErrCancelled means the task ended cancelled.
	ErrCancelled = errors.New("task was cancelled")
	// ErrTaskNotFound means the server does not know the task (it never
	// existed, expired, or belongs to someone else).
	ErrTaskNotFound = errors.New("task not found on the server")
	// ErrNotTerminal means Delete was refused because the task has not
	// ended: cancel it first.
	ErrNotTerminal = errors.New("task has not ended: cancel it first, then delete it")
	// ErrCancelRefused means Cancel did not cancel the task: the system
	// doing its work refused the cancel, or could not be told of it (the
	// server's wire.CodeCancelRefused); the task goes on. The error's
	// text says why.
	ErrCancelRefused = errors.New("the cancel was refused")
	// ErrDeadline means the wait's deadline passed; the task keeps running.
	ErrDeadline = errors.New("deadline passed while waiting for the task")
	// ErrUnsupported means the server or wire does not offer the operation.
	ErrUnsupported = errors.New("not supported by this server or wire")
)

// UnauthorizedError is the error of a [Dial] the server refused with HTTP
// 401: it wants a bearer token ([Options.BearerToken]), or refused the one
// given.
type UnauthorizedError struct {
	// TokenSent reports whether the request carried a token.
	TokenSent bool
	// Err is the go-sdk's error.
	Err error
}

func (e *UnauthorizedError) Error() string {
	if e.TokenSent {
		return "the server refused the bearer token (HTTP 401): it is wrong, expired, or not for this server"
	}
	return "the server requires a bearer token (HTTP 401)"
}

// Unwrap returns the go-sdk's error.
func (e *UnauthorizedError) Unwrap() error { return e.Err }

// TaskError is the JSON-RPC error a failed task ended with.
type TaskError struct {
	TaskID  string
	Code    int64
	Message string
	Data    []byte
}

func (e *TaskError) Error() string { return "task " + e.TaskID + " failed: " + e.Message }
