package client_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolSupports returns the manifest's tools as name → task support.
func toolSupports(m *client.Manifest) map[string]string {
	out := map[string]string{}
	for _, t := range m.Tools {
		out[t.Name] = t.TaskSupport
	}
	return out
}

// TestManifestMcptask reads the manifest of an mcptask server (what
// mcptaskd assembles, on loopback HTTP) on both wires.
func TestManifestMcptask(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	for _, tc := range []struct {
		wire, taskWire string
		ops            client.Operations
	}{
		{client.Wire20260728, client.TaskWire2026, client.Operations{Get: true, Result: true, Cancel: true, Update: true, Input: true, Delete: true}},
		{client.Wire20251125, client.TaskWire2025, client.Operations{List: true, Get: true, Result: true, Cancel: true, Input: true, Delete: true}},
	} {
		t.Run(tc.wire, func(t *testing.T) {
			c := dial(t, s.URL, &client.Options{ProtocolVersion: tc.wire})
			m, err := c.Manifest(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if m.ProtocolVersion != tc.wire || m.TaskWire != tc.taskWire || !m.Tasks() || m.NoTasks != "" {
				t.Errorf("protocol %s, task wire %q, no tasks %q", m.ProtocolVersion, m.TaskWire, m.NoTasks)
			}
			if m.Target != s.URL || m.Server.Name == "" {
				t.Errorf("target %q, server %+v", m.Target, m.Server)
			}
			if m.Operations != tc.ops {
				t.Errorf("operations %+v, want %+v", m.Operations, tc.ops)
			}
			if !m.Idempotency {
				t.Error("the server's io.mcptask/idempotency is not reported")
			}
			// 2025-11-25 on Streamable HTTP has a session ID; 2026-07-28 is
			// stateless.
			switch tc.wire {
			case client.Wire20251125:
				if m.Session.Kind != client.SessionID || m.Session.ID == "" {
					t.Errorf("session %+v, want an ID", m.Session)
				}
			default:
				if m.Session.Kind != client.SessionStateless || m.Session.ID != "" {
					t.Errorf("session %+v, want stateless", m.Session)
				}
			}
			want := map[string]string{"long_computation": "optional", "deploy_with_confirmation": "required", "echo": "forbidden", "counted": "optional"}
			got := toolSupports(m)
			for name, support := range want {
				if got[name] != support {
					t.Errorf("tool %s: %q, want %q", name, got[name], support)
				}
				if tl := m.Tool(name); tl == nil || tl.Task != (support != "forbidden") {
					t.Errorf("tool %s: %+v", name, tl)
				}
			}
			if m.JobAPI != nil || m.Fallback != client.FallbackSync {
				t.Errorf("job API %+v, fallback %q", m.JobAPI, m.Fallback)
			}

			// What the server offers needs no fallback.
			plan, err := client.Require(m, client.Needs{Tasks: []string{"long_computation", "deploy_with_confirmation"}, Tools: []string{"echo"}, Cancel: true, Input: true, Idempotency: true})
			if err != nil || len(plan.Fallbacks) != 0 || plan.Via("long_computation") != "" {
				t.Fatalf("Require: %+v, %v", plan, err)
			}
			// echo as a task: refused unless the synchronous path is
			// allowed; delete (advertised by mcptask) is met.
			_, err = c.Require(testCtx(t), client.Needs{Tasks: []string{"echo"}, Delete: true})
			var ue *client.UnmetError
			if !errors.As(err, &ue) || len(ue.Unmet) != 1 {
				t.Fatalf("Require echo as a task: %v", err)
			}
			if u := ue.Unmet[0]; u.Need != "task:echo" || u.Fallback != client.FallbackSync || u.Allowed || !strings.Contains(u.Reason, "forbidden") {
				t.Errorf("unmet %+v", u)
			}
			if !strings.Contains(err.Error(), "task:echo") || !strings.Contains(err.Error(), "synchronous path") || !strings.Contains(err.Error(), "not allowed") {
				t.Errorf("error %q", err)
			}
			plan, err = c.Require(testCtx(t), client.Needs{Tasks: []string{"echo"}, AllowSync: true})
			if err != nil || plan.Via("echo") != client.FallbackSync || len(plan.Fallbacks) != 1 || !plan.Fallbacks[0].Allowed {
				t.Fatalf("Require with AllowSync: %+v, %v", plan, err)
			}
		})
	}
}

// plainServer is a go-sdk server without tasks, with an echo tool and,
// when jobs, tools named like mcptask's job API (a job system's own MCP
// face), on loopback HTTP.
func plainServer(t *testing.T, stateless, jobs bool) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "0.3.1"}, nil)
	type echoArgs struct {
		Text string `json:"text"`
	}
	echo := func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, echo)
	if jobs {
		for _, name := range []string{"job_start", "job_status", "job_result", "job_cancel"} {
			mcp.AddTool(srv, &mcp.Tool{Name: name}, echo)
		}
	}
	return newHTTPServer(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: stateless}))
}

