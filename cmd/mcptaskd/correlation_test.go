package main

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/wire"
)

var (
	cliOnce sync.Once
	cliBin  string
	cliErr  error
)

// mcptaskCLI builds the mcptask CLI once for the tests of this package.
func mcptaskCLI(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		cliBin = filepath.Join(filepath.Dir(daemonBin), "mcptask")
		cliErr = proctest.Build(context.Background(), cliBin, "github.com/mcptask/mcptask/cmd/mcptask", false, os.Stderr)
	})
	if cliErr != nil {
		t.Fatalf("building mcptask: %v", cliErr)
	}
	return cliBin
}

// runCLI runs mcptask against url with args and returns its stdout.
func runCLI(t *testing.T, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, mcptaskCLI(t), append([]string{"--url", url}, args...)...)
	cmd.Env = append(os.Environ(), "MCPTASK_JOURNAL="+filepath.Join(t.TempDir(), "journal"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcptask %v: %v\n%s%s", args, err, out, stderr.String())
	}
	return string(out)
}

// callWithMeta calls tool as a task on the 2026-07-28 wire with extra
// _meta entries, and returns the answer (a task handle) or its error.
func callWithMeta(c *wiretest.Client, tool string, args map[string]any, extra map[string]any) (*wiretest.Task, error) {
	meta := c.Meta()
	maps.Copy(meta, extra)
	var tk wiretest.Task
	err := c.Result(context.Background(), "tools/call", map[string]any{"name": tool, "arguments": args, "_meta": meta}, &tk)
	return &tk, err
}

// correlationOf reads tasks/get's io.mcptask/correlation of the task id.
func correlationOf(t *testing.T, c *wiretest.Client, id string) (map[string]string, bool) {
	t.Helper()
	var res struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if err := c.Result(context.Background(), wire.MethodTasksGet, map[string]any{"taskId": id}, &res); err != nil {
		t.Fatal(err)
	}
	raw, ok := res.Meta[wire.MetaCorrelation]
	if !ok {
		return nil, false
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %s: %v", wire.MetaCorrelation, raw, err)
	}
	return m, true
}

// TestCorrelationEndToEnd: a call carrying Claude Code's tool-use ID in
// its _meta (the default correlation key) creates a task whose
// correlation is shown by tasks/get, by `mcptask status` (text and
// --json), by the audit trail's task.created record and by the ledger
// operation its work records (io.mcptask/operations/list), and is still
// there after mcptaskd restarts on the same SQLite file. A key the server
// is not told to read is not stored.
func TestCorrelationEndToEnd(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "tasks.db")
	d := startDaemon(t, "mcptaskd", db)
	c := d.client(true)
	ctx := context.Background()
	const toolUse = "toolu_01A09q90qw90lq917835lq9"
	want := map[string]string{wire.MetaClaudeCodeToolUseID: toolUse}

	h, err := callWithMeta(c, "deploy_with_confirmation", map[string]any{"service": "api", "version": "1.2.3", "build_steps": 1, "step_delay_ms": 0},
		map[string]any{wire.MetaClaudeCodeToolUseID: toolUse, "example.com/unlisted": "not-stored"})
	if err != nil || h.TaskID == "" {
		t.Fatalf("tools/call: %+v, %v", h, err)
	}
	id := h.TaskID
	tk := waitTask(t, c, id, 30*time.Second, "input_required", func(tk *wiretest.Task) bool { return tk.Status == "input_required" || terminal(tk) })
	if got, _ := correlationOf(t, c, id); !maps.Equal(got, want) {
		t.Errorf("tasks/get while input_required: correlation %v, want %v", got, want)
	}
	key := elicitKey(t, tk, "Roll it out to production")
	if err := c.Result(ctx, wire.MethodTasksUpdate, map[string]any{"taskId": id, "inputResponses": map[string]any{
		key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}},
	}}, nil); err != nil {
		t.Fatal(err)
	}
	if tk = waitTask(t, c, id, 30*time.Second, "terminal", terminal); tk.Status != "completed" {
		t.Fatalf("task ended %s: %+v", tk.Status, tk)
	}

	check := func(t *testing.T, d *daemon, when string) {
		t.Helper()
		c := d.client(true)
		if got, ok := correlationOf(t, c, id); !ok || !maps.Equal(got, want) {
			t.Errorf("%s: tasks/get correlation %v (present %v), want %v", when, got, ok, want)
		}
		var ops wire.ListOperationsResult
		if err := c.Result(ctx, wire.MethodOperationsList, map[string]any{"taskId": id}, &ops); err != nil {
			t.Fatal(err)
		}
		if len(ops.Operations) != 1 || ops.Operations[0].State != "confirmed" || !maps.Equal(ops.Operations[0].Correlation, want) {
			t.Errorf("%s: the task's ledger operations: %+v, want one confirmed with correlation %v", when, ops.Operations, want)
		}
		out := runCLI(t, d.URL, "status", id)
		if !strings.Contains(out, "host:") || !strings.Contains(out, wire.MetaClaudeCodeToolUseID+"="+toolUse) || strings.Contains(out, "not-stored") {
			t.Errorf("%s: mcptask status does not show the correlation:\n%s", when, out)
		}
		var js struct {
			Correlation map[string]string `json:"correlation"`
		}
		if out := runCLI(t, d.URL, "status", "--json", id); json.Unmarshal([]byte(out), &js) != nil || !maps.Equal(js.Correlation, want) {
			t.Errorf("%s: mcptask status --json: %s", when, out)
		}
	}
	check(t, d, "before the restart")

	created := 0
	for _, rec := range d.LogRecords("audit") {
		if rec["event"] != "task.created" || rec["task"] != id {
			continue
		}
		created++
		corr, _ := rec["correlation"].(map[string]any)
		if len(corr) != 1 || corr[wire.MetaClaudeCodeToolUseID] != toolUse {
			t.Errorf("the audit record of the creation: correlation %v, want %v", rec["correlation"], want)
		}
	}
	if created != 1 {
		t.Errorf("%d task.created audit records of %s, want 1", created, id)
	}

	if err := d.signal(syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("mcptaskd after SIGTERM: %v", err)
	}
	check(t, startDaemon(t, "mcptaskd-again", db), "after a restart")
}

