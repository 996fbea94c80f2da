// Package mcptask adds durable MCP Tasks to servers built on the official Go
// SDK (github.com/modelcontextprotocol/go-sdk).
//
// A server installs tasks with [New], registers its tools with [AddTool]
// (or marks existing tools with [Server.SetTaskSupport]), and serves HTTP
// through [Server.Handler]. Tool handlers stay ordinary go-sdk handlers; when
// a call runs as a task, [FromContext] gives the handler its [Task]: it can
// set a status message and ask the client for input, and its context is
// cancelled when the client cancels the task.
//
// The tasks live in an engine ([engine.Engine]) on a durable store
// (store/sqlite by default), so they survive restarts of the server.
package mcptask

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configures a [Server]. The zero value is usable.
type Options struct {
	// Owner returns the requester a request acts for; tasks are bound to
	// it and invisible to any other requester. Nil means: the
	// authenticated user of the request's bearer token if any
	// ([task.TokenOwner]), else an anonymous requester
	// ([task.AnonymousOwner]) scoped to the request's 2025-11-25 session,
	// if it has one.
	Owner func(ctx context.Context, req mcp.Request) task.Owner
	// Logger receives the adapter's records. Nil means slog.Default().
	Logger *slog.Logger
	// Limits bounds what each requester may do. The zero value sets no
	// limit; see DefaultLimits.
	Limits Limits
}

// Server serves MCP Tasks for one mcp.Server from one engine.
type Server struct {
	mcp   *mcp.Server
	eng   *engine.Engine
	opts  Options
	log   *slog.Logger
	mu    sync.RWMutex
	tools map[string]ToolOptions
	nonce string // authenticates in-process re-runs

	limits limiters

	conns   sync.Map // *mcp.ServerSession -> *taskConn, for sessions of Run
	targets sync.Map // task.ID -> *taskConn that gets its status notifications
}

// New installs tasks on srv, backed by eng: it adds the receiving
// middleware that turns tool calls into tasks, the tasks/* methods, and the
// tasks extension in server/discover. Call it once per mcp.Server, before
// serving.
func New(srv *mcp.Server, eng *engine.Engine, opts *Options) (*Server, error) {
	s := &Server{mcp: srv, eng: eng, tools: map[string]ToolOptions{}, nonce: string(task.NewID())}
	if opts != nil {
		s.opts = *opts
	}
	s.log = s.opts.Logger
	s.limits = newLimiters(s.opts.Limits)
	if s.log == nil {
		s.log = slog.Default()
	}
	if err := eng.SetRecover(s.recoverTask); err != nil {
		return nil, fmt.Errorf("mcptask: %w", err)
	}
	if err := s.addMethods(); err != nil {
		return nil, err
	}
	srv.AddReceivingMiddleware(s.middleware)
	eng.OnChange(s.onTaskChange)
	return s, nil
}

// Engine returns the engine the server runs tasks on.
func (s *Server) Engine() *engine.Engine { return s.eng }

// owner returns the requester of req.
func (s *Server) owner(ctx context.Context, req mcp.Request) task.Owner {
	if s.opts.Owner != nil {
		return s.opts.Owner(ctx, req)
	}
	if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil && extra.TokenInfo.UserID != "" {
		return task.TokenOwner(extra.TokenInfo.UserID)
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		if p := ss.InitializeParams(); p != nil && p.ProtocolVersion < ext2026.Version {
			return task.AnonymousOwner(ss.ID())
		}
	}
	return task.AnonymousOwner("")
}
