package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var wires = []string{"2026-07-28", "2025-11-25"}

func TestHelp(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "")
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := c.run(args...)
		expect(t, r, exitOK, []string{"Usage:", "Commands:", "call", "resume", "Exit codes:", "MCPTASK_URL", "MCPTASK_JOURNAL", "--timeout"}, nil)
		for _, e := range exitCodes {
			if !strings.Contains(r.Stdout, e.meaning) {
				t.Errorf("help lacks exit code %d", e.code)
			}
		}
	}
	for _, args := range [][]string{{"help", "call"}, {"call", "--help"}, {"call", "-h"}} {
		expect(t, c.run(args...), exitOK, []string{"Usage: mcptask call", "key=value", "--detach", "--answer", "--json", "Exit codes:"}, nil)
	}
	for _, cmd := range commands {
		expect(t, c.run("help", cmd.name), exitOK, []string{"Usage: mcptask " + cmd.name}, nil)
	}
	expect(t, c.run("version"), exitOK, []string{"mcptask"}, nil)
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	// No server: usage errors are found before connecting.
	c := newCLI(t, freeURL(t))
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{nil, "Usage:"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"help", "bogus"}, `unknown command "bogus"`},
		{[]string{"--nope", "tools"}, "flag provided but not defined"},
		{[]string{"tools", "--nope"}, "flag provided but not defined"},
		{[]string{"call"}, "which tool?"},
		{[]string{"call", "echo", "novalue"}, "is not key=value"},
		{[]string{"call", "echo", "=x"}, "no key"},
		{[]string{"call", "echo", "k:=notjson"}, "must be JSON"},
		{[]string{"call", "echo", "--args", "{bad"}, "--args"},
		{[]string{"call", "echo", "--args", "[1]"}, "JSON object"},
		{[]string{"call", "echo", "--args", "@/does/not/exist.json"}, "--args"},
		{[]string{"call", "echo", "--answer", "nonsense"}, "--answer"},
		{[]string{"call", "echo", "--timeout", "soon"}, "invalid value"},
		{[]string{"--wire", "1999-01-01", "tools"}, "--wire"},
		{[]string{"--url", "ftp://example/mcp", "tools"}, "--url"},
		{[]string{"--timeout", "-1s", "tools"}, "--timeout"},
		{[]string{"--stdio", "'unterminated", "tools"}, "--stdio"},
		{[]string{"wait"}, "one task ID"},
		{[]string{"wait", "a", "b"}, "one task ID"},
		{[]string{"status"}, "task ID"},
		{[]string{"cancel"}, "task ID"},
		{[]string{"list", "extra"}, "no arguments"},
		{[]string{"resume", "extra"}, "no arguments"},
		{[]string{"--journal", "off", "resume"}, "journal is off"},
	} {
		r := c.run(tc.args...)
		expect(t, r, exitUsage, nil, []string{tc.msg})
		if tc.args != nil && !strings.Contains(r.Stderr, "mcptask help") {
			t.Errorf("%q: no pointer to the help\n%s", tc.args, r)
		}
	}
}

func TestConnectionErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t, freeURL(t))
	for _, args := range [][]string{{"tools"}, {"call", "echo", "text=hi"}, {"status", "abc"}, {"wait", "abc"}, {"cancel", "abc"}} {
		expect(t, c.run(args...), exitConnection, nil, []string{"is the server running?"})
	}

	r := c.run("--json", "tools")
	var e struct {
		Status   string
		ExitCode int
		Error    struct{ Message string }
	}
	if err := json.Unmarshal([]byte(r.Stdout), &e); err != nil || e.ExitCode != exitConnection || r.Code != exitConnection || e.Error.Message == "" {
		t.Fatalf("--json when unreachable: %+v %v\n%s", e, err, r)
	}
	// Nothing to resume needs no server.
	expect(t, c.run("resume"), exitOK, nil, []string{"nothing to resume"})
	expect(t, c.run("list"), exitOK, nil, []string{"no tasks in flight"})

	// A server that answers garbage.
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("this is not JSON-RPC"))
	}))
	t.Cleanup(garbage.Close)
	expect(t, newCLI(t, garbage.URL+"/mcp").run("tools"), exitConnection, nil, []string{"mcptask:"})
}

