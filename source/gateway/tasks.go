package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/tracing"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
)

// An upstream that speaks tasks itself (the 2025-11-25 tasks capability
// with tools/call, and the tool's execution.taskSupport; or, asked for
// with ProtocolVersion 2026-07-28, the io.modelcontextprotocol/tasks
// extension) gets the call as a task of its own: the gateway's work
// creates the task upstream, records its ID on our task
// (mcptask.Task.SetExternalRef) before the client's create is answered
// (mcptask.ToolOptions.AwaitExternalRef), and then watches it: the
// upstream's status message is ours, its input requests are our task's
// (answered by our client and sent back), our tasks/cancel is its
// tasks/cancel, its result is ours. After a crash or a takeover the
// recovery policy runs the work again (mcptask.ToolOptions.Reattach); it
// finds the recorded ID and watches the same upstream task instead of
// calling the tool again.
//
// The go-sdk's client speaks no tasks; the gateway talks to such an
// upstream with this module's own client (package client), which speaks
// both task wires, polls with the server's interval, routes each input
// request to its task's handler by task ID, and rides out short outages.
// One client connection per upstream carries every task (the upstream
// names the task of each input request), unlike plain calls, which need a
// session each.

// DefaultAwaitExternalRef bounds how long the create of a task of a
// task-capable upstream tool waits for the upstream to answer with its
// task before our client is acknowledged all the same.
const DefaultAwaitExternalRef = 30 * time.Second

// externalRef is what the gateway records on a task whose work is an
// upstream task. Session is the upstream's MCP session ID (Mcp-Session-Id)
// the task was created in, if it gave one: an upstream that no longer
// knows the task is asked there, to tell why (lostWhy). It never leaves
// mcptaskd's store (a session ID is a credential of the gateway's).
type externalRef struct {
	Upstream string `json:"upstream"`
	TaskID   string `json:"taskId"`
	Session  string `json:"session,omitempty"`
}

// taskConn is the connection to an upstream that speaks tasks: one
// client/ connection, opened on first use and replaced once it failed.
type taskConn struct {
	u *upstream

	mu sync.Mutex
	c  *client.Client

	// seen is the MCP session ID of the HTTP client's latest exchange
	// with the upstream ("" when it has no sessions).
	smu  sync.Mutex
	seen string

	// calls routes the upstream's input requests to the task waiting on
	// them: upstream task ID → our task and its work's context.
	cmu   sync.Mutex
	calls map[string]taskCall
}

type taskCall struct {
	ctx context.Context
	tk  *mcptask.Task
}

func newTaskConn(u *upstream) *taskConn {
	return &taskConn{u: u, calls: map[string]taskCall{}}
}

// probe connects with the task-speaking client and reports whether the
// upstream offers tasks for tools/call; when it does, it keeps the
// connection and returns each tool's task support.
func (tc *taskConn) probe(ctx context.Context) (map[string]string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, tc.u.dialLimit())
	defer cancel()
	c, err := tc.dial(ctx)
	if err != nil {
		return nil, false, err
	}
	if !c.TasksSupported() {
		c.Close()
		return nil, false, nil
	}
	tools, err := c.Tools(ctx)
	if err != nil {
		c.Close()
		return nil, false, fmt.Errorf("listing its tools: %w", err)
	}
	support := map[string]string{}
	for _, t := range tools {
		support[t.Name] = t.TaskSupport
	}
	tc.mu.Lock()
	tc.c = c
	tc.mu.Unlock()
	return support, true, nil
}

// dial opens a client connection to the upstream.
func (tc *taskConn) dial(ctx context.Context) (*client.Client, error) {
	u := tc.u
	opts := &client.Options{
		ClientInfo:      &mcp.Implementation{Name: "mcptask-gateway", Version: "1"},
		ProtocolVersion: u.cfg.ProtocolVersion,
		Elicit:          tc.elicit,
		Sample:          tc.sample,
		Logger:          u.log,
		// The gateway relays its requesters' calls: whether one may call
		// again after an unknown effect is for them to say, not for the
		// ledger of the gateway's own principal upstream.
		AllowUnknownEffects: true,
		// The upstream continues the trace of the task's run: the W3C
		// trace context of each request's span goes in its _meta (none
		// when the request has no span context).
		RequestMeta: tracing.ToMeta,
	}
	if u.cfg.URL != "" {
		// Over HTTP the client dials itself: it speaks both task wires,
		// the 2026-07-28 one stateless, which no go-sdk transport does.
		opts.HTTPClient = u.httpClient(nil, nil)
		opts.HTTPClient.Transport = &sessionWatch{base: opts.HTTPClient.Transport, tc: tc}
		return client.Dial(ctx, u.cfg.URL, opts)
	}
	return client.Connect(ctx, u.transport(nil), "upstream "+u.cfg.Name, opts)
}

