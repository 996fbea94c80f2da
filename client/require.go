package client

import (
	"context"
	"fmt"
	"strings"
)

// Fallback is what a workflow can do instead when a server lacks a
// capability it needs.
type Fallback string

// The fallbacks.
const (
	// FallbackSync is the synchronous path: the tool is called plainly and
	// the request lasts as long as the tool runs, with the timeout and
	// recovery of a plain request (no task to reattach to). It applies
	// only when the caller allows it (Needs.AllowSync).
	FallbackSync Fallback = "sync"
	// FallbackJobAPI is the server's job API (PREFIXstart, PREFIXstatus,
	// ...: ordinary tools that run a tool as a job the caller follows).
	// It applies only when the caller allows it (Needs.AllowJobAPI).
	FallbackJobAPI Fallback = "job-api"
	// FallbackRefuse is a controlled refusal: nothing can stand in for
	// the capability; the workflow must not start.
	FallbackRefuse Fallback = "refuse"
)

// Describe says what the fallback is, in a few words.
func (f Fallback) Describe() string {
	switch f {
	case FallbackSync:
		return "the synchronous path (a plain tools/call that lasts as long as the tool runs)"
	case FallbackJobAPI:
		return "the job API (start the tool as a job with the server's job tools and poll them)"
	case FallbackRefuse:
		return "refusal (nothing stands in for it)"
	}
	return string(f)
}

// Needs are what a workflow requires of a server before its first call.
type Needs struct {
	// Tasks are tools the workflow calls as tasks: the session must have
	// tasks and each tool must be optional or required.
	Tasks []string `json:"tasks,omitempty"`
	// Tools are tools the workflow calls plainly: they must exist.
	Tools []string `json:"tools,omitempty"`
	// The task operations the workflow uses.
	List   bool `json:"list,omitempty"`
	Cancel bool `json:"cancel,omitempty"`
	// Input: the tasks may ask the client for input.
	Input  bool `json:"input,omitempty"`
	Delete bool `json:"delete,omitempty"`
	// Idempotency: the workflow re-sends a create whose answer it lost,
	// with its idempotency key (io.mcptask/idempotency).
	Idempotency bool `json:"idempotency,omitempty"`

	// AllowSync allows a tool of Tasks that cannot run as a task to run
	// as a plain, synchronous call. Without it, [Require] refuses: a
	// required task never turns silently into a long synchronous request.
	AllowSync bool `json:"allowSync,omitempty"`
	// AllowJobAPI allows what the server's job API offers to stand in for
	// a task (a tool of Tasks, Cancel, Input, Idempotency).
	AllowJobAPI bool `json:"allowJobApi,omitempty"`
}

// Unmet is one need the manifest does not meet, with the fallback that
// applies and whether the caller allowed it.
type Unmet struct {
	// Need names it: "task:TOOL", "tool:TOOL", "list", "cancel", "input",
	// "delete" or "idempotency".
	Need string `json:"need"`
	// Reason says what the server lacks.
	Reason string `json:"reason"`
	// Fallback is the fallback that applies.
	Fallback Fallback `json:"fallback"`
	// Allowed reports whether the caller allowed the fallback (never for
	// FallbackRefuse).
	Allowed bool `json:"allowed"`
}

func (u Unmet) String() string {
	s := fmt.Sprintf("%s: %s; fallback: %s", u.Need, u.Reason, u.Fallback.Describe())
	if !u.Allowed && u.Fallback != FallbackRefuse {
		s += ", not allowed"
	}
	return s
}

// UnmetError is the error of [Require] when some need is unmet and its
// fallback is not allowed: the workflow must not start.
type UnmetError struct {
	// Target names the server.
	Target string
	// Unmet are the needs that stop the workflow (Allowed false).
	Unmet []Unmet
}

func (e *UnmetError) Error() string {
	parts := make([]string, len(e.Unmet))
	for i, u := range e.Unmet {
		parts[i] = u.String()
	}
	return fmt.Sprintf("%s does not meet the workflow's needs: %s", e.Target, strings.Join(parts, "; "))
}

// Plan is how a workflow runs against a server whose manifest [Require]
// accepted: every need met, or met by a fallback the caller allowed.
type Plan struct {
	// Manifest is the manifest checked.
	Manifest *Manifest `json:"manifest"`
	// Fallbacks are the needs met by an allowed fallback (empty when the
	// server meets them all).
	Fallbacks []Unmet `json:"fallbacks"`
}

