// Package wire2026 is the server side of the 2026-07-28
// io.modelcontextprotocol/tasks extension (SEP-2663): stateless requests
// that declare the extension in their per-request capabilities, tools/call
// answered with resultType "task", and tasks/get, tasks/update and
// tasks/cancel. tasks/result and tasks/list are not part of it.
package wire2026

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/internal/push"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/events"
	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Wire is the 2026-07-28 wire.
type Wire struct {
	c     *adapter.Core
	table adapter.Table

	push push.Options
	base context.Context // ends every listen stream (Close)
	stop context.CancelFunc

	smu     sync.Mutex
	streams map[task.Owner]int // open listen streams with task IDs
}

// New returns the wire on core c; o configures its listen streams.
func New(c *adapter.Core, o push.Options) *Wire {
	w := &Wire{c: c, push: o.WithDefaults(), streams: map[task.Owner]int{}}
	w.base, w.stop = context.WithCancel(context.Background())
	w.table = adapter.Table{
		wire.MethodToolsCall:      w.callTool,
		"server/discover":         w.discover,
		"tools/list":              w.listTools,
		wire.MethodTasksGet:       w.get,
		wire.MethodTasksUpdate:    w.update,
		wire.MethodTasksCancel:    w.cancel,
		wire.MethodTasksDelete:    w.delete,
		wire.MethodOperationsList: w.operations,
		wire.MethodTasksResult:    w.removed,
		wire.MethodTasksList:      w.removed,
	}
	return w
}

// Version returns ext2026.Version.
func (w *Wire) Version() string { return ext2026.Version }

// Table returns the wire's methods.
func (w *Wire) Table() adapter.Table { return w.table }

// TakesCall reports whether callTool answers the tools/call req with a
// task whatever its other checks say (a rejection of its arguments, a
// limit, …), without asking anything of the tool's own code: the
// request declares the extension, the tool's policy allows the lane
// (ToolPolicy.OnLane), and the fleet's switches do not answer it
// synchronously. The fast lane creates only the tasks of such calls.
func (w *Wire) TakesCall(ctx context.Context, req *mcp.CallToolRequest) bool {
	params := req.Params
	if params == nil {
		return false
	}
	tool := w.c.Tool(params.Name)
	return tool.OnLane() && ext2026.Declares(params.GetMeta()) && !w.c.FallsBackSync(ctx, req, params.Name, tool)
}

// callTool answers a tools/call: synchronously, or with a task handle when
// the request declares the extension and the tool supports tasks.
func (w *Wire) callTool(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	params := r.CallParams()
	if params == nil {
		return r.Next(ctx, r.Method, r.Req)
	}
	tool := w.c.Tool(params.Name)
	if tool.Support == adapter.Forbidden {
		return r.Next(ctx, r.Method, r.Req)
	}
	if !ext2026.Declares(params.GetMeta()) {
		if tool.Support == adapter.Required {
			return nil, ext2026.MissingCapability("the tool " + params.Name)
		}
		return r.Next(ctx, r.Method, r.Req)
	}
	if tool.Synchronous != nil {
		if ctr, ok := r.Req.(*mcp.CallToolRequest); ok && tool.Synchronous(ctr) {
			return r.Next(ctx, r.Method, r.Req)
		}
	}
	if w.c.SyncFallback(ctx, r.Req, params.Name, tool) {
		// Drained, with the synchronous fallback: a plain call.
		return r.Next(ctx, r.Method, r.Req)
	}
	if res := w.c.RejectedArguments(params, tool); res != nil {
		// Answered at once, as the server may answer any call: a task
		// could only end with this tool error.
		return ext2026.Complete(res)
	}
	caps, _ := adapter.MetaOf(r.Req)[ext2026.MetaClientCapabilities].(map[string]any)
	source := w.c.PrepareEventSource(ctx, caps)
	t, err := w.c.StartTask(ctx, r, tool, w.Version(), nil)
	if err != nil {
		return nil, err
	}
	res := ext2026.Handle(t)
	res.Meta = w.c.WithGate(t, res.Meta)
	if source != nil {
		res.EventSource = source(t)
	}
	if tool.AwaitExternalRef > 0 {
		// The answer waited for the work to record what it started
		// elsewhere: its operation, if it recorded one, is shown too.
		res.Meta = w.c.WithOperation(ctx, t, res.Meta)
	}
	return res, nil
}