// get returns the connection, opening one if there is none.
func (tc *taskConn) get(ctx context.Context) (*client.Client, error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.c != nil {
		return tc.c, nil
	}
	if err := tc.u.mayDial(); err != nil {
		return nil, err
	}
	// Bounded: every task of the upstream waits for this dial.
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	c, err := tc.dial(dctx)
	cancel()
	tc.u.dialed(err)
	if err != nil {
		return nil, err
	}
	tc.c = c
	return c, nil
}

// broken drops c, which failed, so that the next call opens another (a
// stdio upstream's process died: its tasks with it; an HTTP client opens
// new sessions by itself).
func (tc *taskConn) broken(c *client.Client) {
	if tc.u.cfg.URL != "" {
		return
	}
	tc.mu.Lock()
	if tc.c == c {
		tc.c = nil
	}
	tc.mu.Unlock()
	c.Close()
}

func (tc *taskConn) close() error {
	tc.mu.Lock()
	c := tc.c
	tc.c = nil
	tc.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Close()
}

func (tc *taskConn) route(id string) (taskCall, bool) {
	tc.cmu.Lock()
	defer tc.cmu.Unlock()
	call, ok := tc.calls[id]
	return call, ok
}

// elicit hands an upstream task's elicitation to our task.
func (tc *taskConn) elicit(_ context.Context, id string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	call, ok := tc.route(id)
	if !ok {
		return nil, fmt.Errorf("the upstream asked for input for a task the gateway does not watch (%q)", id)
	}
	q := *p
	q.Meta = nil // the upstream's related-task _meta is not ours
	return call.tk.Elicit(call.ctx, &q)
}

// sample hands an upstream task's sampling request to our task.
func (tc *taskConn) sample(_ context.Context, id string, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	call, ok := tc.route(id)
	if !ok {
		return nil, fmt.Errorf("the upstream asked for input for a task the gateway does not watch (%q)", id)
	}
	q := *p
	q.Meta = nil
	return call.tk.CreateMessage(call.ctx, &q)
}

// taskHandler is the work of a tool of an upstream that speaks tasks.
// A call that does not run as a task is a plain upstream call (plain).
func (u *upstream) taskHandler(name string, p ToolPolicy, plain mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tk := mcptask.FromContext(ctx)
		if tk == nil {
			return plain(ctx, req)
		}
		if p.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeoutCause(ctx, p.Timeout, errTimeout)
			defer cancel()
		}
		if p.Observe {
			return u.observeUpstreamTask(ctx, tk, name, req)
		}
		res, err := u.runUpstreamTask(ctx, tk, name, req)
		if errors.Is(err, errUpstreamLostTask) && p.Rerunnable {
			// The upstream restarted and forgot the task this one
			// re-attached to; the tool is safe to call again.
			u.log.Warn("the upstream lost the task this one re-attached to; the tool is rerunnable: calling it again", "task", tk.ID(), "tool", name)
			if err := tk.SetExternalRef(ctx, ""); err != nil {
				return nil, err
			}
			res, err = u.runUpstreamTask(ctx, tk, name, req)
		}
		return relayed(res), err
	}
}

// errUpstreamLostTask is the error of a re-attachment to an upstream task
// that the upstream no longer knows.
var errUpstreamLostTask = errors.New("the upstream no longer knows the task")

// stdioWaitUnreachable bounds how long the wait for a task of a stdio
// upstream rides out a connection that gives no answer: its process
// died (nothing else answers for it), and the task with it.
const stdioWaitUnreachable = 2 * time.Second

