package mcptask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire/ext2026"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The 2025-11-25 wire: stateful sessions, params.task on tools/call,
// CreateTaskResult{task}, tasks/get|result|list|cancel.

// tasksCapability is the server's tasks capability on the 2025-11-25 wire.
var tasksCapability = map[string]any{
	"list":     map[string]any{},
	"cancel":   map[string]any{},
	"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
}

// withTasksCapability adds capabilities.tasks to an initialize result.
func withTasksCapability(res mcp.Result) (mcp.Result, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	caps, _ := m["capabilities"].(map[string]any)
	if caps == nil {
		caps = map[string]any{}
	}
	caps["tasks"] = tasksCapability
	m["capabilities"] = caps
	out, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &v1.RawResult{JSON: out}, nil
}

// withTaskSupport adds execution.taskSupport to each tool of a tools/list
// result (the go-sdk's Tool has no such field).
func (s *Server) withTaskSupport(res mcp.Result) (mcp.Result, error) {
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
		support := s.toolOptions(name).Support
		t["execution"], _ = json.Marshal(map[string]string{"taskSupport": string(support)})
	}
	m["tools"], _ = json.Marshal(tools)
	out, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &v1.RawResult{JSON: out}, nil
}

// callTool2025 answers a tools/call on the 2025-11-25 wire.
func (s *Server) callTool2025(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request, params *mcp.CallToolParamsRaw, opts ToolOptions) (mcp.Result, error) {
	rawTask, augmented := params.Meta[v1.MetaTaskParam]
	if !augmented {
		if opts.Support == Required {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("the tool %q must be called as a task (params.task)", params.Name)}
		}
		return next(ctx, method, req)
	}
	delete(params.Meta, v1.MetaTaskParam) // the handler sees the call as the client sent it
	if opts.Support == Forbidden {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("the tool %q does not support task-augmented calls", params.Name)}
	}
	b, err := json.Marshal(rawTask)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params.task is not valid JSON"}
	}
	ttl, err := v1.ParseTaskParam(b)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	t, err := s.startTask(ctx, next, method, req, params, v1.Version, ttl)
	if err != nil {
		return nil, err
	}
	s.watchStatus(req, t)
	return &v1.CreateTaskResult{Task: v1.FromTask(t)}, nil
}

// requesterOf returns the owner of the request stashed in ctx by the
// middleware.
func (s *Server) requesterOf(ctx context.Context) task.Owner {
	if req, ok := ctx.Value(requestKey{}).(mcp.Request); ok {
		return s.owner(ctx, req)
	}
	return ""
}

// parseID validates a client-supplied task ID.
func parseID(raw string) (task.ID, error) {
	id, err := task.ParseID(raw)
	if err != nil {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	return id, nil
}

func (s *Server) get2025(ctx context.Context, rawID string) (mcp.Result, error) {
	id, err := parseID(rawID)
	if err != nil {
		return nil, err
	}
	owner := s.requesterOf(ctx)
	t, err := s.eng.Get(ctx, owner, id)
	if err != nil {
		return nil, s.rpcError(ctx, methodGet, id, err)
	}
	return &v1.TaskResult{Task: v1.FromTask(s.pollInterval(owner, t))}, nil
}

func (s *Server) cancel2025(ctx context.Context, rawID string) (mcp.Result, error) {
	id, err := parseID(rawID)
	if err != nil {
		return nil, err
	}
	t, err := s.eng.Cancel(ctx, s.requesterOf(ctx), id)
	var term *engine.TerminalError
	if errors.As(err, &term) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("cannot cancel task %q: it is already %s", id, term.Status)}
	}
	if err != nil {
		return nil, s.rpcError(ctx, methodCancel, id, err)
	}
	return &v1.TaskResult{Task: v1.FromTask(t)}, nil
}

// listPageSize is the number of tasks of one tasks/list page.
const listPageSize = 50

func (s *Server) list2025(ctx context.Context, cursor string) (mcp.Result, error) {
	ts, next, err := s.eng.List(ctx, s.requesterOf(ctx), cursor, listPageSize)
	if err != nil {
		if errors.Is(err, engine.ErrBadCursor) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: pass the nextCursor of a previous tasks/list unchanged"}
		}
		s.log.Error("listing tasks", "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error while listing tasks"}
	}
	res := &v1.ListTasksResult{Tasks: make([]v1.Task, 0, len(ts)), NextCursor: next}
	for _, t := range ts {
		res.Tasks = append(res.Tasks, v1.FromTask(t))
	}
	return res, nil
}

