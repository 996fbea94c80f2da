package mcptask

import (
	"fmt"

	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TaskSupport says whether calls of a tool may or must run as tasks.
type TaskSupport string

// The task support levels of a tool.
const (
	// Forbidden tools always answer synchronously (the default).
	Forbidden TaskSupport = "forbidden"
	// Optional tools run as a task when the request declares task support,
	// and synchronously otherwise.
	Optional TaskSupport = "optional"
	// Required tools only run as tasks; a request that does not declare
	// task support is rejected before the handler runs.
	Required TaskSupport = "required"
)

// ToolOptions sets how a tool runs as a task.
type ToolOptions struct {
	// Support is the tool's task support; empty means Forbidden.
	Support TaskSupport
	// Rerunnable declares the tool safe to run again: a task of it left
	// unfinished by a crash or shutdown is run again at the next start.
	// Otherwise such a task fails with an "outcome unknown" error; a tool
	// with side effects is never silently run twice.
	Rerunnable bool
	// Synchronous, if set, reports whether this call must be answered
	// synchronously even though the client declared task support: e.g. a
	// multi round-trip round in which the handler gathers input before the
	// long work starts as a task on a later round.
	Synchronous func(req *mcp.CallToolRequest) bool
}

// AddTool adds a typed tool to the server, as mcp.AddTool does, and sets
// its task options. Like mcp.AddTool it panics on a programming error:
// here, a call after [Server.Start], whose recovery of unfinished tasks
// has already asked every tool whether it may run again.
func AddTool[In, Out any](s *Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out], opts ToolOptions) {
	s.mustNotHaveStarted("AddTool", t.Name)
	mcp.AddTool(s.mcp, t, h)
	s.SetTaskSupport(t.Name, opts)
}

// SetTaskSupport sets the task options of the tool with the given name,
// which may be registered on the mcp.Server in any way. It panics when
// called after [Server.Start] (see [AddTool]).
func (s *Server) SetTaskSupport(name string, opts ToolOptions) {
	if opts.Support == "" {
		opts.Support = Forbidden
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		panic(afterStart("SetTaskSupport", name))
	}
	s.tools[name] = opts
}

func (s *Server) mustNotHaveStarted(op, name string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.started {
		panic(afterStart(op, name))
	}
}

func afterStart(op, name string) string {
	return fmt.Sprintf("mcptask: %s(%q) after Server.Start: register every tool before Start, whose recovery of unfinished tasks depends on the tools' options", op, name)
}

// toolPolicy is a tool's options as the wires read them.
func (s *Server) toolPolicy(name string) adapter.ToolPolicy {
	s.mu.RLock()
	o, ok := s.tools[name]
	s.mu.RUnlock()
	if !ok {
		o.Support = Forbidden
	}
	return adapter.ToolPolicy{Support: adapter.Support(o.Support), Rerunnable: o.Rerunnable, Synchronous: o.Synchronous}
}
