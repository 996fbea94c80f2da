package mcptask

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/task"
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
	// Reattach declares that the handler can resume its work from the
	// external reference it recorded ([Task.SetExternalRef]) instead of
	// doing it again: a task of the tool left unfinished by a crash,
	// shutdown or takeover, with an external reference recorded, is run
	// again (as a Rerunnable one is), and the handler, finding the
	// reference with [Task.ExternalRef], re-attaches to the work it
	// started elsewhere (an upstream task, a job). A task without a
	// reference (the crash came before the other system answered) is
	// resolved as the tool's other options say.
	Reattach bool
	// Reconcile, if set, asks the tool's system of record about an
	// operation its handler recorded on the ledger ([Task.RecordOperation])
	// that was left neither confirmed nor rejected by a crash, a restart
	// or a takeover. It runs before the recovery policy, bounded by the
	// engine's ReconcileTimeout: task.OpConfirmed completes the task (its
	// result says it was reconciled, with the operation and receipt);
	// task.OpRejected (not applied) runs the tool again, even if it is
	// not Rerunnable (the re-run records a new attempt of the operation);
	// anything else, or an error, fails the task "outcome unknown" and
	// leaves the operation unknown for an operator; [ErrNoReconcile]
	// leaves the task to the recovery policy. Without it, or for a task
	// that recorded no operation, the recovery policy decides.
	Reconcile func(ctx context.Context, op task.Operation) (state task.OpState, detail string, err error)
	// AwaitExternalRef, if positive, delays the answer to a call that
	// creates a task until the handler has recorded its external
	// reference, or returned, or this long has passed: the client is
	// acknowledged only once the work started elsewhere can be found
	// again after a crash. The task itself is created, and the handler
	// started, at once.
	AwaitExternalRef time.Duration
	// Synchronous, if set, reports whether this call must be answered
	// synchronously even though the client declared task support: e.g. a
	// multi round-trip round in which the handler gathers input before the
	// long work starts as a task on a later round.
	Synchronous func(req *mcp.CallToolRequest) bool
	// MaxConcurrent, if positive, caps how many tasks of the tool run at
	// once, across every server sharing the task store: a task beyond the
	// cap is created and acknowledged at once, shows working with a status
	// message such as "queued: 3 ahead", and starts in creation order when
	// a slot frees; the queue survives restarts. A task started by the
	// server that created it runs in the creating request's context (its
	// values, not its cancellation); one started by another server (or
	// after a restart) runs from its stored call, as a re-run does (its
	// handler's request carries the call's arguments and _meta, not the
	// values of the original HTTP request). A tool's AwaitExternalRef does
	// not delay the acknowledgement of a task that waits. Calls answered
	// synchronously do not count. Zero means no cap.
	MaxConcurrent int
	// Queue names the queue that MaxConcurrent caps, to share one cap
	// among several tools (e.g. every tool of one upstream server);
	// empty means a queue of the tool's own, named after it. Tools
	// sharing a queue must give it the same MaxConcurrent.
	Queue string
	// MaxTTL, if positive, caps the retention of the tool's tasks below
	// the server's maximum (e.g. a tool whose results hold sensitive
	// data): a client asking for more gets MaxTTL.
	MaxTTL time.Duration
}

// queue returns the name of the tool's queue, "" when it has no cap.
func (o ToolOptions) queue(tool string) string {
	switch {
	case o.MaxConcurrent <= 0:
		return ""
	case o.Queue != "":
		return o.Queue
	}
	return tool
}

