package mcptask

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
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
		if method == wire.MethodToolsCall {
			// An in-process re-run of a recovered task is on no wire.
			if res, err, ok := s.core.RunAttached(ctx, next, method, req); ok {
				return res, err
			}
		}
		h := s.wireOf(method, req).Table()[method]
		if h == nil {
			return next(ctx, method, req)
		}
		if !wire.IsTasksMethod(method) {
			return h(ctx, &adapter.Request{Method: method, Req: req, Next: next})
		}
		if err := s.core.AllowRequest(ctx, method, req); err != nil {
			return nil, err
		}
		// The registered method (below) runs h, after any middleware
		// installed inside this one.
		return next(context.WithValue(ctx, dispatchKey{}, &dispatch{h: h, req: req}), method, req)
	}
}

type dispatchKey struct{}

// dispatch is the wire's handler the middleware chose for a tasks/*
// request.
type dispatch struct {
	h   adapter.Handler
	req mcp.Request
}

// addMethods registers the tasks/* methods on the mcp.Server. Their params
// are kept raw: each wire decodes them into its own shapes.
func (s *Server) addMethods() error {
	var errs []error
	for _, m := range []string{wire.MethodTasksGet, wire.MethodTasksUpdate, wire.MethodTasksCancel, wire.MethodTasksResult, wire.MethodTasksList} {
		errs = append(errs, mcp.AddReceivingCustomMethod(s.mcp, m, tasksMethod(m)))
	}
	return errors.Join(errs...)
}

func tasksMethod(method string) func(context.Context, *mcp.ServerSession, *rawParams) (mcp.Result, error) {
	return func(ctx context.Context, ss *mcp.ServerSession, p *rawParams) (mcp.Result, error) {
		d, ok := ctx.Value(dispatchKey{}).(*dispatch)
		if !ok {
			return nil, adapter.InternalError(method + " reached the server without the mcptask middleware")
		}
		var raw json.RawMessage
		if p != nil { // params absent or null: the go-sdk passes a nil pointer
			raw = p.raw
		}
		return d.h(ctx, &adapter.Request{Method: method, Req: d.req, Params: raw, Session: ss})
	}
}

// rawParams are the params of a tasks/* request as they came: the go-sdk
// decodes only their _meta.
type rawParams struct {
	mcp.ParamsBase
	raw json.RawMessage
}

// UnmarshalJSON keeps the params and decodes their _meta.
func (p *rawParams) UnmarshalJSON(b []byte) error {
	var base struct {
		Meta mcp.Meta `json:"_meta,omitempty"`
	}
	if err := json.Unmarshal(b, &base); err != nil {
		return err
	}
	p.Meta = base.Meta
	p.raw = append(json.RawMessage(nil), b...)
	return nil
}

// MarshalJSON returns the params as they came.
func (p *rawParams) MarshalJSON() ([]byte, error) {
	if len(p.raw) == 0 {
		return []byte("{}"), nil
	}
	return p.raw, nil
}
