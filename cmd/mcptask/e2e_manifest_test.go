package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// manifestJSON decodes 'mcptask manifest --json'.
type manifestJSON struct {
	ProtocolVersion string `json:"protocolVersion"`
	TaskWire        string `json:"taskWire"`
	NoTasks         string `json:"noTasks"`
	Server          struct {
		Name, Version string
	} `json:"server"`
	Session struct {
		Kind, ID string
	} `json:"session"`
	Operations  map[string]bool `json:"operations"`
	Idempotency bool            `json:"idempotency"`
	Tools       []struct {
		Name        string `json:"name"`
		TaskSupport string `json:"taskSupport"`
		Task        bool   `json:"task"`
	} `json:"tools"`
	JobAPI *struct {
		Prefix string   `json:"prefix"`
		Tools  []string `json:"tools"`
	} `json:"jobApi"`
	Fallback string `json:"fallback"`
	Require  *struct {
		Met   bool `json:"met"`
		Unmet []struct {
			Need, Fallback string
			Allowed        bool
		} `json:"unmet"`
	} `json:"require"`
}

func decodeManifest(t *testing.T, r result) manifestJSON {
	t.Helper()
	var m manifestJSON
	if err := json.Unmarshal([]byte(r.Stdout), &m); err != nil {
		t.Fatalf("%v: not JSON: %v\n%s", r.Args, err, r)
	}
	return m
}

func (m manifestJSON) support(tool string) string {
	for _, t := range m.Tools {
		if t.Name == tool {
			return t.TaskSupport
		}
	}
	return "(absent)"
}

// TestManifestCLIMcptaskd prints the manifest of a real mcptaskd on both
// wires, with and without --json, and checks needs against it.
func TestManifestCLIMcptaskd(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	for _, tc := range []struct {
		wire, taskWire, session string
		list, update            bool
	}{
		{"2026-07-28", "2026-07-28 extension", "stateless", false, true},
		{"2025-11-25", "2025-11-25 experimental tasks", "session", true, false},
	} {
		r := c.run("manifest", "--json", "--wire", tc.wire)
		expect(t, r, exitOK, nil, nil)
		m := decodeManifest(t, r)
		if m.ProtocolVersion != tc.wire || m.TaskWire != tc.taskWire || m.Server.Name != "mcptaskd" || m.Session.Kind != tc.session || !m.Idempotency {
			t.Errorf("%s: %+v", tc.wire, m)
		}
		if (m.Session.ID != "") != (tc.session == "session") {
			t.Errorf("%s: session %+v", tc.wire, m.Session)
		}
		ops := m.Operations
		if !ops["get"] || !ops["result"] || !ops["cancel"] || ops["list"] != tc.list || ops["update"] != tc.update || !ops["delete"] {
			t.Errorf("%s: operations %v", tc.wire, ops)
		}
		for tool, want := range map[string]string{"long_computation": "optional", "deploy_with_confirmation": "required", "echo": "forbidden"} {
			if got := m.support(tool); got != want {
				t.Errorf("%s: %s: %q, want %q", tc.wire, tool, got, want)
			}
		}
		if m.JobAPI != nil || m.Require != nil {
			t.Errorf("%s: job API %+v, require %+v", tc.wire, m.JobAPI, m.Require)
		}

		r = c.run("manifest", "--wire", tc.wire)
		expect(t, r, exitOK, []string{"server:       mcptaskd", "protocol:     " + tc.wire, "tasks:        " + tc.taskWire,
			"idempotency:  yes", "job API:      none", "deploy_with_confirmation  required"}, nil)
	}

	// Needs met; then echo as a task: refused (exit 7) unless the
	// synchronous path is allowed.
	expect(t, c.run("manifest", "--require", "deploy_with_confirmation:task", "--require", "echo", "--require-op", "cancel,input,idempotency,delete"),
		exitOK, []string{"requirements: met"}, nil)
	r := c.run("manifest", "--require", "echo:task", "--require-op", "delete")
	expect(t, r, exitUnmet, []string{"requirements: NOT met", "task:echo: echo does not run as a task (taskSupport forbidden); fallback: the synchronous path", "not allowed"},
		[]string{"does not meet the workflow's needs"})
	r = c.run("manifest", "--json", "--require", "echo:task", "--allow-sync")
	expect(t, r, exitOK, nil, nil)
	if m := decodeManifest(t, r); m.Require == nil || !m.Require.Met || len(m.Require.Unmet) != 1 || m.Require.Unmet[0].Fallback != "sync" || !m.Require.Unmet[0].Allowed {
		t.Fatalf("--allow-sync: %+v", m.Require)
	}
	expect(t, c.run("manifest", "--require-op", "rollback"), exitUsage, nil, []string{"unknown operation"})
}

// TestManifestCLIJobTools prints the manifest of an mcptaskd with its job
// tools on: the job API and its fallback are named.
func TestManifestCLIJobTools(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "mcptaskd.yaml")
	if err := os.WriteFile(cfg, []byte("demo: true\njobTools:\n  enabled: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "-config", cfg)
	c := newCLI(t, d.URL)
	r := c.run("manifest", "--json")
	expect(t, r, exitOK, nil, nil)
	m := decodeManifest(t, r)
	if m.JobAPI == nil || m.JobAPI.Prefix != "job_" || strings.Join(m.JobAPI.Tools, ",") != "job_start,job_status,job_result,job_cancel,job_answer" || m.Fallback != "job-api" {
		t.Fatalf("job API %+v, fallback %q", m.JobAPI, m.Fallback)
	}
	if m.TaskWire == "none" || m.support("job_start") != "forbidden" {
		t.Errorf("task wire %q, job_start %q", m.TaskWire, m.support("job_start"))
	}
	expect(t, c.run("manifest"), exitOK, []string{"job API:      job_start, job_status, job_result, job_cancel, job_answer"}, nil)
}

// TestManifestCLIPlainServer prints the manifest of a go-sdk server without
// tasks (in this process, on loopback HTTP): it says so and names the
// fallback; a task required is refused unless --allow-sync.
func TestManifestCLIPlainServer(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "0.3.1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "report"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	c := newCLI(t, hs.URL)

	r := c.run("manifest", "--json")
	expect(t, r, exitOK, nil, nil)
	m := decodeManifest(t, r)
	if m.TaskWire != "none" || !strings.Contains(m.NoTasks, "no tasks capability") || m.Fallback != "sync" || m.JobAPI != nil || m.Idempotency || m.support("report") != "forbidden" {
		t.Fatalf("manifest %+v", m)
	}
	if m.Server.Name != "plain" || m.Server.Version != "0.3.1" {
		t.Errorf("server %+v", m.Server)
	}
	for op, ok := range m.Operations {
		if ok {
			t.Errorf("operation %s offered", op)
		}
	}
	expect(t, c.run("manifest"), exitOK, []string{"server:       plain 0.3.1", "tasks:        none (the server has no tasks capability for tools/call)",
		"fallback:     the synchronous path", "job API:      none", "report  forbidden"}, nil)

	expect(t, c.run("manifest", "--require", "report:task"), exitUnmet,
		[]string{"requirements: NOT met", "task:report: the session has no tasks", "fallback: the synchronous path", "not allowed"}, nil)
	expect(t, c.run("manifest", "--require", "report:task", "--allow-job-api"), exitUnmet, []string{"not allowed"}, nil)
	expect(t, c.run("manifest", "--require", "report:task", "--allow-sync"), exitOK, []string{"requirements: met with allowed fallbacks", "task:report"}, nil)
}