// AddTool adds a typed tool to the server, as mcp.AddTool does, and sets
// its task options. Like mcp.AddTool it panics on a programming error:
// here, a call after [Server.Start], whose recovery of unfinished tasks
// has already asked every tool whether it may run again.
//
// On the 2026-07-28 wire, a call that would run as a task has its
// arguments checked against the tool's input schema (t.InputSchema, else
// the one inferred from In, as mcp.AddTool does) before a task is
// created: arguments the schema rejects are answered at once with the
// go-sdk's tool error (isError), and no task is created. (On 2025-11-25,
// whose clients expect a task for a task-augmented call, the task ends
// with that tool error.) Tools registered otherwise, with
// [Server.SetTaskSupport], are checked by the go-sdk in their task.
func AddTool[In, Out any](s *Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out], opts ToolOptions) {
	s.mustNotHaveStarted("AddTool", t.Name)
	mcp.AddTool(s.mcp, t, h) // panics on a schema it cannot use
	s.SetTaskSupport(t.Name, opts)
	if rs := inputSchema[In](t); rs != nil {
		s.mu.Lock()
		s.schemas[t.Name] = rs
		s.mu.Unlock()
	}
}

// AddRawTool adds a tool with an untyped handler, as mcp.Server.AddTool
// does (t.InputSchema is required), and sets its task options: for tools
// whose handler forwards the call elsewhere, such as a gateway's. Like
// AddTool it panics after [Server.Start]; its arguments are checked
// against t.InputSchema as AddTool's are.
func (s *Server) AddRawTool(t *mcp.Tool, h mcp.ToolHandler, opts ToolOptions) {
	s.mustNotHaveStarted("AddRawTool", t.Name)
	s.mcp.AddTool(t, h)
	s.SetTaskSupport(t.Name, opts)
	if rs := inputSchema[any](t); rs != nil {
		s.mu.Lock()
		s.schemas[t.Name] = rs
		s.mu.Unlock()
	}
}

// Drain sets the server's drain switch: new task-augmented calls of every
// tool (all) or of the tools listed are refused with a JSON-RPC error
// (-32010, data.reason "draining"), while existing tasks stay readable,
// answerable and cancellable. Drain(false) with no tools lifts it. It may
// be called at any time; the audit trail records each change (by says
// who made it). It is [Server.SetDrain] with the fallback DrainRefuse.
func (s *Server) Drain(ctx context.Context, all bool, tools []string, by string) {
	_ = s.SetDrain(ctx, DrainState{All: all, Tools: tools}, by, "")
}

// DrainFallback is what a drained tool's task-augmented calls get.
type DrainFallback string

// The drain fallbacks.
const (
	// DrainRefuse refuses them (-32010, data.reason "draining"): the
	// default.
	DrainRefuse DrainFallback = "refuse"
	// DrainSync answers them synchronously, as plain calls, when the
	// tool's task support is Optional; a Required tool's are refused.
	DrainSync DrainFallback = "sync"
)

// DrainState is a server's drain switch.
type DrainState struct {
	// All drains every tool.
	All bool `json:"all"`
	// Tools are the tools drained when All is false.
	Tools []string `json:"tools"`
	// Fallback is what a drained tool's task-augmented calls get; empty
	// means DrainRefuse.
	Fallback DrainFallback `json:"fallback"`
}

// Active reports whether the switch drains any tool.
func (d DrainState) Active() bool { return d.All || len(d.Tools) > 0 }

// Equal reports whether d and o are the same switch (tools in any
// order, an empty fallback as DrainRefuse).
func (d DrainState) Equal(o DrainState) bool {
	a, b := slices.Clone(d.Tools), slices.Clone(o.Tools)
	slices.Sort(a)
	slices.Sort(b)
	return d.All == o.All && slices.Equal(slices.Compact(a), slices.Compact(b)) && d.fallback() == o.fallback()
}

func (d DrainState) fallback() DrainFallback {
	if d.Fallback == "" {
		return DrainRefuse
	}
	return d.Fallback
}

