package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway tests: mcptaskd started with -config on an mcpServers block
// as a host would have it, whose one upstream is this test binary run as a
// plain stdio MCP server (no tasks of its own: the go-sdk's), and mcptask
// calling that upstream's tools through it on both wires.

// upstreamArg runs the test binary as that upstream; the argument after it
// is a directory where the upstream records what its calls did (the file
// calls.log) and every message it reads and writes (wire.PID.log, one per
// process), and where a test releases a gated call (the file gate.TAG).
const upstreamArg = "-mcptask-test-upstream"

type buildArgs struct {
	Tag    string `json:"tag" jsonschema:"names the call in calls.log and its gate file"`
	Steps  int    `json:"steps,omitempty" jsonschema:"progress steps before the end (or the gate)"`
	StepMS int    `json:"step_ms,omitempty" jsonschema:"milliseconds per step"`
	Gate   bool   `json:"gate,omitempty" jsonschema:"after the steps, wait until the file gate.TAG exists"`
}

type deployArgs struct {
	Service string `json:"service"`
}

// upstream serves the tools over stdio until its stdin closes.
func upstream(dir string) int {
	record := func(tag, what string) {
		f, err := os.OpenFile(filepath.Join(dir, "calls.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return
		}
		defer f.Close()
		fmt.Fprintf(f, "%s %s\n", tag, what) // one small O_APPEND write: whole lines, even from several processes
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "cli-upstream", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "build", Description: "a slow build that reports its progress"},
		func(ctx context.Context, req *mcp.CallToolRequest, in buildArgs) (*mcp.CallToolResult, any, error) {
			record(in.Tag, "start")
			cancelled := func() (*mcp.CallToolResult, any, error) {
				record(in.Tag, "cancelled")
				return nil, nil, ctx.Err()
			}
			for i := 1; i <= in.Steps; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
					Progress: float64(i), Total: float64(in.Steps), Message: fmt.Sprintf("build step %d of %d", i, in.Steps)})
				select {
				case <-ctx.Done():
					return cancelled()
				case <-time.After(time.Duration(in.StepMS) * time.Millisecond): // the work a step stands for
				}
			}
			for in.Gate {
				if _, err := os.Stat(filepath.Join(dir, "gate."+in.Tag)); err == nil {
					break
				}
				select {
				case <-ctx.Done():
					return cancelled()
				case <-time.After(10 * time.Millisecond): // polling the gate file
				}
			}
			record(in.Tag, "done")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("built %s in %d steps", in.Tag, in.Steps)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "deploy", Description: "deploys after asking for a confirmation"},
		func(ctx context.Context, req *mcp.CallToolRequest, in deployArgs) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Deploy " + in.Service + " to production?",
				RequestedSchema: map[string]any{"type": "object", "required": []string{"confirm"},
					"properties": map[string]any{"confirm": map[string]any{"type": "boolean", "description": "go ahead"}}}})
			if err != nil {
				return nil, nil, err
			}
			text := fmt.Sprintf("%s not deployed (%s)", in.Service, res.Action)
			if res.Action == "accept" && res.Content["confirm"] == true {
				text = "deployed " + in.Service
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	var t mcp.Transport = &mcp.StdioTransport{}
	if f, err := os.Create(filepath.Join(dir, fmt.Sprintf("wire.%d.log", os.Getpid()))); err == nil {
		defer f.Close()
		t = &mcp.LoggingTransport{Transport: t, Writer: f}
	}
	if err := s.Run(context.Background(), t); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		return 1
	}
	return 0
}