func TestTools(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	for _, wire := range wires {
		r := c.run("--wire", wire, "tools")
		expect(t, r, exitOK, []string{"long_computation", "deploy_with_confirmation", "flaky_migration", "lint_report", "echo"}, nil)
		if wire == "2025-11-25" && !regexp.MustCompile(`deploy_with_confirmation\s+required`).MatchString(r.Stdout) {
			t.Errorf("tools on 2025-11-25 lacks task support\n%s", r)
		}
	}
	expect(t, c.run("tools", "long_computation"), exitOK, []string{"Counts the prime numbers", "Arguments:", "step_delay_ms", "integer"}, nil)
	expect(t, c.run("tools", "no_such_tool"), exitUsage, nil, []string{`no tool "no_such_tool"`})

	r := c.run("--json", "tools")
	var tools []struct {
		Name        string         `json:"name"`
		InputSchema map[string]any `json:"inputSchema"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &tools); err != nil || len(tools) < 5 {
		t.Fatalf("tools --json: %v\n%s", err, r)
	}
}

func TestJSONOutput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)

	type envelope struct {
		TaskID string `json:"taskId"`
		Tool   string `json:"tool"`
		Status string `json:"status"`
		Result *struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			StructuredContent map[string]any `json:"structuredContent"`
			IsError           bool           `json:"isError"`
		} `json:"result"`
		Error *struct {
			Code    int64          `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
		ExitCode int `json:"exitCode"`
	}
	decode := func(r result) envelope {
		t.Helper()
		var e envelope
		if err := json.Unmarshal([]byte(r.Stdout), &e); err != nil {
			t.Fatalf("stdout is not the JSON outcome: %v\n%s", err, r)
		}
		if e.ExitCode != r.Code {
			t.Fatalf("exitCode %d in JSON, %d for the process\n%s", e.ExitCode, r.Code, r)
		}
		return e
	}

	r := c.run("--json", "call", "long_computation", "n=1000", "steps=2", "step_delay_ms=50")
	e := decode(r)
	if r.Code != exitOK || e.TaskID == "" || e.Status != "completed" || e.Tool != "long_computation" ||
		e.Result == nil || e.Result.StructuredContent["primes"] != float64(168) {
		t.Fatalf("%+v\n%s", e, r)
	}
	if strings.Contains(r.Stderr, "working") {
		t.Errorf("--json without a terminal printed status lines\n%s", r)
	}

	e = decode(c.run("--json", "call", "lint_report", "line_delay_ms=0"))
	if e.ExitCode != exitToolError || e.Status != "completed" || e.Result == nil || !e.Result.IsError {
		t.Fatalf("lint_report: %+v", e)
	}
	e = decode(c.run("--json", "call", "flaky_migration", "step_delay_ms=0"))
	if e.ExitCode != exitFailed || e.Status != "failed" || e.Error == nil || e.Error.Code != -32603 || e.Error.Data["failedStep"] != float64(2) {
		t.Fatalf("flaky_migration: %+v", e)
	}
	e = decode(c.run("--json", "call", "echo", "text=hi"))
	if e.ExitCode != exitOK || e.TaskID != "" || e.Result == nil || e.Result.Content[0].Text != "hi" {
		t.Fatalf("echo: %+v", e)
	}

	// status and list of a detached task.
	r = c.run("--json", "call", "--detach", "long_computation", "n=1000", "steps=5", "step_delay_ms=60000")
	var st struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
		Tool   string `json:"tool"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil || st.TaskID == "" || st.Status != "working" || r.Code != exitOK {
		t.Fatalf("call --detach --json: %+v %v\n%s", st, err, r)
	}
	r = c.run("--json", "status", st.TaskID)
	var st2 struct {
		TaskID, Status, StatusMessage string
		CreatedAt                     time.Time
	}
	if err := json.Unmarshal([]byte(r.Stdout), &st2); err != nil || st2.TaskID != st.TaskID || st2.Status != "working" || st2.CreatedAt.IsZero() {
		t.Fatalf("status --json: %+v %v\n%s", st2, err, r)
	}
	r = c.run("--json", "list")
	var list []struct{ TaskID, Status, Tool string }
	if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil || len(list) != 1 || list[0].TaskID != st.TaskID || list[0].Tool != "long_computation" {
		t.Fatalf("list --json: %+v %v\n%s", list, err, r)
	}
	r = c.run("--json", "cancel", st.TaskID)
	if err := json.Unmarshal([]byte(r.Stdout), &st2); err != nil || st2.Status != "cancelled" || r.Code != exitOK {
		t.Fatalf("cancel --json: %+v %v\n%s", st2, err, r)
	}
	e = decode(c.run("--json", "wait", st.TaskID))
	if e.ExitCode != exitCancelled || e.Status != "cancelled" {
		t.Fatalf("wait of a cancelled task: %+v", e)
	}
}

// TestJSONStatusAgreesWithWait: '--json wait' and '--json status' give
// one task the same status on both wires. On 2025-11-25 the server marks
// a task whose result has isError: true failed; wait said "completed".
func TestJSONStatusAgreesWithWait(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d.URL)
			for _, call := range [][]string{
				{"lint_report", "line_delay_ms=0"},               // isError: true
				{"long_computation", "n=100", "step_delay_ms=0"}, // success
				{"flaky_migration", "step_delay_ms=0"},           // a JSON-RPC error
			} {
				r := c.run(append([]string{"--wire", wire, "--json", "call", "--detach"}, call...)...)
				var detached struct{ TaskID string }
				if err := json.Unmarshal([]byte(r.Stdout), &detached); err != nil || detached.TaskID == "" {
					t.Fatalf("call --detach: %v\n%s", err, r)
				}
				var waited, status struct{ TaskID, Status string }
				r = c.run("--wire", wire, "--json", "wait", detached.TaskID)
				if err := json.Unmarshal([]byte(r.Stdout), &waited); err != nil {
					t.Fatalf("wait --json: %v\n%s", err, r)
				}
				r = c.run("--wire", wire, "--json", "status", detached.TaskID)
				if err := json.Unmarshal([]byte(r.Stdout), &status); err != nil {
					t.Fatalf("status --json: %v\n%s", err, r)
				}
				if waited.Status != status.Status {
					t.Errorf("%s: wait --json says %q, status --json says %q", call[0], waited.Status, status.Status)
				}
			}
		})
	}
}

func TestUnknownTask(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	for _, args := range [][]string{{"status", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}, {"wait", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}} {
		expect(t, c.run(args...), exitConnection, nil, []string{"not found"})
	}
}

func TestStdio(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "")
	server := daemonBin + " -stdio -db " + filepath.Join(t.TempDir(), "tasks.db")
	expect(t, c.run("--stdio", server, "tools"), exitOK, []string{"long_computation"}, nil)
	expect(t, c.run("--stdio", server, "call", "long_computation", "n=1000", "steps=2", "step_delay_ms=20"),
		exitOK, []string{"There are 168 primes up to 1000 (computed in 2 steps)."}, nil)
	expect(t, c.run("--stdio", server, "call", "--answer", "confirm=true", "deploy_with_confirmation", "service=db", "build_steps=1", "step_delay_ms=0"),
		exitOK, []string{"Deployed db@latest to production."}, nil)
}

// TestStdioRefusesDetachedTasks: with --stdio the server stops with
// mcptask, and its running tasks with it, so --detach and --timeout (which
// promise a task that keeps running) are refused before the server starts,
// and no task is created (the journal stays empty).
func TestStdioRefusesDetachedTasks(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "")
	db := filepath.Join(t.TempDir(), "tasks.db")
	server := daemonBin + " -stdio -db " + db
	for _, args := range [][]string{
		{"--stdio", server, "call", "--detach", "long_computation", "steps=5"},
		{"--stdio", server, "--timeout", "1s", "call", "long_computation", "steps=5"},
		{"--stdio", server, "--timeout", "1s", "wait", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		{"--stdio", server, "--timeout", "1s", "resume"},
	} {
		expect(t, c.run(args...), exitUsage, nil, []string{"cannot be used with --stdio", "stops when it exits"})
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stdio server was started (its database exists: %v)", err)
	}
	expect(t, c.run("list"), exitOK, nil, []string{"no tasks in flight"})
}
