package mcptask

import (
	"context"
	"net/http"

	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/internal/adapter/wire2025"
	"github.com/mcptask/mcptask/internal/httpedge"
	"github.com/mcptask/mcptask/internal/tracing"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Handler returns the Streamable HTTP handler of the server: one endpoint
// for both wire revisions. The go-sdk serves the 2026-07-28 wire only on a
// stateless handler and the 2025-11-25 wire (sessions, server-to-client
// requests) only on a stateful one, so each request goes to the handler of
// its wire:
//
//   - a request with Mcp-Session-Id belongs to a 2025-11-25 session;
//   - otherwise an MCP-Protocol-Version header of 2026-07-28 or later (or an
//     unknown version sorting after it) is stateless;
//   - without that header, a POST whose params._meta names a protocol
//     version is stateless;
//   - everything else, notably initialize, is stateful.
//
// With Options.FastLane, the 2026-07-28 tasks/get, tasks/update,
// tasks/cancel and tasks/delete, the 2026-07-28 tools/call answered with
// a task, and the 2025-11-25 tasks/get and tasks/result of a finished
// task, are answered on the fast lane, without the go-sdk's per-request
// machinery.
//
// opts configures both go-sdk handlers (nil means defaults); Stateless is
// set per handler. The stateless handler also gets the routing check of the
// tasks methods ([ext2026.RoutingGuard]).
func (s *Server) Handler(opts *mcp.StreamableHTTPOptions) http.Handler {
	return httpedge.New(httpedge.Config{
		Server:   s.mcp,
		V2026:    s.w26,
		V2025:    s.w25,
		FastLane: s.fastLane,
		Tasks:    edgeTasks{s},
		Options:  opts,
		Events:   s.serveEventStream,
	})
}

// edgeTasks is the server's handling of the requests the edge's fast lane
// answers (httpedge.Tasks).
type edgeTasks struct{ s *Server }

func (e edgeTasks) Run(ctx context.Context, h adapter.Handler, r *adapter.Request, take func(context.Context) bool) (mcp.Result, error, bool) {
	s := e.s
	res, err, served := s.limitedTasksRequestIf(ctx, r.Method, r.Req, take, func(ctx context.Context) (mcp.Result, error) {
		return s.runTasksHandler(ctx, h, r, r.Params)
	})
	if served {
		s.fastServed.Add(1)
	}
	return res, err, served
}

func (e edgeTasks) Finished(ctx context.Context, req mcp.Request, p mcp.Params) bool {
	s := e.s
	tp, ok := p.(*v1.TaskIDParams)
	if !ok {
		return false
	}
	id, err := task.ParseID(tp.TaskID)
	if err != nil {
		return true
	}
	if s.traceStore {
		// Its store span joins the request's trace, as the handler's.
		ctx = tracing.FromMeta(ctx, p.GetMeta())
	}
	// Read as the handler reads it (from the view cache, if any, the
	// second time).
	v, err := s.eng.View(ctx, s.core.Requester(ctx, req), id, wire2025.ResultView)
	return err != nil || v.Task.Status.Terminal()
}

// Call creates the task of the tools/call r on the fast lane when the
// server would answer it with a task (see the wires' TakesCall),
// as the middleware would on the go-sdk's path: the unknown-effect check,
// then the wire's handler, which validates the arguments against the
// tool's schema and creates the task. The task's work calls the tool
// through the rest of the go-sdk's handler chain, as on the go-sdk's path
// (the go-sdk's validation and typed handler included). The work of a
// 2025-11-25 call runs on the call's session, as on the go-sdk's path;
// that of a 2026-07-28 call on a session of the server's own
// (adapter.OwnSession), where the go-sdk's path gives it the call's temporary
// session, closed once the task is created: a tool that reads its
// session's client info sees the server's own client ("mcptask-lane"),
// and what it sends its session goes nowhere instead of failing.
func (e edgeTasks) Call(ctx context.Context, r *adapter.Request) (mcp.Result, error, bool) {
	s := e.s
	req, ok := r.Req.(*mcp.CallToolRequest)
	if !ok || s.next == nil {
		return nil, nil, false
	}
	w, ss := adapter.Wire(s.w26), r.Session
	if ss != nil {
		// A 2025-11-25 call of a session: its work runs on that session,
		// as on the go-sdk's path.
		if !s.w25.TakesCall(ctx, req) {
			return nil, nil, false
		}
		w = s.w25
	} else if !s.w26.TakesCall(ctx, req) {
		return nil, nil, false
	}
	if _, rerun := req.Params.Meta[wire.MetaRerun]; rerun {
		return nil, nil, false // (RunAttached's, on the go-sdk's path)
	}
	if ss == nil {
		if ss = s.lane.Get(s.mcp); ss == nil {
			return nil, nil, false
		}
	}
	work := &mcp.CallToolRequest{Session: ss, Params: req.Params, Extra: req.Extra}
	r.Next = func(ctx context.Context, method string, _ mcp.Request) (mcp.Result, error) {
		return s.next(ctx, method, work)
	}
	s.fastServed.Add(1)
	if err := s.core.RefuseUnknownEffects(ctx, req, s.effectTool); err != nil {
		return nil, err, true
	}
	res, err := w.Table()[wire.MethodToolsCall](ctx, r)
	return res, err, true
}

func (e edgeTasks) CallsTool(name string) bool { return e.s.core.Tool(name).OnLane() }

// callDirect calls a tool for a re-run through the go-sdk's handler chain
// below the middleware, on the lane's session (adapter.Config.Direct);
// ok is false when that session cannot be connected.
func (s *Server) callDirect(ctx context.Context, p *mcp.CallToolParamsRaw) (_ mcp.Result, _ error, ok bool) {
	ss := s.lane.Get(s.mcp)
	if ss == nil || s.next == nil {
		return nil, nil, false
	}
	res, err := s.next(ctx, wire.MethodToolsCall, &mcp.CallToolRequest{Session: ss, Params: p})
	return res, err, true
}