// gatewayDaemon starts mcptaskd with a -config file holding an mcpServers
// block in the JSON shape hosts use (JSON is YAML), whose upstream
// "builder" is this test binary over stdio. It returns the daemon and the
// upstream's directory.
func gatewayDaemon(t *testing.T) (*daemon, *upstreamDir) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	block, err := json.MarshalIndent(map[string]any{
		"demo": false,
		"mcpServers": map[string]any{
			"builder": map[string]any{"type": "stdio", "command": exe, "args": []string{upstreamArg, dir}},
		},
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "mcptaskd.json")
	if err := os.WriteFile(config, block, 0o600); err != nil {
		t.Fatal(err)
	}
	return startDaemon(t, "-config", config), &upstreamDir{t: t, dir: dir}
}

// upstreamDir is what the upstream's calls recorded.
type upstreamDir struct {
	t   *testing.T
	dir string
}

// lines returns the lines of calls.log about the call tagged tag.
func (u *upstreamDir) lines(tag string) []string {
	data, err := os.ReadFile(filepath.Join(u.dir, "calls.log"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		u.t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if what, ok := strings.CutPrefix(l, tag+" "); ok {
			out = append(out, what)
		}
	}
	return out
}

// waitFor waits until the call tagged tag recorded what.
func (u *upstreamDir) waitFor(tag, what string, d *daemon) {
	u.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(" "+strings.Join(u.lines(tag), " ")+" ", " "+what+" ") {
		if time.Now().After(deadline) {
			u.t.Fatalf("the upstream call %s did not record %q within 60s (it recorded %q)\n--- mcptaskd log ---\n%s", tag, what, u.lines(tag), d.Logs())
		}
		time.Sleep(10 * time.Millisecond) // polling the file, not timing the test
	}
}

// cancelNotified reports whether the upstream process that ran the call
// tagged tag read a notifications/cancelled of that call's request.
func (u *upstreamDir) cancelNotified(tag string) bool {
	u.t.Helper()
	logs, err := filepath.Glob(filepath.Join(u.dir, "wire.*.log"))
	if err != nil {
		u.t.Fatal(err)
	}
	type message struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Arguments struct {
				Tag string `json:"tag"`
			} `json:"arguments"`
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	for _, name := range logs {
		data, err := os.ReadFile(name)
		if err != nil {
			u.t.Fatal(err)
		}
		var call string // the ID of the tools/call of tag, in this process
		for _, l := range strings.Split(string(data), "\n") {
			js, ok := strings.CutPrefix(l, "read: ")
			var m message
			if !ok || json.Unmarshal([]byte(js), &m) != nil {
				continue
			}
			switch {
			case m.Method == "tools/call" && m.Params.Arguments.Tag == tag:
				call = string(m.ID)
			case m.Method == "notifications/cancelled" && call != "" && string(m.Params.RequestID) == call:
				return true
			}
		}
	}
	return false
}

// open releases the gated call tagged tag.
func (u *upstreamDir) open(tag string) {
	u.t.Helper()
	if err := os.WriteFile(filepath.Join(u.dir, "gate."+tag), nil, 0o600); err != nil {
		u.t.Fatal(err)
	}
}

// tagOf names one call of one test on one wire.
func tagOf(name, wire string) string { return name + "-" + strings.ReplaceAll(wire, "-", "") }

// TestGatewayCall: 'mcptask call' of an upstream's slow tool through
// mcptaskd's gateway shows the upstream's progress as status lines and
// prints its result; an upstream's elicitation is answered with --answer
// (and declined without one); on both wires.
func TestGatewayCall(t *testing.T) {
	t.Parallel()
	d, up := gatewayDaemon(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d.URL)
			expect(t, c.run("--wire", wire, "tools"), exitOK, []string{"build", "deploy"}, nil)

			// The call stays at its gate until the last step's progress
			// showed as a status line: mcptask cannot miss it.
			tag := tagOf("progress", wire)
			p := c.start("--wire", wire, "call", "build", "tag="+tag, "steps=3", "step_ms=20", "gate=true")
			id := p.waitStderr(taskStarted, 60*time.Second)[1]
			p.waitStderr(regexp.MustCompile(`mcptask: working: build step 3 of 3`), 60*time.Second)
			up.open(tag)
			r := p.wait(60 * time.Second)
			expect(t, r, exitOK, []string{"built " + tag + " in 3 steps"}, []string{"task " + id + " started (build)"})
			if got := up.lines(tag); strings.Join(got, ",") != "start,done" {
				t.Errorf("the upstream call recorded %q, want start,done", got)
			}
			expect(t, c.run("--wire", wire, "status", id), exitOK, []string{"completed"}, nil)

			r = c.run("--wire", wire, "call", "deploy", "service=api", "--answer", "confirm=true")
			expect(t, r, exitOK, []string{"deployed api"}, []string{"started (deploy)", "Deploy api to production?", "answered from --answer"})
			r = c.run("--wire", wire, "call", "deploy", "service=db", "--answer", "confirm=false")
			expect(t, r, exitOK, []string{"db not deployed (accept)"}, []string{"answered from --answer"})
			r = c.run("--wire", wire, "call", "deploy", "service=web")
			expect(t, r, exitOK, []string{"web not deployed (decline)"}, []string{"declined: standard input is not a terminal"})
			expect(t, c.run("list"), exitOK, nil, []string{"no tasks in flight"})
		})
	}
}

