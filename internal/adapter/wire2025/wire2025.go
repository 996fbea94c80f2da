// Package wire2025 is the server side of the experimental tasks of MCP
// 2025-11-25: stateful sessions, the server's tasks capability in
// initialize, each tool's execution.taskSupport in tools/list, params.task
// on tools/call answered with CreateTaskResult{task}, and tasks/get,
// tasks/result (which blocks and forwards the task's input requests to the
// client), tasks/list and tasks/cancel, and mcptask's tasks/delete; notifications/tasks/status on
// connections served by [Wire.Serve]. tasks/update is not part of it.
package wire2025

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/internal/push"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/events"
	"github.com/mcptask/mcptask/wire/ext2026"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Wire is the 2025-11-25 wire.
type Wire struct {
	c     *adapter.Core
	table adapter.Table

	push     push.Options
	base     context.Context // ends the follows of every session (Close)
	stop     context.CancelFunc
	conns    sync.Map // *mcp.ServerSession -> *conn, for sessions of Serve
	sessions sync.Map // *mcp.ServerSession -> *sessionPush
	streams  sync.Map // Streamable HTTP session ID -> *streamSet
}

// New returns the wire on core c; o configures its status notifications.
func New(c *adapter.Core, o push.Options) *Wire {
	w := &Wire{c: c, push: o.WithDefaults()}
	w.base, w.stop = context.WithCancel(context.Background())
	w.table = adapter.Table{
		wire.MethodToolsCall:      w.callTool,
		"initialize":              w.initialize,
		"tools/list":              w.listTools,
		wire.MethodTasksGet:       w.get,
		wire.MethodTasksUpdate:    w.update,
		wire.MethodTasksCancel:    w.cancel,
		wire.MethodTasksResult:    w.result,
		wire.MethodTasksList:      w.list,
		wire.MethodTasksDelete:    w.delete,
		wire.MethodOperationsList: w.operations,
	}
	return w
}

// Version returns v20251125.Version.
func (w *Wire) Version() string { return v1.Version }

// Table returns the wire's methods.
func (w *Wire) Table() adapter.Table { return w.table }

// callTool answers a tools/call: with a task handle when the call carries
// params.task (lifted into _meta by the transport edge), synchronously
// otherwise.
// TakesCall reports whether callTool answers the tools/call req with a
// task (or with the error of its task parameter, or of a limit) rather
// than as a plain call: the call carries the task parameter, the tool's
// policy allows the lane (ToolPolicy.OnLane), and the fleet's switches do
// not answer it synchronously. The fast lane creates only the tasks of
// such calls.
func (w *Wire) TakesCall(ctx context.Context, req *mcp.CallToolRequest) bool {
	params := req.Params
	if params == nil {
		return false
	}
	if _, augmented := params.Meta[wire.MetaTaskParam]; !augmented {
		return false
	}
	tool := w.c.Tool(params.Name)
	return tool.OnLane() && !w.c.FallsBackSync(ctx, req, params.Name, tool)
}

func (w *Wire) callTool(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	params := r.CallParams()
	if params == nil {
		return r.Next(ctx, r.Method, r.Req)
	}
	tool := w.c.Tool(params.Name)
	rawTask, augmented := params.Meta[wire.MetaTaskParam]
	if !augmented {
		if tool.Support == adapter.Required {
			return nil, adapter.MethodNotFound(fmt.Sprintf("the tool %q must be called as a task (params.task)", params.Name))
		}
		return r.Next(ctx, r.Method, r.Req)
	}
	delete(params.Meta, wire.MetaTaskParam) // the handler sees the call as the client sent it
	if tool.Support == adapter.Forbidden {
		return nil, adapter.MethodNotFound(fmt.Sprintf("the tool %q does not support task-augmented calls", params.Name))
	}
	b, err := json.Marshal(rawTask)
	if err != nil {
		return nil, adapter.InvalidParams("params.task is not valid JSON")
	}
	ttl, err := v1.ParseTaskParam(b)
	if err != nil {
		return nil, adapter.InvalidParams(err.Error())
	}
	if w.c.SyncFallback(ctx, r.Req, params.Name, tool) {
		// Drained, with the synchronous fallback: a plain call, as for a
		// receiver that ignores params.task.
		return r.Next(ctx, r.Method, r.Req)
	}
	source := w.c.PrepareEventSource(ctx, clientCaps(r.Req))
	t, err := w.c.StartTask(ctx, r, tool, w.Version(), ttl)
	if err != nil {
		return nil, err
	}
	w.follow(r.Req, t.Owner, t, t, false)
	res := &v1.CreateTaskResult{Task: v1.FromTask(t)}
	res.Meta = w.c.WithGate(t, res.Meta)
	if source != nil {
		res.EventSource = source(t)
	}
	return res, nil
}