// resultPoll is how often a blocked tasks/result re-reads its task, in case
// a change happened where this engine could not see it.
const resultPoll = time.Second

// result2025 blocks until the task is terminal, then returns exactly what
// the plain call would have returned, with the related-task _meta. While it
// waits, it forwards the task's input requests to the client on this
// request's stream and delivers the answers to the task.
func (s *Server) result2025(ctx context.Context, ss *mcp.ServerSession, rawID string) (mcp.Result, error) {
	id, err := parseID(rawID)
	if err != nil {
		return nil, err
	}
	owner := s.requesterOf(ctx)
	forwarded := map[string]bool{}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops forwards still waiting for the client
	for {
		changed := s.eng.Watch(id)
		t, err := s.eng.Get(ctx, owner, id)
		if err != nil {
			return nil, s.rpcError(ctx, methodResult, id, err)
		}
		if t.Status.Terminal() {
			s.auditOutcome(ctx, methodResult, t)
			return finalResult(t)
		}
		for key, req := range t.InputRequests {
			if !forwarded[key] && ss != nil {
				forwarded[key] = true
				go s.forwardInput(ctx, ss, owner, id, key, req)
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		case <-time.After(resultPoll):
		}
	}
}

// finalResult is the tasks/result answer of a terminal task.
func finalResult(t *task.Task) (mcp.Result, error) {
	switch t.Status {
	case task.Completed:
		res := &v1.RawResult{JSON: t.Result}
		res.SetMeta(map[string]any{v1.MetaRelatedTask: v1.RelatedTask(t.ID)})
		return res, nil
	case task.Failed:
		e := t.Error
		if e == nil {
			e = &task.Error{Code: task.CodeInternalError, Message: "the task failed"}
		}
		return nil, &jsonrpc.Error{Code: e.Code, Message: e.Message, Data: e.Data}
	default: // cancelled
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task %q was cancelled and has no result", t.ID)}
	}
}

// forwardInput sends one input request of a task to the client as a
// server-to-client request tied to the task, and delivers the answer.
func (s *Server) forwardInput(ctx context.Context, ss *mcp.ServerSession, owner task.Owner, id task.ID, key string, raw json.RawMessage) {
	var req struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		return
	}
	related := map[string]any{v1.MetaRelatedTask: v1.RelatedTask(id)}
	var answer any
	var err error
	switch req.Method {
	case "elicitation/create":
		var p mcp.ElicitParams
		if err = json.Unmarshal(req.Params, &p); err == nil {
			p.Meta = withMeta(p.Meta, related)
			answer, err = ss.Elicit(ctx, &p)
		}
	case "sampling/createMessage":
		var p mcp.CreateMessageParams
		if err = json.Unmarshal(req.Params, &p); err == nil {
			p.Meta = withMeta(p.Meta, related)
			answer, err = ss.CreateMessage(ctx, &p)
		}
	default:
		err = fmt.Errorf("cannot forward %q on the 2025-11-25 wire", req.Method)
	}
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("forwarding a task's input request", "task", id, "key", key, "method", req.Method, "err", err)
		}
		return
	}
	b, err := json.Marshal(answer)
	if err != nil {
		return
	}
	if _, _, err := s.eng.Respond(context.WithoutCancel(ctx), owner, id, map[string]json.RawMessage{key: b}); err != nil {
		var term *engine.TerminalError
		if !errors.As(err, &term) {
			s.log.Warn("delivering a task's input", "task", id, "key", key, "err", err)
		}
	}
}

func withMeta(m mcp.Meta, add map[string]any) mcp.Meta {
	if m == nil {
		m = mcp.Meta{}
	}
	for k, v := range add {
		m[k] = v
	}
	return m
}

// removedOn2026 is the answer to tasks/result and tasks/list on the
// 2026-07-28 wire, where the extension removed them.
func removedOn2026(method string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%s is not part of the %s tasks extension (%s); poll with tasks/get", method, ext2026.Version, ext2026.ExtensionID)}
}