func (u *upstream) runUpstreamTask(ctx context.Context, tk *mcptask.Task, name string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	tc := u.tasks
	// The upstream requests get the work's cancellation, not its values
	// (see detach); our task's own calls keep ctx.
	uctx, cancel := detach(ctx)
	defer cancel()
	c, err := tc.get(uctx)
	if err != nil {
		return nil, u.callError(ctx, name, err)
	}
	raw, err := tk.ExternalRef(ctx)
	if err != nil {
		return nil, err
	}
	// The upstream call on the ledger, before it is sent; a re-run finds
	// the operation of its first run.
	op, err := tk.RecordOperation(ctx, mcptask.Operation{Object: u.cfg.Name + "/" + name, Effect: "call " + name + " on upstream " + u.cfg.Name})
	if err != nil {
		return nil, err
	}
	res, err := u.followUpstreamTask(ctx, uctx, c, tk, op, raw, name, req, false)
	u.settleOp(ctx, tk, op, res, err)
	return res, err
}

// observeUpstreamTask is the work of a tool in shadow mode (see
// ToolPolicy.Observe): it records the upstream task named by the call's
// taskId as the task's external reference (unless a run before this one
// did) and watches it to its end, never calling the upstream tool and
// never cancelling its task; it records no operation (it starts none).
func (u *upstream) observeUpstreamTask(ctx context.Context, tk *mcptask.Task, name string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	tc := u.tasks
	uctx, cancel := detach(ctx)
	defer cancel()
	raw, err := tk.ExternalRef(ctx)
	if err != nil {
		return nil, err
	}
	if raw == "" {
		var args struct {
			TaskID string `json:"taskId"`
		}
		if req.Params == nil || json.Unmarshal(req.Params.Arguments, &args) != nil || strings.TrimSpace(args.TaskID) == "" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "observe: the argument taskId (the upstream task to watch) is required; nothing was sent upstream"}
		}
		b, _ := json.Marshal(externalRef{Upstream: u.cfg.Name, TaskID: args.TaskID})
		if err := tk.SetExternalRef(ctx, string(b)); err != nil {
			return nil, err
		}
		raw = string(b)
	}
	c, err := tc.get(uctx)
	if err != nil {
		return nil, u.callError(ctx, name, err)
	}
	res, err := u.followUpstreamTask(ctx, uctx, c, tk, nil, raw, name, req, true)
	return relayed(res), err
}

// ObserveTask reads the status of the task taskID of the upstream named
// upstream (an operator's report comparing a shadow tool's projections
// with the upstream's own state): one tasks/get, nothing else. It
// returns the upstream task's status ("working", "input_required",
// "completed", "failed", "cancelled") and status message; an unknown
// upstream, one that speaks no tasks, or a task it does not know is an
// error.
func (g *Gateway) ObserveTask(ctx context.Context, upstream, taskID string) (status, message string, err error) {
	for _, u := range g.upstreams {
		if u.cfg.Name != upstream {
			continue
		}
		if u.tasks == nil {
			return "", "", fmt.Errorf("gateway: upstream %q speaks no tasks", upstream)
		}
		c, err := u.tasks.get(ctx)
		if err != nil {
			return "", "", fmt.Errorf("gateway: upstream %q: %v", upstream, redactErr(err))
		}
		st, err := c.Get(ctx, taskID)
		if err != nil {
			if !rpcAnswered(err) {
				u.tasks.broken(c)
			}
			return "", "", fmt.Errorf("gateway: upstream %q: task %s: %v", upstream, taskID, redactErr(err))
		}
		return st.Status, st.StatusMessage, nil
	}
	return "", "", fmt.Errorf("gateway: no upstream %q", upstream)
}

// settleOp records on the upstream call's operation what the upstream
// said: confirmed for a result, rejected for an error result or the
// upstream task's failure or cancellation; an outcome nobody knows
// (ours cancelled, the upstream lost or unreachable) leaves it as it is.
func (u *upstream) settleOp(ctx context.Context, tk *mcptask.Task, op *mcptask.Op, res *mcp.CallToolResult, err error) {
	if op == nil || op.State().Settled() {
		return
	}
	var rerr error
	var te *jsonrpc.Error
	var ue *upstreamError
	switch {
	case err == nil && res != nil && res.IsError:
		rerr = op.Rejected(ctx, "the upstream's result is an error")
	case err == nil:
		rerr = op.Confirmed(ctx, "the upstream answered")
	case ctx.Err() != nil, errors.As(err, &ue):
	case errors.As(err, &te) && te.Code != jsonrpc.CodeInternalError:
		rerr = op.Rejected(ctx, te.Message)
	}
	if rerr != nil {
		u.log.Warn("recording the upstream call on the operation ledger", "task", tk.ID(), "err", rerr)
	}
}

