package mcptask

import (
	"context"
	"errors"
	"strings"

	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/internal/httpedge"
	"github.com/mcptask/mcptask/internal/tracing"
	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wireOf picks the wire of a request, once: the handshake methods belong
// to their wire (initialize to the stateful 2025-11-25 one,
// server/discover to 2026-07-28); any other request is on 2026-07-28 when
// its _meta names that protocol version (or a later one), else on
// 2025-11-25. Nothing else in the server asks which wire it is on.
func (s *Server) wireOf(method string, req mcp.Request) adapter.Wire {
	switch method {
	case "initialize":
		return s.w25
	case "server/discover":
		return s.w26
	}
	if ext2026.UsesWire(adapter.MetaOf(req)) {
		return s.w26
	}
	return s.w25
}

// middleware dispatches each request the tasks protocol concerns to the
// handler of its wire's table; anything else passes through.
func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		// A session of a Handler with the fast lane: recorded there.
		httpedge.Register(ctx, req)
		if method == wire.MethodToolsCall {
			// An in-process re-run of a recovered task is on no wire.
			if res, err, ok := s.core.RunAttached(ctx, next, method, req); ok {
				return res, err
			}
			if err := s.core.RefuseUnknownEffects(ctx, req, s.effectTool); err != nil {
				return nil, err
			}
		}
		if strings.HasPrefix(method, "events/") || strings.HasPrefix(method, "io.mcptask/approvals/") {
			// The requester's request rate applies, as to tasks/*; the
			// events/* and approvers' handlers read the request (its
			// requester).
			if err := s.core.AllowRequest(ctx, method, req); err != nil {
				s.eng.Observer().Request(method, "limited")
				return nil, err
			}
			return next(context.WithValue(ctx, eventsReqKey{}, req), method, req)
		}
		h := s.wireOf(method, req).Table()[method]
		if h == nil {
			return next(ctx, method, req)
		}
		if !wire.IsTasksMethod(method) {
			return h(ctx, &adapter.Request{Method: method, Req: req, Next: next})
		}
		return s.limitedTasksRequest(ctx, method, req, func(ctx context.Context) (mcp.Result, error) {
			// The registered method (below) runs h, after any middleware
			// installed inside this one.
			return next(context.WithValue(ctx, dispatchKey{}, &dispatch{h: h, req: req}), method, req)
		})
	}
}

// limitedTasksRequest is what the middleware does around a tasks/*
// request, on either lane: the request rate of its requester (a refusal
// is answered at once), then run, the rest of its handling, and the
// request metrics of the outcome.
func (s *Server) limitedTasksRequest(ctx context.Context, method string, req mcp.Request, run func(context.Context) (mcp.Result, error)) (mcp.Result, error) {
	res, err, _ := s.limitedTasksRequestIf(ctx, method, req, nil, run)
	return res, err
}

// limitedTasksRequestIf is limitedTasksRequest for a request that the fast
// lane (httpedge) answers only if take (when not nil), asked once the request rate
// allowed it, says so. When take says no, the rate's charge is undone and
// nothing else happens (served is false): the request goes to the go-sdk,
// which charges it there.
func (s *Server) limitedTasksRequestIf(ctx context.Context, method string, req mcp.Request, take func(context.Context) bool,
	run func(context.Context) (mcp.Result, error)) (res mcp.Result, err error, served bool) {
	obs := s.eng.Observer()
	undo, err := s.core.ReserveRequest(ctx, method, req)
	if err != nil {
		obs.Request(method, "limited")
		return nil, err, true
	}
	if take != nil && !take(ctx) {
		undo()
		return nil, nil, false
	}
	res, err = run(ctx)
	if err != nil {
		obs.Request(method, "error")
	} else {
		obs.Request(method, "ok")
	}
	return res, err, true
}

type dispatchKey struct{}

// dispatch is the wire's handler the middleware chose for a tasks/*
// request.
type dispatch struct {
	h   adapter.Handler
	req mcp.Request
}

// addMethods registers the tasks/* methods on the mcp.Server. The go-sdk
// decodes each request's params (case-sensitively, before any middleware
// or limit) into the union of what the two wires accept for that method, so
// a malformed request is refused as invalid params before it costs the
// requester anything; the chosen wire then reads the params in its own
// shapes.
func (s *Server) addMethods() error {
	return errors.Join(
		addTasksMethod[ext2026.GetTaskParams](s, wire.MethodTasksGet),
		addTasksMethod[ext2026.UpdateTaskParams](s, wire.MethodTasksUpdate),
		addTasksMethod[ext2026.CancelTaskParams](s, wire.MethodTasksCancel),
		addTasksMethod[v1.TaskIDParams](s, wire.MethodTasksResult),
		addTasksMethod[v1.ListTasksParams](s, wire.MethodTasksList),
		addTasksMethod[ext2026.CancelTaskParams](s, wire.MethodTasksDelete), // {taskId}, as cancel
		addTasksMethod[adapter.ListOperationsParams](s, wire.MethodOperationsList),
	)
}

// addTasksMethod registers method with params of type T; the handler runs
// the wire's handler the middleware chose.
func addTasksMethod[T any, P interface {
	*T
	mcp.Params
}](s *Server, method string) error {
	return mcp.AddReceivingCustomMethod(s.mcp, method, func(ctx context.Context, ss *mcp.ServerSession, p P) (mcp.Result, error) {
		d, ok := ctx.Value(dispatchKey{}).(*dispatch)
		if !ok {
			return nil, adapter.InternalError(method + " reached the server without the mcptask middleware")
		}
		// p is a nil pointer when the params were absent or null.
		var params mcp.Params
		if p != nil {
			params = p
		}
		return s.runTasksHandler(ctx, d.h, &adapter.Request{Method: method, Req: d.req, Params: p, Session: ss}, params)
	})
}

// runTasksHandler runs the wire's handler h of a tasks/* request r, whose
// params are p (nil when absent or null), on either lane.
func (s *Server) runTasksHandler(ctx context.Context, h adapter.Handler, r *adapter.Request, p mcp.Params) (mcp.Result, error) {
	if p != nil && s.traceStore {
		// The store spans of the request join the trace of its _meta, if
		// it has one.
		ctx = tracing.FromMeta(ctx, p.GetMeta())
	}
	return h(ctx, r)
}
