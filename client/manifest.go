package client

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The task wires a [Manifest] reports (Manifest.TaskWire).
const (
	// TaskWire2026 is the 2026-07-28 revision with the
	// io.modelcontextprotocol/tasks extension advertised by the server.
	TaskWire2026 = "2026-07-28 extension"
	// TaskWire2025 is the 2025-11-25 revision with its experimental tasks
	// capability (capabilities.tasks.requests.tools.call) advertised.
	TaskWire2025 = "2025-11-25 experimental tasks"
	// TaskWireNone means the session has no tasks: the server advertises
	// none, or the negotiated revision has none.
	TaskWireNone = "none"
)

// The session evidence a [Manifest] reports (Session.Kind).
const (
	// SessionID: the server gave an MCP session ID (Mcp-Session-Id).
	SessionID = "session"
	// SessionStateless: no session ID on a stateless revision (2026-07-28
	// and later): every request stands alone.
	SessionStateless = "stateless"
	// SessionConnection: no session ID on an older revision: the session
	// is the connection itself (stdio, or a stateless HTTP handler).
	SessionConnection = "connection"
)

// TaskSupportUnstated is a tool's task support in a [Manifest] when the
// wire has tasks but the server does not say whether the tool runs as one
// (2026-07-28, where the extension has no execution.taskSupport and the
// server decides per call; an mcptask server states it in the tool's
// _meta).
const TaskSupportUnstated = "unstated"

// Manifest is what a server offers for tasks on this client's session, as
// the field guide lists it: read it (Client.Manifest) and check a
// workflow's needs against it ([Require]) before the first call, in every
// session; never infer it from the server's name or SDK version.
type Manifest struct {
	// Target names the server (its URL, or Connect's target).
	Target string `json:"target"`
	// ProtocolVersion is the negotiated MCP revision.
	ProtocolVersion string `json:"protocolVersion"`
	// TaskWire is the task wire of the session: TaskWire2026,
	// TaskWire2025 or TaskWireNone.
	TaskWire string `json:"taskWire"`
	// NoTasks, when TaskWire is TaskWireNone, says why.
	NoTasks string `json:"noTasks,omitempty"`
	// Server is the server's implementation, as it names itself.
	Server ServerInfo `json:"server"`
	// Session is the evidence of the session the manifest was read on.
	Session Session `json:"session"`
	// Operations are the task operations the server offers.
	Operations Operations `json:"operations"`
	// Idempotency reports whether the server advertises
	// io.mcptask/idempotency: it honours the idempotency key of a re-sent
	// create, so a create whose answer was lost may be sent again.
	Idempotency bool `json:"idempotency"`
	// Tools are the server's tools with their task support.
	Tools []ManifestTool `json:"tools"`
	// JobAPI is the server's job API (mcptask's job tools, PREFIXstart
	// ...), nil when it has none.
	JobAPI *JobAPI `json:"jobApi,omitempty"`
	// Fallback is what applies to a tool call that needs a task when the
	// session cannot make it one: FallbackJobAPI when the server has a
	// job API, else FallbackSync (a plain call, only where the workflow
	// allows it; [Require] refuses otherwise).
	Fallback Fallback `json:"fallback"`
}

// ServerInfo is a server's implementation name and version.
type ServerInfo struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// Session is the evidence of an MCP session: its kind (SessionID,
// SessionStateless, SessionConnection) and, for SessionID, the ID.
type Session struct {
	Kind string `json:"kind"`
	ID   string `json:"id,omitempty"`
}

// Operations are the task operations a server offers on a session. Get and
// Result exist wherever tasks do (on 2026-07-28 the outcome comes inlined
// in tasks/get); List, Cancel and Delete as the server advertises them;
// Update (tasks/update) on 2026-07-28 only; Input says the task may ask
// the client for input (tasks/update on 2026-07-28, elicitation and
// sampling requests during tasks/result on 2025-11-25).
type Operations struct {
	List   bool `json:"list"`
	Get    bool `json:"get"`
	Result bool `json:"result"`
	Cancel bool `json:"cancel"`
	Update bool `json:"update"`
	Delete bool `json:"delete"`
	Input  bool `json:"input"`
}

// names returns the operations offered, in the order of the struct.
func (o Operations) names() []string {
	var out []string
	for _, op := range []struct {
		name string
		ok   bool
	}{{"list", o.List}, {"get", o.Get}, {"result", o.Result}, {"cancel", o.Cancel}, {"update", o.Update}, {"delete", o.Delete}, {"input", o.Input}} {
		if op.ok {
			out = append(out, op.name)
		}
	}
	return out
}

// String lists the operations offered, e.g. "get, result, cancel", or
// "none".
func (o Operations) String() string {
	if n := o.names(); len(n) > 0 {
		return strings.Join(n, ", ")
	}
	return "none"
}

// ManifestTool is a tool with its task support: "forbidden", "optional",
// "required" or TaskSupportUnstated. Task reports whether a call of the
// tool through this client runs as a task (tasks on the wire and the tool
// optional or required).
type ManifestTool struct {
	Name        string `json:"name"`
	TaskSupport string `json:"taskSupport"`
	Task        bool   `json:"task"`
	// Mode is how an mcptask server serves this client's task-augmented
	// calls of the tool now, under its rollout switches (the tool's
	// _meta io.mcptask/mode): "task", "approval" (a task that waits for
	// an approver), or the fallback ("sync", "refuse", "handoff",
	// "jobs"), with ModeReason ("draining", "canary", "rollback"). Empty
	// when the server does not say. Task is false when Mode is a
	// fallback.
	Mode       string `json:"mode,omitempty"`
	ModeReason string `json:"modeReason,omitempty"`
}