// followUpstreamTask creates the upstream task (or re-attaches to the one
// an earlier run recorded in raw) and follows it to its end.
// With observe (shadow mode), it never cancels the upstream task.
func (u *upstream) followUpstreamTask(ctx, uctx context.Context, c *client.Client, tk *mcptask.Task, op *mcptask.Op, raw, name string, req *mcp.CallToolRequest, observe bool) (*mcp.CallToolResult, error) {
	tc := u.tasks
	var id string
	// created is the upstream session the task was created in.
	var created string
	// relayPrefix starts the first upstream status message relayed after
	// a re-attachment, so that our status message keeps saying so.
	relayPrefix := ""
	if raw != "" {
		// A re-run after a crash or a takeover: the upstream task was
		// created by an earlier run; watch it again.
		var ref externalRef
		if err := json.Unmarshal([]byte(raw), &ref); err != nil || ref.TaskID == "" || ref.Upstream != u.cfg.Name {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the task's recorded upstream task %q is not one of upstream %s; its outcome is unknown", raw, u.cfg.Name)}
		}
		id, created = ref.TaskID, ref.Session
		u.log.Info("re-attaching to an upstream task", "task", tk.ID(), "upstreamTask", id, "observe", observe)
		note := fmt.Sprintf("re-attached to the task %s of upstream %s", id, u.cfg.Name)
		if observe {
			note = fmt.Sprintf("watching the task %s of upstream %s (shadow: nothing is started or cancelled)", id, u.cfg.Name)
		}
		_ = tk.SetStatusMessage(ctx, note)
		relayPrefix = note + ": "
	} else {
		var args any
		if req.Params != nil && len(req.Params.Arguments) > 0 {
			args = req.Params.Arguments
		}
		cctx, span := u.startCall(uctx, ctx, name, req)
		call, err := c.CallTool(cctx, name, args)
		var res *mcp.CallToolResult
		if call != nil {
			res = call.Result
		}
		endCall(span, res, err)
		if err != nil {
			if !rpcAnswered(err) {
				tc.broken(c)
			}
			if oe := (*client.OutcomeUnknownError)(nil); ctx.Err() == nil && errors.As(err, &oe) {
				// Sent (again, with its idempotency key), never answered:
				// the upstream may have created the task and run it.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
					"upstream %s was sent the call of %s but its answer never came (%v); the outcome is unknown", u.cfg.Name, name, redactErr(oe.Err))}
			}
			return nil, u.callError(ctx, name, err)
		}
		if call.Task == nil {
			// The upstream ran the call at once.
			return call.Result, nil
		}
		id = call.Task.ID
		if op != nil {
			// The receipt first: a create waiting for the external
			// reference is answered with the submitted operation.
			if err := op.Submitted(ctx, id); err != nil {
				u.log.Warn("recording the upstream task on the operation ledger", "task", tk.ID(), "upstreamTask", id, "err", err)
			}
		}
		created = tc.session()
		b, _ := json.Marshal(externalRef{Upstream: u.cfg.Name, TaskID: id, Session: created})
		if err := tk.SetExternalRef(ctx, string(b)); err != nil {
			// The upstream task runs, but a crash now could not find it:
			// say so, and stop it rather than leave it unwatched.
			u.cancelUpstream(c, id, slog.LevelWarn)
			return nil, fmt.Errorf("recording the upstream task %s: %w", id, err)
		}
		u.log.Info("upstream task created", "task", tk.ID(), "upstreamTask", id)
	}

	tc.cmu.Lock()
	tc.calls[id] = taskCall{ctx: ctx, tk: tk}
	tc.cmu.Unlock()
	defer func() {
		tc.cmu.Lock()
		delete(tc.calls, id)
		tc.cmu.Unlock()
	}()

	last := ""
	wopts := &client.WaitOptions{}
	if u.cfg.URL == "" {
		wopts.Unreachable = stdioWaitUnreachable
	}
	// The upstream's tasks/* requests carry the trace context of our
	// run (uctx has none of ctx's values).
	uctx = trace.ContextWithSpanContext(uctx, trace.SpanContextFromContext(ctx))
	relay := &logRelay{c: c, id: id, tk: tk, skip: raw != ""}
	wopts.OnStatus = func(st *client.TaskStatus) {
		if st.StatusMessage != "" && st.StatusMessage != last {
			last = st.StatusMessage
			_ = tk.SetStatusMessage(ctx, relayPrefix+st.StatusMessage)
			relayPrefix = ""
		}
		relay.pull(uctx, st.Log)
	}
	res, err := c.Wait(uctx, id, wopts)
	var te *client.TaskError
	if err == nil || errors.As(err, &te) {
		relay.drain(uctx) // the upstream's last lines, written before its outcome
	}
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		// Our task was cancelled (here or through another instance), or
		// its call timed out: the upstream task is cancelled too. A
		// shutdown or a takeover leaves it running: the next run
		// re-attaches to it.
		// (A cancel of ours was relayed before our task was marked
		// cancelled, by cancelTask; it is sent once more, in case the
		// upstream task was created after that, and its refusal, mostly
		// "already cancelled", only noted.)
		switch {
		case observe:
			// Shadow mode: the watch stops, the upstream task goes on.
		case errors.Is(context.Cause(ctx), errTimeout):
			u.cancelUpstream(c, id, slog.LevelWarn)
		case tk.Cancelled():
			u.cancelUpstream(c, id, slog.LevelDebug)
		}
		return nil, u.callError(ctx, name, err)
	}
	var ue *client.UnreachableError
	switch {
	case errors.As(err, &te):
		return nil, &jsonrpc.Error{Code: te.Code, Message: te.Message, Data: te.Data}
	case errors.Is(err, client.ErrTaskNotFound):
		return nil, &upstreamError{lost: true, rpc: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
			"upstream %s no longer knows its task %s (%s): the outcome of %s is unknown", u.cfg.Name, id, tc.lostWhy(uctx, id, created), name)}}
	case errors.Is(err, client.ErrCancelled):
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("upstream %s cancelled its task %s", u.cfg.Name, id)}
	case errors.As(err, &ue) && u.cfg.URL == "":
		tc.broken(c)
		u.dialed(err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
			"upstream %s died during its task %s of %s (its process exited or stopped answering); the outcome is unknown", u.cfg.Name, id, name)}
	case errors.As(err, &ue):
		tc.broken(c)
		u.dialed(err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("upstream %s unavailable: %v", u.cfg.Name, redactErr(err))}
	}
	if !rpcAnswered(err) {
		tc.broken(c)
	}
	return nil, u.callError(ctx, name, err)
}