// tasksCapability is the server's tasks capability on this wire.
var tasksCapability = map[string]any{
	"list":     map[string]any{},
	"cancel":   map[string]any{},
	"delete":   map[string]any{}, // mcptask's tasks/delete (wire.MethodTasksDelete)
	"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
}

// initialize adds capabilities.tasks to the initialize result.
func (w *Wire) initialize(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	res, err := r.Next(ctx, r.Method, r.Req)
	if err != nil || res == nil {
		return res, err
	}
	m, err := asMap(res)
	if err != nil {
		return nil, err
	}
	caps, _ := m["capabilities"].(map[string]any)
	if caps == nil {
		caps = map[string]any{}
	}
	caps["tasks"] = tasksCapability
	// MCP Events: the key older clients read, and the extension.
	caps["events"] = map[string]any{"listChanged": false}
	exts, _ := caps["extensions"].(map[string]any)
	if exts == nil {
		exts = map[string]any{}
	}
	exts[events.ExtensionID] = map[string]any{"listChanged": false}
	caps["extensions"] = exts
	// This revision has no extensions: the idempotency promise is an
	// experimental capability here.
	exp, _ := caps["experimental"].(map[string]any)
	if exp == nil {
		exp = map[string]any{}
	}
	exp[wire.ExtensionIdempotency] = map[string]any{}
	exp[wire.ExtensionTaskNotifications] = map[string]any{}
	exp[wire.ExtensionOperations] = map[string]any{wire.EffectCheckSetting: true}
	exp[wire.ExtensionApprovals] = map[string]any{}
	caps["experimental"] = exp
	m["capabilities"] = caps
	out, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &v1.RawResult{JSON: out}, nil
}