// TestCorrelationConfiguredKeys: correlationKeys in the configuration file
// replaces the default list: the configured key of a call's _meta is
// stored, Claude Code's (now unlisted) is not, a value that is not a
// string is ignored, an over-long value refuses the call (-32602) and
// creates no task, and a call with none of the keys shows no correlation.
// -check-config names a bad list's line.
func TestCorrelationConfiguredKeys(t *testing.T) {
	t.Parallel()
	config := writeConfig(t, "correlationKeys: [acme/requestId, acme/sessionId]\n")
	d := startDaemon(t, "mcptaskd", filepath.Join(t.TempDir(), "tasks.db"), "-config", config)
	c := d.client(true)
	args := map[string]any{"n": 1000, "steps": 1}

	h, err := callWithMeta(c, "long_computation", args, map[string]any{
		"acme/requestId": "req-42", "acme/sessionId": 7, wire.MetaClaudeCodeToolUseID: "toolu_01unlisted"})
	if err != nil || h.TaskID == "" {
		t.Fatalf("tools/call: %+v, %v", h, err)
	}
	waitTask(t, c, h.TaskID, 30*time.Second, "terminal", terminal)
	if got, _ := correlationOf(t, c, h.TaskID); !maps.Equal(got, map[string]string{"acme/requestId": "req-42"}) {
		t.Errorf("correlation %v, want only acme/requestId", got)
	}

	plain, err := callWithMeta(c, "long_computation", args, map[string]any{wire.MetaClaudeCodeToolUseID: "toolu_01unlisted"})
	if err != nil || plain.TaskID == "" {
		t.Fatalf("tools/call: %+v, %v", plain, err)
	}
	if got, ok := correlationOf(t, c, plain.TaskID); ok {
		t.Errorf("a call with no configured key shows correlation %v", got)
	}

	_, err = callWithMeta(c, "long_computation", args, map[string]any{"acme/requestId": strings.Repeat("x", 257)})
	var we *wiretest.Error
	if !errors.As(err, &we) || we.Code != -32602 || !strings.Contains(we.Message, "correlation") {
		t.Errorf("a call with an over-long correlation value: %v, want -32602 naming the correlation", err)
	}

	bad := writeConfig(t, "demo: true\ncorrelationKeys:\n  - a\n  - a\n")
	out, err := exec.Command(daemonBin, "-check-config", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), bad+":2: correlationKeys:") || !strings.Contains(string(out), "twice") {
		t.Errorf("-check-config of a key given twice: %v\n%s", err, out)
	}
}

// TestToolMetaConfig: toolMeta of an mcpServers entry reaches the
// gateway's upstream as given (nested objects as JSON objects); a tool
// that tools does not re-export, or a value that is no JSON object, is
// refused with its line.
func TestToolMetaConfig(t *testing.T) {
	noEnv := func(string) string { return "" }
	fc, err := parseFileConfig([]byte(`mcpServers:
  up:
    url: http://127.0.0.1:1/mcp
    tools: [slow]
    toolMeta:
      slow: {"anthropic/maxResultSizeChars": 200000, "x/nested": {"a": [1, 2]}}
      "*": {"x/all": true}
`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	ups := fc.upstreams()
	if len(ups) != 1 {
		t.Fatalf("upstreams: %+v", ups)
	}
	b, err := json.Marshal(ups[0].ToolMeta)
	if want := `{"*":{"x/all":true},"slow":{"anthropic/maxResultSizeChars":200000,"x/nested":{"a":[1,2]}}}`; err != nil || string(b) != want {
		t.Errorf("ToolMeta = %s (%v), want %s", b, err, want)
	}
	for _, c := range []struct{ config, want string }{
		{"mcpServers:\n  up:\n    url: http://127.0.0.1:1/mcp\n    tools: [slow]\n    toolMeta:\n      other: {a: 1}\n", "2: mcpServers.up.toolMeta.other: names a tool that tools does not re-export"},
		{"mcpServers:\n  up:\n    url: http://127.0.0.1:1/mcp\n    toolMeta:\n      slow: [1]\n", "toolMeta"},
		{"mcpServers:\n  up:\n    url: http://127.0.0.1:1/mcp\n    toolMeta:\n      slow: {1: 2, [a]: b}\n", "mcpServers.up.toolMeta.slow"},
	} {
		if _, err := parseFileConfig([]byte(c.config), noEnv); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.config, err, c.want)
		}
	}
}