// discover adds the extension to the capabilities of server/discover.
func (w *Wire) discover(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	res, err := r.Next(ctx, r.Method, r.Req)
	if dr, ok := res.(*mcp.DiscoverResult); ok && err == nil {
		caps := mcp.ServerCapabilities{}
		if dr.Capabilities != nil {
			caps = *dr.Capabilities
		}
		caps.Extensions = maps.Clone(caps.Extensions)
		caps.AddExtension(ext2026.ExtensionID, map[string]any{})
		caps.AddExtension(wire.ExtensionIdempotency, map[string]any{})
		caps.AddExtension(wire.ExtensionTasksDelete, map[string]any{})
		caps.AddExtension(wire.ExtensionOperations, map[string]any{wire.EffectCheckSetting: true})
		caps.AddExtension(wire.ExtensionApprovals, map[string]any{})
		caps.AddExtension(events.ExtensionID, map[string]any{"listChanged": false})
		dr.Capabilities = &caps
		// The key older Events clients read is no field of the go-sdk's
		// capabilities: added to the JSON.
		return adapter.WithEventsCapability(dr)
	}
	return res, err
}

// listTools states each tool's task support in its _meta
// (wire.MetaTaskSupport), which this wire has no field for.
func (w *Wire) listTools(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	res, err := r.Next(ctx, r.Method, r.Req)
	lr, ok := res.(*mcp.ListToolsResult)
	if err != nil || !ok {
		return res, err
	}
	out := *lr
	out.Tools = make([]*mcp.Tool, len(lr.Tools))
	for i, t := range lr.Tools {
		ct := *t // the server's own Tool stays as it is
		ct.Meta = maps.Clone(t.Meta)
		if ct.Meta == nil {
			ct.Meta = mcp.Meta{}
		}
		p := w.c.Tool(t.Name)
		ct.Meta[wire.MetaTaskSupport] = string(p.Support)
		if p.Support != adapter.Forbidden {
			ct.Meta[wire.MetaMode] = w.c.Mode(ctx, r.Req, t.Name, p)
		}
		out.Tools[i] = &ct
	}
	return &out, nil
}

// gate checks the capability and parses the task ID, in the order the
// wire requires: capability first, then the ID.
func (w *Wire) gate(ctx context.Context, r *adapter.Request, rawID string) (task.Owner, task.ID, error) {
	if !ext2026.Declares(r.Meta()) {
		return "", "", ext2026.MissingCapability(r.Method)
	}
	id, err := adapter.ParseID(rawID)
	if err != nil {
		return "", "", err
	}
	return w.c.Requester(ctx, r.Req), id, nil
}

// getView is what tasks/get reads of a task's payloads: those
// ext2026.Detailed inlines (a completed task's result, a failed task's
// error, the input requests of one waiting for input), never the request
// nor the input responses.
var getView = store.ViewOptions{Result: true, Error: true, InputRequests: true}

func (w *Wire) get(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	var p ext2026.GetTaskParams
	if err := r.Decode(&p); err != nil {
		return nil, err
	}
	owner, id, err := w.gate(ctx, r, p.TaskID)
	if err != nil {
		return nil, err
	}
	// One read: the task with its latest operation and log position.
	v, err := w.c.Engine().View(ctx, owner, id, getView)
	if err != nil {
		return nil, w.c.EngineError(ctx, r.Method, owner, id, err)
	}
	t := v.Task
	w.c.AuditOutcome(ctx, r.Method, owner, t)
	res := ext2026.Detailed(w.c.Presented(w.c.PollInterval(owner, t, r.Req)))
	res.Meta = w.c.WithTree(ctx, t, w.c.WithView(v, res.Meta))
	return res, nil
}