// JobAPI is a server's job API: ordinary tools that start a tool as a job
// and follow it (see mcptask's Server.AddJobTools and docs/gateway.md, "Job
// tools"), usable by a client without tasks.
type JobAPI struct {
	// Prefix is the job tools' prefix, e.g. "job_".
	Prefix string `json:"prefix"`
	// Tools are the job tools present, in the order start, status,
	// result, cancel, answer.
	Tools []string `json:"tools"`
}

// has reports whether the job API has the tool PREFIXsuffix.
func (j *JobAPI) has(suffix string) bool {
	return j != nil && slices.Contains(j.Tools, j.Prefix+suffix)
}

// Tool returns the manifest's tool name, nil when the server has none.
func (m *Manifest) Tool(name string) *ManifestTool {
	for i := range m.Tools {
		if m.Tools[i].Name == name {
			return &m.Tools[i]
		}
	}
	return nil
}

// Tasks reports whether the session has tasks.
func (m *Manifest) Tasks() bool { return m.TaskWire != TaskWireNone }

// Manifest reads what the server offers on this session: the negotiated
// revision and task wire, the server's implementation, the session
// evidence, the task operations, idempotency and each tool's task support
// (it lists the tools). It is read anew on each call: a server's
// capabilities are a session's, not a name's.
func (c *Client) Manifest(ctx context.Context) (*Manifest, error) {
	return c.impl.manifest(ctx)
}

func (c *clientImpl) manifest(ctx context.Context) (*Manifest, error) {
	tools, err := c.tools(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the tools for the manifest: %w", err)
	}
	cs := c.session()
	init := cs.InitializeResult()
	m := &Manifest{
		Target:          c.target,
		ProtocolVersion: c.wire,
		Idempotency:     c.idempotent,
		Tools:           []ManifestTool{},
	}
	if init != nil && init.ServerInfo != nil {
		m.Server = ServerInfo{Name: init.ServerInfo.Name, Title: init.ServerInfo.Title, Version: init.ServerInfo.Version}
	}
	switch id := cs.ID(); {
	case id != "":
		m.Session = Session{Kind: SessionID, ID: id}
	case c.wire >= Wire20260728:
		m.Session = Session{Kind: SessionStateless}
	default:
		m.Session = Session{Kind: SessionConnection}
	}

	tasks := c.tasksSupported()
	switch {
	case !tasks:
		m.TaskWire = TaskWireNone
		m.NoTasks, _, _ = c.tw.prepareCall(ctx, &mcp.CallToolParams{}) // wireNone and the wires without the capability say why
		if m.NoTasks == "" {
			m.NoTasks = "the server advertises no tasks"
		}
	case c.wire >= Wire20260728:
		m.TaskWire = TaskWire2026
		m.Operations = Operations{Get: true, Result: true, Cancel: true, Update: true, Input: true, Delete: c.deleteOffered()}
	default:
		m.TaskWire = TaskWire2025
		_, list, cancel := c.e.serverTasks()
		m.Operations = Operations{Get: true, Result: true, List: list, Cancel: cancel, Input: true, Delete: c.deleteOffered()}
	}

	names := map[string]bool{}
	for _, t := range tools {
		if t.Tool == nil {
			continue
		}
		names[t.Name] = true
		mt := ManifestTool{Name: t.Name, TaskSupport: t.TaskSupport}
		switch {
		case mt.TaskSupport != "":
		case !tasks || c.wire < Wire20260728:
			// 2025-11-25's default, and what a tool is without tasks.
			mt.TaskSupport = "forbidden"
		default:
			mt.TaskSupport = TaskSupportUnstated
		}
		mt.Task = tasks && (mt.TaskSupport == "optional" || mt.TaskSupport == "required")
		if mode, ok := t.Meta[wire.MetaMode].(map[string]any); ok {
			mt.Mode, _ = mode["mode"].(string)
			mt.ModeReason, _ = mode["reason"].(string)
			if mt.Mode != "" && mt.Mode != "task" && mt.Mode != "approval" {
				mt.Task = false
			}
		}
		m.Tools = append(m.Tools, mt)
	}
	m.JobAPI = findJobAPI(names)
	m.Fallback = FallbackSync
	if m.JobAPI != nil {
		m.Fallback = FallbackJobAPI
	}
	return m, nil
}

// deleteOffered reports whether the server advertised mcptask's
// tasks/delete on this wire (the strategy that sends it decides).
func (c *clientImpl) deleteOffered() bool {
	ok, _ := c.tw.deleteAdvertised()
	return ok
}

// jobStart is the name of the job tool that starts a job, after its
// prefix.
const jobStart = "start"

// jobSuffixes are the names of the job tools after their prefix.
var jobSuffixes = []string{jobStart, "status", "result", "cancel", "answer"}

// findJobAPI finds a job API among the tool names: a prefix P with
// Pstart, Pstatus and Presult (the least that drives a job), the
// shortest such prefix when there are several.
func findJobAPI(names map[string]bool) *JobAPI {
	var found *JobAPI
	for name := range names {
		prefix, ok := strings.CutSuffix(name, "start")
		if !ok || !names[prefix+"status"] || !names[prefix+"result"] {
			continue
		}
		if found != nil && (len(found.Prefix) < len(prefix) || (len(found.Prefix) == len(prefix) && found.Prefix < prefix)) {
			continue
		}
		j := &JobAPI{Prefix: prefix}
		for _, s := range jobSuffixes {
			if names[prefix+s] {
				j.Tools = append(j.Tools, prefix+s)
			}
		}
		found = j
	}
	return found
}