// TestGatewayCancel: 'mcptask call --detach' of the upstream's tool, then
// 'mcptask cancel ID': the upstream call is cancelled (its context ends,
// by the notifications/cancelled it read) and the task ends cancelled; on
// both wires.
func TestGatewayCancel(t *testing.T) {
	t.Parallel()
	d, up := gatewayDaemon(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d.URL)
			tag := tagOf("cancel", wire)
			r := c.run("--wire", wire, "call", "--detach", "build", "tag="+tag, "steps=1", "gate=true")
			expect(t, r, exitOK, nil, []string{"wait for it with"})
			id := strings.TrimSpace(r.Stdout)
			up.waitFor(tag, "start", d)
			expect(t, c.run("--wire", wire, "status", id), exitOK, []string{"working"}, nil)

			expect(t, c.run("--wire", wire, "cancel", id), exitOK, []string{"task " + id + ": cancelled"}, nil)
			up.waitFor(tag, "cancelled", d)
			// Its context ended by the cancellation, not by a closed
			// connection: the upstream read it (before its handler saw it).
			if !up.cancelNotified(tag) {
				t.Errorf("the upstream call %s ended without a notifications/cancelled of its request", tag)
			}
			expect(t, c.run("--wire", wire, "wait", id), exitCancelled, nil, []string{"was cancelled"})
			expect(t, c.run("--wire", wire, "status", id), exitOK, []string{"cancelled"}, nil)
			if got := up.lines(tag); strings.Join(got, ",") != "start,cancelled" {
				t.Errorf("the upstream call recorded %q, want start,cancelled", got)
			}
			expect(t, c.run("resume"), exitOK, nil, []string{"nothing to resume"})
		})
	}
}

// TestGatewayResume: a wait cut short by --timeout leaves the upstream's
// call running as a task; 'mcptask resume' finishes it, without calling
// the upstream again; on both wires.
func TestGatewayResume(t *testing.T) {
	t.Parallel()
	d, up := gatewayDaemon(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d.URL)
			tag := tagOf("resume", wire)
			// The gate holds the call past the timeout, however slow the
			// machine.
			r := c.run("--wire", wire, "call", "--timeout", "3s", "build", "tag="+tag, "steps=2", "step_ms=20", "gate=true")
			expect(t, r, exitDeadline, nil, []string{"keeps running", " wait "})
			id := strings.TrimSpace(r.Stdout)
			if !regexp.MustCompile(`^[a-z2-7]{20,}$`).MatchString(id) {
				t.Fatalf("want the task ID alone on stdout\n%s", r)
			}
			expect(t, c.run("list"), exitOK, []string{id, "build"}, nil)
			expect(t, c.run("--wire", wire, "status", id), exitOK, []string{"working"}, nil)
			// Still running, a shorter resume is cut short too.
			expect(t, c.run("--wire", wire, "--timeout", "300ms", "resume"), exitDeadline, []string{id}, nil)

			up.open(tag)
			r = c.run("--wire", wire, "resume")
			expect(t, r, exitOK, []string{"built " + tag + " in 2 steps"}, []string{"resuming 1 task(s)", id})
			if got := up.lines(tag); strings.Join(got, ",") != "start,done" {
				t.Errorf("the upstream call recorded %q, want start,done: called once", got)
			}
			expect(t, c.run("list"), exitOK, nil, []string{"no tasks in flight"})
			expect(t, c.run("resume"), exitOK, nil, []string{"nothing to resume"})
		})
	}
}

