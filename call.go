package mcptask

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type requestKey struct{}

// middleware routes tool calls through the task engine, advertises the
// tasks extension, and hands the request to the tasks/* methods.
func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/call":
			return s.callTool(ctx, next, method, req)
		case "server/discover":
			res, err := next(ctx, method, req)
			if dr, ok := res.(*mcp.DiscoverResult); ok && err == nil {
				caps := mcp.ServerCapabilities{}
				if dr.Capabilities != nil {
					caps = *dr.Capabilities
				}
				caps.Extensions = maps.Clone(caps.Extensions)
				caps.AddExtension(ext2026.ExtensionID, map[string]any{})
				dr.Capabilities = &caps
			}
			return res, err
		case "initialize":
			res, err := next(ctx, method, req)
			if err != nil || res == nil {
				return res, err
			}
			return withTasksCapability(res)
		case "tools/list":
			res, err := next(ctx, method, req)
			if err != nil || res == nil || ext2026.UsesWire(req.GetParams().GetMeta()) {
				return res, err
			}
			return s.withTaskSupport(res)
		}
		if isTasksMethod(method) {
			if err := s.allowRequest(ctx, method, req); err != nil {
				return nil, err
			}
			return next(context.WithValue(ctx, requestKey{}, req), method, req)
		}
		return next(ctx, method, req)
	}
}

// callTool answers a tools/call: synchronously, or with a task handle.
func (s *Server) callTool(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request) (mcp.Result, error) {
	params, ok := req.GetParams().(*mcp.CallToolParamsRaw)
	if !ok || params == nil {
		return next(ctx, method, req)
	}
	opts := s.toolOptions(params.Name)
	meta := params.GetMeta()
	if id, ok := s.rerunTarget(meta); ok {
		return s.runAttached(ctx, id, next, method, req)
	}
	if !ext2026.UsesWire(meta) {
		return s.callTool2025(ctx, next, method, req, params, opts)
	}
	if opts.Support == Forbidden {
		return next(ctx, method, req)
	}
	if !ext2026.Declares(meta) {
		if opts.Support == Required {
			return nil, ext2026.MissingCapability("the tool " + params.Name)
		}
		return next(ctx, method, req)
	}
	if opts.Synchronous != nil {
		if ctr, ok := req.(*mcp.CallToolRequest); ok && opts.Synchronous(ctr) {
			return next(ctx, method, req)
		}
	}
	t, err := s.startTask(ctx, next, method, req, params, ext2026.Version, nil)
	if err != nil {
		return nil, err
	}
	return ext2026.Handle(t), nil
}

// startTask creates a task for a tools/call and starts its work: the rest
// of the handler chain for that call.
func (s *Server) startTask(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request, params *mcp.CallToolParamsRaw, wire string, ttl *time.Duration) (*task.Task, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "cannot encode the call's params: " + err.Error()}
	}
	key, err := idempotencyKey(params.Meta)
	if err != nil {
		return nil, err
	}
	owner := s.owner(ctx, req)
	if err := s.allowCreate(ctx, owner, params.Name); err != nil {
		return nil, err
	}
	t, err := s.eng.Start(ctx, engine.StartSpec{
		Owner:          owner,
		Tool:           params.Name,
		Wire:           wire,
		TTL:            ttl,
		Request:        raw,
		IdempotencyKey: key,
		MaxActive:      s.opts.Limits.MaxActiveTasks,
	}, toolWork(next, method, req))
	if errors.Is(err, engine.ErrIdempotencyConflict) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the idempotency key was already used for a call of another tool"}
	}
	if errors.Is(err, engine.ErrTooManyActive) {
		return nil, s.tooManyActive(ctx, owner, params.Name)
	}
	if err != nil {
		s.log.Error("creating task", "tool", params.Name, "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server could not create the task: " + err.Error()}
	}
	return t, nil
}

// toolWork returns the work of a task: the tool call through the rest of
// the server's handler chain, with its result or error translated for the
// store.
func toolWork(next mcp.MethodHandler, method string, req mcp.Request) engine.Work {
	return func(ctx context.Context) (json.RawMessage, error) {
		res, err := next(ctx, method, req)
		if err != nil {
			var je *jsonrpc.Error
			if errors.As(err, &je) {
				return nil, &task.Error{Code: je.Code, Message: je.Message, Data: je.Data}
			}
			if errors.Is(err, context.Canceled) {
				return nil, &task.Error{Code: task.CodeInternalError, Message: "the tool stopped: " + err.Error()}
			}
			return nil, &task.Error{Code: task.CodeInternalError, Message: err.Error()}
		}
		if ctr, ok := res.(*mcp.CallToolResult); ok && ctr.InputRequests != nil {
			return nil, &task.Error{Code: task.CodeInternalError, Message: "the tool returned a multi round-trip input request while running as a task; a task asks for input with mcptask.FromContext(ctx).Elicit"}
		}
		return resultJSON(res)
	}
}

// resultJSON encodes a tool result for storage, without the envelope's
// resultType: the stored result is the plain CallToolResult.
func resultJSON(res mcp.Result) (json.RawMessage, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, &task.Error{Code: task.CodeInternalError, Message: "cannot encode the tool's result: " + err.Error()}
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return b, nil
	}
	if _, ok := m["resultType"]; !ok {
		return b, nil
	}
	delete(m, "resultType")
	return json.Marshal(m)
}