// session returns the upstream's MCP session ID last seen.
func (tc *taskConn) session() string {
	tc.smu.Lock()
	defer tc.smu.Unlock()
	return tc.seen
}

// sessionWatch notes the MCP session ID of each exchange of the task
// client with the upstream: the one an answer gives (initialize), else
// the one the request carried.
type sessionWatch struct {
	base http.RoundTripper
	tc   *taskConn
}

func (w *sessionWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := w.base.RoundTrip(r)
	id := r.Header.Get(sessionHeader)
	if err == nil && res.Header.Get(sessionHeader) != "" {
		id = res.Header.Get(sessionHeader)
	}
	if err == nil && r.Method == http.MethodPost {
		w.tc.smu.Lock()
		w.tc.seen = id
		w.tc.smu.Unlock()
	}
	return res, err
}

const sessionHeader = "Mcp-Session-Id"

// lostUnknown is why an upstream no longer knows a task when the gateway
// cannot tell.
const lostUnknown = "it restarted, expired the task, or ties its tasks to the session that created them"

// lostWhy tells, where it can, why the upstream answered that it does not
// know its task id, created in the session created: an upstream without
// sessions, or one asked in the session that created the task, restarted
// or expired it; else the gateway asks again in that session (tasks/get
// with its Mcp-Session-Id, read only): an upstream that knows the task
// there ties its tasks to the session that created them (as mcp-go's
// in-memory tasks do: a new session, after a restart of mcptaskd, cannot
// re-attach); one that no longer knows the session restarted or ended it.
func (tc *taskConn) lostWhy(ctx context.Context, id, created string) string {
	now := tc.session()
	switch {
	case tc.u.cfg.URL == "" || (created == "" && now != ""):
		return lostUnknown
	case created == "":
		return "it restarted or expired the task: it has no sessions to tie tasks to"
	case created == now:
		return "it restarted or expired the task: the session that created it no longer knows it"
	}
	known, err := tc.askInSession(ctx, id, created)
	switch {
	case errors.Is(err, errSessionGone):
		return "the session that created the task is gone: the upstream restarted, or ended that session"
	case err != nil:
		tc.u.log.Debug("asking the upstream for its task in the session that created it", "upstreamTask", id, "err", redactErr(err))
		return lostUnknown
	case known:
		return "it ties its tasks to the session that created them: it still knows the task in that session, not in the gateway's new one, so it cannot be re-attached"
	default:
		return "it restarted or expired the task: the session that created it no longer knows it either"
	}
}

