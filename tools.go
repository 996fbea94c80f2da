package mcptask

import (
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
// its task options.
func AddTool[In, Out any](s *Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out], opts ToolOptions) {
	mcp.AddTool(s.mcp, t, h)
	s.SetTaskSupport(t.Name, opts)
}

// SetTaskSupport sets the task options of the tool with the given name,
// which may be registered on the mcp.Server in any way.
func (s *Server) SetTaskSupport(name string, opts ToolOptions) {
	if opts.Support == "" {
		opts.Support = Forbidden
	}
	s.mu.Lock()
	s.tools[name] = opts
	s.mu.Unlock()
}

// toolOptions returns the task options of a tool.
func (s *Server) toolOptions(name string) ToolOptions {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.tools[name]
	if !ok {
		o.Support = Forbidden
	}
	return o
}