// SetDrain sets the server's drain switch to st (see [Server.Drain]); with
// the fallback DrainSync, a drained tool of Optional task support answers
// task-augmented calls synchronously instead of refusing them. The audit
// trail records the change with by (what made it, e.g. "admin") and
// requester (who, if known; "" for none). An unknown fallback is an error
// and changes nothing.
func (s *Server) SetDrain(ctx context.Context, st DrainState, by string, requester task.Owner) error {
	fb := st.fallback()
	if fb != DrainRefuse && fb != DrainSync {
		return fmt.Errorf("mcptask: unknown drain fallback %q: want %q or %q", st.Fallback, DrainRefuse, DrainSync)
	}
	tools := slices.Clone(st.Tools)
	s.mu.Lock()
	s.drain = DrainState{All: st.All, Tools: tools, Fallback: fb}
	if st.Active() {
		s.core.SetDrain(&adapter.Drain{All: st.All, Tools: tools, Sync: fb == DrainSync})
	} else {
		s.core.SetDrain(nil)
	}
	s.mu.Unlock()
	s.eng.KickQueues() // a queue the old switch held may start now
	s.eng.Audit().DrainChanged(ctx, audit.DrainChange{All: st.All, Tools: tools, Fallback: string(fb), By: by, Requester: requester})
	return nil
}

// queueHeld reports whether the drain switch holds the waiting tasks of
// queue q: when it refuses new tasks of every tool of that queue, their
// waiting tasks do not start either (the switch stops new work reaching
// the system behind them); they keep their place and start once it is
// lifted. A queue shared with a tool still open is not held.
func (s *Server) queueHeld(q string) bool {
	d := s.core.Draining()
	if d == nil {
		return false
	}
	if d.All {
		return true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	held := false
	for name, o := range s.tools {
		if o.queue(name) != q {
			continue
		}
		if !d.Refuses(name) {
			return false
		}
		held = true
	}
	return held
}

// Draining returns the drain switch now (Fallback set, Tools a copy).
func (s *Server) Draining() DrainState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.drain
	d.Tools = slices.Clone(d.Tools)
	d.Fallback = d.fallback()
	return d
}

// HasTool reports whether a tool of that name was added with AddTool,
// AddRawTool or SetTaskSupport.
func (s *Server) HasTool(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.tools[name]
	return ok
}

// ToolNames returns the names of the tools s serves with tasks, sorted.
func (s *Server) ToolNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.tools))
}

// inputSchema resolves the input schema of a tool added with AddTool the
// way mcp.AddTool does: t.InputSchema if set, else {"type": "object"} for
// an In of any, else the schema inferred from In. It returns nil if the
// schema cannot be resolved (then the tool's handler alone checks).
func inputSchema[In any](t *mcp.Tool) *jsonschema.Resolved {
	var schema *jsonschema.Schema
	switch is := t.InputSchema.(type) {
	case nil:
		rt := reflect.TypeFor[In]()
		if rt == reflect.TypeFor[any]() {
			schema = &jsonschema.Schema{Type: "object"}
			break
		}
		if rt.Kind() == reflect.Pointer {
			rt = rt.Elem()
		}
		var err error
		if schema, err = jsonschema.ForType(rt, &jsonschema.ForOptions{}); err != nil {
			return nil
		}
	case *jsonschema.Schema:
		schema = is
	default:
		b, err := json.Marshal(is)
		if err != nil || json.Unmarshal(b, &schema) != nil {
			return nil
		}
	}
	rs, err := schema.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return nil
	}
	return rs
}

// checkArguments reports whether a call's arguments satisfy the tool's
// input schema, with its defaults applied as the go-sdk applies them.
func checkArguments(rs *jsonschema.Resolved, args json.RawMessage) error {
	v := map[string]any{}
	if len(args) > 0 {
		if err := json.Unmarshal(args, &v); err != nil {
			return fmt.Errorf("the arguments are not a JSON object: %v", err)
		}
	}
	var inst any = v
	if err := rs.ApplyDefaults(&inst); err != nil {
		return err
	}
	return rs.Validate(inst)
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
	rs := s.schemas[name]
	s.mu.RUnlock()
	if !ok {
		o.Support = Forbidden
	}
	p := adapter.ToolPolicy{Support: adapter.Support(o.Support), Rerunnable: o.Rerunnable, Reattach: o.Reattach,
		AwaitExternalRef: o.AwaitExternalRef, Synchronous: o.Synchronous, Queue: o.queue(name), MaxTTL: o.MaxTTL}
	if rs != nil {
		p.CheckArguments = func(args json.RawMessage) error { return checkArguments(rs, args) }
	}
	return p
}
