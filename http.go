package mcptask

import (
	"context"
	"net/http"

	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/internal/adapter/wire2025"
	"github.com/mcptask/mcptask/internal/httpedge"
	"github.com/mcptask/mcptask/internal/tracing"
	"github.com/mcptask/mcptask/task"
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
// tasks/cancel and tasks/delete, and the 2025-11-25 tasks/get and
// tasks/result of a finished task, are answered on the fast lane, without
// the go-sdk's per-request machinery.
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
