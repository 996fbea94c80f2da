package mcptask

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/internal/rollout"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

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
	s.defined(t, inputSchema[In](t))
}

// defined records what s knows of the definition of a tool it added: its
// resolved input schema rs (nil when it cannot be resolved), and whether
// its tasks may be created on the fast lane (ToolPolicy.Lane).
func (s *Server) defined(t *mcp.Tool, rs *jsonschema.Resolved) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rs != nil {
		s.schemas[t.Name] = rs
	}
	s.laneTools[t.Name] = !declaresParamHeaders(t)
}

// declaresParamHeaders reports whether t's input schema may declare
// parameter headers (x-mcp-header), which the go-sdk checks against a
// 2026-07-28 request's HTTP headers: a schema that does not encode
// counts as one that does.
func declaresParamHeaders(t *mcp.Tool) bool {
	if t.InputSchema == nil {
		return false
	}
	b, err := json.Marshal(t.InputSchema)
	return err != nil || bytes.Contains(b, []byte(`"x-mcp-header"`))
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
	s.defined(t, inputSchema[any](t))
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

// ToolQueue returns the concurrency queue the tool name runs in and the
// queue's cap (ToolOptions.MaxConcurrent and Queue), or "" and 0 when
// its tasks are not capped (or it is not a tool of s).
func (s *Server) ToolQueue(name string) (queue string, limit int) {
	s.mu.RLock()
	o, ok := s.tools[name]
	s.mu.RUnlock()
	if !ok || o.queue(name) == "" {
		return "", 0
	}
	return o.queue(name), o.MaxConcurrent
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
	lane := s.laneTools[name]
	s.mu.RUnlock()
	if !ok {
		o.Support = Forbidden
	}
	p := adapter.ToolPolicy{Support: adapter.Support(o.Support), Rerunnable: o.Rerunnable, Reattach: o.Reattach,
		AwaitExternalRef: o.AwaitExternalRef, Synchronous: o.Synchronous, Queue: o.queue(name), MaxTTL: o.MaxTTL,
		Fallback: rollout.Fallback(o.Fallback), Lane: lane}
	if o.Approval != nil {
		// Every call waits for its approval: none runs as a plain call
		// (Required on both wires, whatever Support says: an approval
		// fails closed), none is answered synchronously.
		p.Approval = o.Approval.message
		p.Support, p.Synchronous = adapter.Required, nil
	}
	if rs != nil {
		p.CheckArguments = func(args json.RawMessage) error { return checkArguments(rs, args) }
	}
	return p
}

// publishLog is the engine's Hooks.PublishLog: the tool's
// ToolOptions.PublishLog.
func (s *Server) publishLog(tool string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	own := s.tools[tool].PublishLog
	if len(s.publishAll) == 0 {
		return own
	}
	return append(slices.Clone(own), s.publishAll...)
}

// checkEmit is the engine's Hooks.CheckEmit: a value a task of tool
// emits must conform to the tool's OutputSchema, if it has one.
func (s *Server) checkEmit(tool string, data json.RawMessage) error {
	s.mu.RLock()
	schema := s.tools[tool].OutputSchema
	s.mu.RUnlock()
	if schema == nil {
		return nil
	}
	rs, err := s.resolvedOutput(tool, schema)
	if err != nil {
		return fmt.Errorf("mcptask: the output schema of tool %q: %w", tool, err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("mcptask: Emit: %w", err)
	}
	if err := rs.Validate(v); err != nil {
		return fmt.Errorf("mcptask: Emit: the value does not conform to the output schema of tool %q: %w", tool, err)
	}
	return nil
}

// resolvedOutput returns schema resolved, once per tool.
func (s *Server) resolvedOutput(tool string, schema *jsonschema.Schema) (*jsonschema.Resolved, error) {
	if v, ok := s.resolvedOutputs.Load(tool); ok {
		if r := v.(*resolvedSchema); r.schema == schema {
			return r.resolved, nil
		}
	}
	rs, err := schema.Resolve(nil)
	if err != nil {
		return nil, err
	}
	s.resolvedOutputs.Store(tool, &resolvedSchema{schema: schema, resolved: rs})
	return rs, nil
}

// resolvedSchema is a tool's OutputSchema and its resolution.
type resolvedSchema struct {
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
}