func (w *Wire) update(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	var p ext2026.UpdateTaskParams
	if err := r.Decode(&p); err != nil {
		return nil, err
	}
	owner, id, err := w.gate(ctx, r, p.TaskID)
	if err != nil {
		return nil, err
	}
	_, ignored, err := w.c.Engine().Respond(ctx, owner, id, p.InputResponses, adapter.CheckAnswer)
	var term *engine.TerminalError
	var bad *engine.AnswerError
	if errors.As(err, &bad) {
		return nil, adapter.InvalidParams(fmt.Sprintf("inputResponses[%q]: %v; nothing was stored, and the task still waits for an answer", bad.Key, bad.Err))
	}
	if errors.As(err, &term) {
		// The task ended: its answers can reach nothing any more (a
		// question answered after the task was cancelled or failed), and
		// an acknowledgement would tell the client they were taken. This
		// is stricter than SEP-2663's "SHOULD ignore" of responses to keys
		// not outstanding, which mcptask keeps for a task still running
		// (below: the spec says so and the official conformance suite
		// checks it); here the client learns at once that its answer was
		// not used, with the status in the data. Nothing is stored.
		return nil, finishedError(id, term.Status)
	}
	if err != nil {
		return nil, w.c.EngineError(ctx, r.Method, owner, id, err)
	}
	if len(ignored) > 0 {
		// Responses to keys not outstanding (never issued, answered
		// already, or mistyped) are ignored and acknowledged: SEP-2663
		// says a server SHOULD, and the official conformance suite sends
		// one and expects the acknowledgement. A key that was never
		// issued is most likely a client's bug, so it is logged.
		w.c.Log().Debug("tasks/update ignored answers for unknown or answered input requests", "task", id, "keys", ignored)
	}
	return ext2026.Ack(), nil
}

// finishedError is the refusal of a tasks/update of a task that ended
// (status): -32602, with {"status": status} as its data.
func finishedError(id task.ID, status task.Status) error {
	data, _ := json.Marshal(map[string]string{"status": string(status)})
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Data: data,
		Message: fmt.Sprintf("task %s is %s: it takes no more input; the inputResponses were not stored", id, status)}
}

func (w *Wire) cancel(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	var p ext2026.CancelTaskParams
	if err := r.Decode(&p); err != nil {
		return nil, err
	}
	owner, id, err := w.gate(ctx, r, p.TaskID)
	if err != nil {
		return nil, err
	}
	_, err = w.c.Engine().Cancel(ctx, owner, id)
	var term *engine.TerminalError
	if err != nil && !errors.As(err, &term) { // cancelling a finished task is an idempotent no-op here
		return nil, w.c.EngineError(ctx, r.Method, owner, id, err)
	}
	return ext2026.Ack(), nil
}

// delete answers mcptask's tasks/delete (see wire.ExtensionTasksDelete):
// the owner's finished task and everything it holds are deleted.
func (w *Wire) delete(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	var p ext2026.CancelTaskParams // the same {taskId}
	if err := r.Decode(&p); err != nil {
		return nil, err
	}
	owner, id, err := w.gate(ctx, r, p.TaskID)
	if err != nil {
		return nil, err
	}
	if err := w.c.DeleteTask(ctx, r.Method, owner, id); err != nil {
		return nil, err
	}
	return ext2026.Ack(), nil
}

// operations answers wire.MethodOperationsList: the requester's own
// operations on the ledger.
func (w *Wire) operations(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	if !ext2026.Declares(r.Meta()) {
		return nil, ext2026.MissingCapability(r.Method)
	}
	return w.c.ServeListOperations(ctx, r, w.c.Requester(ctx, r.Req), ext2026.ResultTypeComplete)
}

// removed answers tasks/result and tasks/list, which the extension removed.
func (w *Wire) removed(_ context.Context, r *adapter.Request) (mcp.Result, error) {
	return nil, adapter.MethodNotFound(fmt.Sprintf("%s is not part of the %s tasks extension (%s); poll with tasks/get", r.Method, ext2026.Version, ext2026.ExtensionID))
}