func asMap(res mcp.Result) (map[string]any, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// listTools adds execution.taskSupport to each tool of a tools/list result
// (the go-sdk's Tool has no such field).
func (w *Wire) listTools(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	res, err := r.Next(ctx, r.Method, r.Req)
	if err != nil || res == nil {
		return res, err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(m["tools"], &tools); err != nil {
		return nil, err
	}
	for _, t := range tools {
		var name string
		_ = json.Unmarshal(t["name"], &name)
		p := w.c.Tool(name)
		t["execution"], _ = json.Marshal(map[string]string{"taskSupport": string(p.Support)})
		if p.Support == adapter.Forbidden {
			continue
		}
		// The requester's mode under the rollout switches, as on 2026.
		var meta map[string]any
		_ = json.Unmarshal(t["_meta"], &meta)
		if meta == nil {
			meta = map[string]any{}
		}
		meta[wire.MetaMode] = w.c.Mode(ctx, r.Req, name, p)
		t["_meta"], _ = json.Marshal(meta)
	}
	m["tools"], _ = json.Marshal(tools)
	out, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &v1.RawResult{JSON: out}, nil
}

// taskID decodes the params of tasks/get, tasks/result and tasks/cancel
// and validates their task ID.
func taskID(r *adapter.Request) (task.ID, error) {
	var p v1.TaskIDParams
	if err := r.Decode(&p); err != nil {
		return "", err
	}
	return adapter.ParseID(p.TaskID)
}

// getView is what tasks/get reads of a task's payloads: the input
// requests, whose keys the follow of a session compares (push.Follow's
// signature); v1.FromTask tells a tool error from Task.ToolError (the
// store's tool_error column), without the result.
var getView = store.ViewOptions{InputRequests: true}

func (w *Wire) get(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	id, err := taskID(r)
	if err != nil {
		return nil, err
	}
	owner := w.c.Requester(ctx, r.Req)
	// One read: the task with its latest operation and log position.
	// This wire's answer shows neither the request nor the result: the
	// result is read only when it may be a tool error (shown failed), the
	// input requests for the status notifications' follow.
	v, err := w.c.Engine().View(ctx, owner, id, getView)
	if err != nil {
		return nil, w.c.EngineError(ctx, r.Method, owner, id, err)
	}
	t := v.Task
	// A client that reads a task (again) on a session gets its status
	// notifications there, e.g. after reconnecting.
	w.follow(r.Req, owner, t, t, true)
	res := &v1.TaskResult{Task: v1.FromTask(w.c.PollInterval(owner, t, r.Req))}
	res.Meta = w.c.WithTree(ctx, t, w.c.WithView(v, res.Meta))
	return res, nil
}

func (w *Wire) cancel(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	id, err := taskID(r)
	if err != nil {
		return nil, err
	}
	owner := w.c.Requester(ctx, r.Req)
	t, err := w.c.Engine().Cancel(ctx, owner, id)
	var term *engine.TerminalError
	if errors.As(err, &term) {
		return nil, adapter.InvalidParams(fmt.Sprintf("cannot cancel task %q: it is already %s", id, term.Status))
	}
	if err != nil {
		return nil, w.c.EngineError(ctx, r.Method, owner, id, err)
	}
	return &v1.TaskResult{Task: v1.FromTask(t)}, nil
}

// delete answers mcptask's tasks/delete (advertised as
// capabilities.tasks.delete) with an empty result: the owner's finished
// task and everything it holds are deleted.
func (w *Wire) delete(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	id, err := taskID(r)
	if err != nil {
		return nil, err
	}
	if err := w.c.DeleteTask(ctx, r.Method, w.c.Requester(ctx, r.Req), id); err != nil {
		return nil, err
	}
	return &v1.RawResult{JSON: []byte(`{}`)}, nil
}

// operations answers wire.MethodOperationsList: the requester's own
// operations on the ledger.
func (w *Wire) operations(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	return w.c.ServeListOperations(ctx, r, w.c.Requester(ctx, r.Req), "")
}

// listPageSize is the number of tasks of one tasks/list page.
const listPageSize = 50

func (w *Wire) list(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	var p v1.ListTasksParams
	if err := r.Decode(&p); err != nil {
		return nil, err
	}
	ts, next, err := w.c.Engine().List(ctx, w.c.Requester(ctx, r.Req), p.Cursor, listPageSize)
	if err != nil {
		if errors.Is(err, engine.ErrBadCursor) {
			return nil, adapter.InvalidParams("invalid cursor: pass the nextCursor of a previous tasks/list unchanged")
		}
		w.c.Log().Error("listing tasks", "err", err)
		return nil, adapter.InternalError("internal error while listing tasks")
	}
	res := &v1.ListTasksResult{Tasks: make([]v1.Task, 0, len(ts)), NextCursor: next}
	for _, t := range ts {
		res.Tasks = append(res.Tasks, v1.FromTask(t))
	}
	return res, nil
}

// update answers tasks/update, which this wire does not have: a task's
// input is answered during tasks/result.
func (w *Wire) update(_ context.Context, r *adapter.Request) (mcp.Result, error) {
	return nil, adapter.MethodNotFound(fmt.Sprintf("%s belongs to the %s tasks extension; on %s, answer the server's requests during tasks/result", r.Method, ext2026.Version, v1.Version))
}

// clientCaps returns the capabilities the client of req's session
// declared at initialize, as JSON values (extensions and experimental
// ones: the go-sdk keeps no other key), nil when unknown.
func clientCaps(req mcp.Request) map[string]any {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return nil
	}
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil {
		return nil
	}
	caps := map[string]any{}
	if p.Capabilities.Extensions != nil {
		caps["extensions"] = p.Capabilities.Extensions
	}
	if _, ok := p.Capabilities.Experimental[events.ExtensionID]; ok {
		caps["events"] = map[string]any{}
	}
	return caps
}