// Via returns how the plan calls tool: "" as a task (or a plain call for a
// tool of Needs.Tools), else the allowed fallback, FallbackSync or
// FallbackJobAPI.
func (p *Plan) Via(tool string) Fallback {
	for _, u := range p.Fallbacks {
		if u.Need == "task:"+tool {
			return u.Fallback
		}
	}
	return ""
}

// Require checks a workflow's needs against a manifest before its first
// call. It returns the plan when every need is met, or met by a fallback
// the caller allowed; otherwise an *UnmetError naming each need that stops
// the workflow and the fallback that applies (the synchronous path and the
// job API only when allowed: Needs.AllowSync, Needs.AllowJobAPI; refusal
// when nothing stands in).
func Require(m *Manifest, n Needs) (*Plan, error) {
	var unmet []Unmet
	add := func(need, reason string, fb Fallback) {
		unmet = append(unmet, Unmet{Need: need, Reason: reason, Fallback: fb,
			Allowed: (fb == FallbackSync && n.AllowSync) || (fb == FallbackJobAPI && n.AllowJobAPI)})
	}
	jobs := m.JobAPI
	for _, name := range n.Tasks {
		need := "task:" + name
		t := m.Tool(name)
		switch {
		case t == nil:
			add(need, fmt.Sprintf("the server has no tool %q", name), FallbackRefuse)
		case t.Task:
		case !m.Tasks():
			// A job runs the tool as a task on the server's side (whether
			// the tool supports it, a session without tasks cannot tell).
			switch {
			case jobs.has("start"):
				add(need, "the session has no tasks: "+m.NoTasks, FallbackJobAPI)
			case t.TaskSupport == "required":
				add(need, fmt.Sprintf("the session has no tasks (%s) and %s requires one", m.NoTasks, name), FallbackRefuse)
			default:
				add(need, "the session has no tasks: "+m.NoTasks, FallbackSync)
			}
		case t.TaskSupport == TaskSupportUnstated:
			add(need, fmt.Sprintf("the server does not state whether %s runs as a task (it decides per call)", name), FallbackSync)
		default:
			add(need, fmt.Sprintf("%s does not run as a task (taskSupport %s)", name, t.TaskSupport), FallbackSync)
		}
	}
	for _, name := range n.Tools {
		if m.Tool(name) == nil {
			add("tool:"+name, fmt.Sprintf("the server has no tool %q", name), FallbackRefuse)
		}
	}
	// An operation the session lacks; the job API stands in for some
	// when the session has no tasks at all.
	op := func(need bool, name string, have bool, jobTool string) {
		if !need || have {
			return
		}
		reason := fmt.Sprintf("the server offers no task %s", name)
		if !m.Tasks() {
			reason = "the session has no tasks: " + m.NoTasks
		}
		if !m.Tasks() && jobTool != "" && jobs.has(jobTool) {
			add(name, reason, FallbackJobAPI)
			return
		}
		add(name, reason, FallbackRefuse)
	}
	op(n.List, "list", m.Operations.List, "")
	op(n.Cancel, "cancel", m.Operations.Cancel, "cancel")
	op(n.Input, "input", m.Operations.Input, "answer")
	op(n.Delete, "delete", m.Operations.Delete, "")
	if n.Idempotency && !m.Idempotency {
		if !m.Tasks() && jobs.has("start") {
			// PREFIXstart takes an idempotencyKey.
			add("idempotency", "the session has no tasks: "+m.NoTasks, FallbackJobAPI)
		} else {
			add("idempotency", "the server does not advertise io.mcptask/idempotency", FallbackRefuse)
		}
	}

	plan := &Plan{Manifest: m, Fallbacks: []Unmet{}}
	var stop []Unmet
	for _, u := range unmet {
		if u.Allowed {
			plan.Fallbacks = append(plan.Fallbacks, u)
		} else {
			stop = append(stop, u)
		}
	}
	if len(stop) > 0 {
		return nil, &UnmetError{Target: m.Target, Unmet: stop}
	}
	return plan, nil
}

// Require reads the server's manifest on this session and checks a
// workflow's needs against it (see the function [Require]).
func (c *Client) Require(ctx context.Context, n Needs) (*Plan, error) {
	m, err := c.Manifest(ctx)
	if err != nil {
		return nil, err
	}
	return Require(m, n)
}