// TestManifestPlainServer reads the manifest of a go-sdk server without
// tasks: it says so and names the fallback, and Require refuses a task
// unless the caller allows the synchronous path.
func TestManifestPlainServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		stateless bool
		wire      string
		session   string
		noTasks   string
	}{
		{"stateless handler", true, client.Wire20260728, client.SessionStateless, "does not advertise the io.modelcontextprotocol/tasks extension"},
		{"stateful handler", false, client.Wire20251125, client.SessionID, "no tasks capability"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := dial(t, plainServer(t, tc.stateless, false), nil)
			m, err := c.Manifest(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if m.ProtocolVersion != tc.wire || m.TaskWire != client.TaskWireNone || m.Tasks() || !strings.Contains(m.NoTasks, tc.noTasks) {
				t.Errorf("protocol %s, task wire %q, no tasks %q", m.ProtocolVersion, m.TaskWire, m.NoTasks)
			}
			if m.Server != (client.ServerInfo{Name: "plain", Version: "0.3.1"}) || m.Session.Kind != tc.session || m.Idempotency {
				t.Errorf("server %+v, session %+v, idempotency %v", m.Server, m.Session, m.Idempotency)
			}
			if m.Operations != (client.Operations{}) || m.Operations.String() != "none" {
				t.Errorf("operations %+v", m.Operations)
			}
			if tl := m.Tool("echo"); tl == nil || tl.TaskSupport != "forbidden" || tl.Task {
				t.Errorf("echo: %+v", tl)
			}
			if m.JobAPI != nil || m.Fallback != client.FallbackSync {
				t.Errorf("job API %+v, fallback %q", m.JobAPI, m.Fallback)
			}

			// A task required: refused, naming the synchronous path, which
			// is not allowed; cancel: refused outright.
			_, err = c.Require(testCtx(t), client.Needs{Tasks: []string{"echo"}, Cancel: true})
			var ue *client.UnmetError
			if !errors.As(err, &ue) || len(ue.Unmet) != 2 {
				t.Fatalf("Require: %v", err)
			}
			if u := ue.Unmet[0]; u.Need != "task:echo" || u.Fallback != client.FallbackSync || u.Allowed || !strings.Contains(u.Reason, tc.noTasks) {
				t.Errorf("unmet %+v", u)
			}
			if u := ue.Unmet[1]; u.Need != "cancel" || u.Fallback != client.FallbackRefuse {
				t.Errorf("unmet %+v", u)
			}
			// The job API allowed does not help where there is none.
			if _, err := c.Require(testCtx(t), client.Needs{Tasks: []string{"echo"}, AllowJobAPI: true}); !errors.As(err, &ue) {
				t.Fatalf("Require with AllowJobAPI and no job API: %v", err)
			}
			// The synchronous path allowed explicitly: the plan says so,
			// and the plain call works.
			plan, err := c.Require(testCtx(t), client.Needs{Tasks: []string{"echo"}, AllowSync: true})
			if err != nil || plan.Via("echo") != client.FallbackSync {
				t.Fatalf("Require with AllowSync: %+v, %v", plan, err)
			}
			call, err := c.CallTool(testCtx(t), "echo", map[string]any{"text": "plain"})
			if err != nil || call.Task != nil || text(call.Result) != "plain" {
				t.Fatalf("call %+v, %v", call, err)
			}
			// A tool the server does not have: refusal, whatever is allowed.
			_, err = c.Require(testCtx(t), client.Needs{Tasks: []string{"deploy"}, Tools: []string{"nope"}, AllowSync: true, AllowJobAPI: true})
			if !errors.As(err, &ue) || len(ue.Unmet) != 2 || ue.Unmet[0].Fallback != client.FallbackRefuse || ue.Unmet[1].Need != "tool:nope" {
				t.Fatalf("Require of missing tools: %v", err)
			}
		})
	}
}

// TestManifestJobAPIFallback reads the manifest of a server without tasks
// that offers a job API: the fallback is the job API, for a task, cancel
// and idempotency, and only when allowed.
func TestManifestJobAPIFallback(t *testing.T) {
	t.Parallel()
	c := dial(t, plainServer(t, false, true), nil)
	m, err := c.Manifest(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if m.Tasks() || m.JobAPI == nil || m.JobAPI.Prefix != "job_" || m.Fallback != client.FallbackJobAPI {
		t.Fatalf("manifest %+v (job API %+v)", m, m.JobAPI)
	}
	if want := []string{"job_start", "job_status", "job_result", "job_cancel"}; !slices.Equal(m.JobAPI.Tools, want) {
		t.Errorf("job tools %v, want %v", m.JobAPI.Tools, want)
	}
	needs := client.Needs{Tasks: []string{"echo"}, Cancel: true, Idempotency: true, Input: true}
	_, err = client.Require(m, needs)
	var ue *client.UnmetError
	if !errors.As(err, &ue) || len(ue.Unmet) != 4 {
		t.Fatalf("Require: %v", err)
	}
	for _, u := range ue.Unmet {
		// No job_answer: input has no stand-in.
		want := client.FallbackJobAPI
		if u.Need == "input" {
			want = client.FallbackRefuse
		}
		if u.Fallback != want || u.Allowed {
			t.Errorf("unmet %+v, want fallback %s", u, want)
		}
	}
	needs.Input, needs.AllowJobAPI = false, true
	plan, err := client.Require(m, needs)
	if err != nil || plan.Via("echo") != client.FallbackJobAPI || len(plan.Fallbacks) != 3 {
		t.Fatalf("Require with AllowJobAPI: %+v, %v", plan, err)
	}
}