// errSessionGone: the upstream answered 404 to a request in a session
// (the Streamable HTTP transport's answer for a session it does not know).
var errSessionGone = errors.New("the upstream does not know the session")

// askInSession sends tasks/get of the task id in the upstream session
// sid and reports whether the upstream knows the task there.
func (tc *taskConn) askInSession(ctx context.Context, id, sid string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, cancelTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "mcptask-lost-task", "method": wire.MethodTasksGet,
		"params": map[string]any{"taskId": id}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tc.u.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(sessionHeader, sid)
	req.Header.Set("Mcp-Protocol-Version", tc.u.cfg.ProtocolVersion)
	res, err := tc.u.httpClient(nil, nil).Do(req)
	if err != nil {
		return false, err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		return false, errSessionGone
	}
	if res.StatusCode != http.StatusOK {
		return false, fmt.Errorf("HTTP %s", res.Status)
	}
	// The answer: a JSON body, or an event of an event stream (read up
	// to it: the stream may stay open).
	answer := io.LimitReader(res.Body, 1<<16)
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		raw, err := io.ReadAll(answer)
		if err != nil {
			return false, err
		}
		return knowsTask(raw, id)
	}
	sc := bufio.NewScanner(answer)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
			if known, err := knowsTask([]byte(d), id); err == nil {
				return known, nil
			}
		}
	}
	return false, errors.New("no answer to tasks/get")
}