// TestGatewayEverything: the same through a real upstream no one here
// wrote, @modelcontextprotocol/server-everything over stdio (scripts/interop.sh
// installs the pinned version and sets MCPTASK_TEST_SERVER_EVERYTHING and
// MCPTASK_TEST_NODE): its slow tool with its progress as status lines, its
// elicitation answered with --answer, a detached call cancelled, a wait cut
// short by --timeout finished by resume; on both wires.
func TestGatewayEverything(t *testing.T) {
	t.Parallel()
	entry, node := os.Getenv("MCPTASK_TEST_SERVER_EVERYTHING"), os.Getenv("MCPTASK_TEST_NODE")
	if entry == "" || node == "" {
		t.Skip("SKIPPED: needs @modelcontextprotocol/server-everything: set MCPTASK_TEST_SERVER_EVERYTHING (its dist/index.js) and MCPTASK_TEST_NODE (node); scripts/interop.sh does")
	}
	// The block as a host's configuration holds it.
	block := fmt.Sprintf(`{
  "demo": false,
  "mcpServers": {
    "everything": {
      "command": %q,
      "args": [%q, "stdio"]
    }
  }
}
`, node, entry)
	config := filepath.Join(t.TempDir(), "mcptaskd.json")
	if err := os.WriteFile(config, []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "-config", config)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d.URL)
			// Each step lasts a second: every progress shows as a status line.
			r := c.run("--wire", wire, "call", "trigger-long-running-operation", "duration=3", "steps=3")
			expect(t, r, exitOK, []string{"Long running operation completed. Duration: 3 seconds, Steps: 3."},
				[]string{"started (trigger-long-running-operation)", "mcptask: working: 1 of 3", "mcptask: working: 2 of 3"})

			r = c.run("--wire", wire, "call", "trigger-elicitation-request", "--answer", "name=Ada Lovelace", "--answer", "check=true")
			expect(t, r, exitOK, []string{"User provided the requested information", "- Name: Ada Lovelace", "- Agreed to terms: true"},
				[]string{"Please provide inputs for the following fields:", "answered from --answer"})

			r = c.run("--wire", wire, "call", "--detach", "trigger-long-running-operation", "duration=600", "steps=600")
			expect(t, r, exitOK, nil, []string{"wait for it with"})
			id := strings.TrimSpace(r.Stdout)
			expect(t, c.run("--wire", wire, "cancel", id), exitOK, []string{"task " + id + ": cancelled"}, nil)
			expect(t, c.run("--wire", wire, "wait", id), exitCancelled, nil, []string{"was cancelled"})

			// The operation lasts 6 s, the wait 2 s.
			r = c.run("--wire", wire, "call", "--timeout", "2s", "trigger-long-running-operation", "duration=6", "steps=3")
			expect(t, r, exitDeadline, nil, []string{"keeps running"})
			id = strings.TrimSpace(r.Stdout)
			r = c.run("--wire", wire, "resume")
			expect(t, r, exitOK, []string{"Long running operation completed. Duration: 6 seconds, Steps: 3."}, []string{"resuming 1 task(s)", id})
			expect(t, c.run("list"), exitOK, nil, []string{"no tasks in flight"})
		})
	}
}