// knowsTask reads msg, the answer to askInSession's tasks/get: whether it
// is a task, id.
func knowsTask(msg []byte, id string) (bool, error) {
	var ans struct {
		ID     string `json:"id"`
		Result *struct {
			TaskID string `json:"taskId"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &ans); err != nil || ans.ID != "mcptask-lost-task" {
		return false, errors.New("not the answer to tasks/get")
	}
	return ans.Result != nil && ans.Result.TaskID == id, nil
}

// logRelay copies the log of an upstream task (an upstream that speaks
// mcptask's task logs: tasks/get links it) into our task's log, from the
// cursor it reached. A re-attached run starts at the upstream log's end
// as it finds it: the earlier run relayed what came before (what was
// logged between the crash and the re-attachment is not relayed).
type logRelay struct {
	c      *client.Client
	id     string
	tk     *mcptask.Task
	skip   bool  // re-attached: start at the end
	cursor int64 // the upstream log's last line relayed
	off    bool  // the upstream keeps no logs, or reading failed for good
}

// pull relays the lines up to link.Last, if it is past the cursor.
func (r *logRelay) pull(ctx context.Context, link *wire.LogLink) {
	if r.off || link == nil || link.Last <= r.cursor {
		return
	}
	if r.skip {
		r.skip, r.cursor = false, link.Last
		return
	}
	r.drain(ctx)
}

// drain relays the upstream log's lines after the cursor, to its end.
func (r *logRelay) drain(ctx context.Context) {
	for !r.off && !r.skip {
		p, err := r.c.ReadLog(ctx, r.id, r.cursor, 0)
		if err != nil {
			r.off = errors.Is(err, client.ErrUnsupported) || errors.Is(err, client.ErrTaskNotFound)
			return
		}
		if p.Missed > 0 {
			r.tk.LogStream("upstream", fmt.Sprintf("[%d lines of the upstream task's log were dropped before they were relayed]", p.Missed))
		}
		for _, l := range p.Lines {
			r.tk.LogStream(l.Stream, l.Text)
		}
		r.cursor = p.Next
		if !p.More {
			return
		}
	}
}

// upstreamError is a *jsonrpc.Error (the task's error) that also says
// what happened upstream.
type upstreamError struct {
	rpc  *jsonrpc.Error
	lost bool // the upstream no longer knows the task
}

func (e *upstreamError) Error() string { return e.rpc.Error() }

// Unwrap lets errors.As find the *jsonrpc.Error, and errors.Is
// errUpstreamLostTask when lost.
func (e *upstreamError) Unwrap() []error {
	errs := []error{e.rpc}
	if e.lost {
		errs = append(errs, errUpstreamLostTask)
	}
	return errs
}

// cancelTask is the ToolOptions.Cancel of a tool whose tasks are upstream
// tasks: our task is cancelled only once the upstream accepted tasks/cancel
// of its task; a refusal (or an upstream that cannot be reached) leaves
// ours running, and says why. A task not created upstream yet is let go:
// its run's create is cut.
func (u *upstream) cancelTask(ctx context.Context, t *task.Task) error {
	var ref externalRef
	if t.ExternalRef == "" || json.Unmarshal([]byte(t.ExternalRef), &ref) != nil || ref.TaskID == "" {
		return nil
	}
	c, err := u.tasks.get(ctx)
	if err != nil {
		return fmt.Errorf("upstream %s cannot be reached to cancel its task %s: %s", u.cfg.Name, ref.TaskID, redact(err.Error()))
	}
	st, err := c.Cancel(ctx, ref.TaskID)
	if err != nil {
		u.log.Warn("the upstream refused to cancel its task", "task", t.ID, "upstreamTask", ref.TaskID, "err", err)
		return fmt.Errorf("upstream %s refused to cancel its task %s: %s", u.cfg.Name, ref.TaskID, redact(err.Error()))
	}
	// An acknowledgement is not a cancel (2026-07-28: cancellation is
	// cooperative, and the task may have ended meanwhile): ours is
	// cancelled once the upstream's says so.
	wait, stop := context.WithTimeout(ctx, cancelConfirmWait)
	defer stop()
	for {
		if st != nil && st.Status == "cancelled" {
			u.log.Debug("upstream task cancelled", "task", t.ID, "upstreamTask", ref.TaskID)
			return nil
		}
		if st != nil && st.Terminal() {
			return fmt.Errorf("upstream %s's task %s ended (%s) before the cancel took effect", u.cfg.Name, ref.TaskID, st.Status)
		}
		pause := 100 * time.Millisecond
		if st != nil && st.PollInterval > 0 {
			pause = min(st.PollInterval, time.Second)
		}
		select {
		case <-wait.Done():
			status := "unknown"
			if st != nil {
				status = st.Status
			}
			return fmt.Errorf("upstream %s acknowledged the cancel, but its task %s is still %s after %v: ours goes on and ends as it does",
				u.cfg.Name, ref.TaskID, status, cancelConfirmWait)
		case <-time.After(pause):
		}
		if got, err := c.Get(wait, ref.TaskID); err == nil {
			st = got
		}
	}
}

// cancelConfirmWait bounds how long a cancel of ours waits for the
// upstream task to say cancelled.
const cancelConfirmWait = 30 * time.Second

// cancelUpstream sends tasks/cancel for the upstream task id, bounded; a
// failure is logged at the level failure.
func (u *upstream) cancelUpstream(c *client.Client, id string, failure slog.Level) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	if _, err := c.Cancel(ctx, id); err != nil {
		u.log.Log(ctx, failure, "cancelling the upstream task", "upstreamTask", id, "err", err)
		return
	}
	u.log.Debug("upstream task cancelled", "upstreamTask", id)
}

// cancelTimeout bounds the tasks/cancel the gateway sends upstream.
const cancelTimeout = 10 * time.Second

// rpcAnswered reports whether err carries a JSON-RPC error the upstream
// answered with (its connection works).
func rpcAnswered(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code != codeRejected
}
