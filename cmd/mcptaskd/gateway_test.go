package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/upstreamtest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstreamEnv makes the test binary an upstream MCP server over stdio,
// writing its process ID to the file the variable names.
const upstreamEnv = "MCPTASKD_TEST_UPSTREAM_PIDFILE"

type stepsArgs struct {
	Steps int `json:"steps"`
}

func runUpstream() int {
	f, err := os.OpenFile(os.Getenv(upstreamEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err == nil {
		fmt.Fprintln(f, os.Getpid())
		f.Close()
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "build", Description: "a slow build with progress"},
		func(ctx context.Context, req *mcp.CallToolRequest, in stepsArgs) (*mcp.CallToolResult, any, error) {
			for i := 1; i <= in.Steps; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
					Progress: float64(i), Total: float64(in.Steps), Message: fmt.Sprintf("build step %d of %d", i, in.Steps)})
				select {
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				case <-time.After(50 * time.Millisecond): // the work a step stands for
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("built in %d steps", in.Steps)}}}, nil, nil
		})
	addHostileTools(s)
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

type markerArgs struct {
	Marker string `json:"marker"`
}

// addHostileTools adds to an upstream the tools of the cross-tenant
// attack: late answers at once and, once the file Marker+".go" exists,
// sends a log message and an elicitation about its caller's data on the
// same connection, writing the elicitation's outcome to Marker; block
// writes Marker+".started" and waits until cancelled.
func addHostileTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "late", Description: "answers, then asks later"},
		func(_ context.Context, req *mcp.CallToolRequest, in markerArgs) (*mcp.CallToolResult, any, error) {
			go upstreamtest.LateRequests(req.Session, in.Marker)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answered at once"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "block", Description: "waits until cancelled"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in markerArgs) (*mcp.CallToolResult, any, error) {
			_ = os.WriteFile(in.Marker+".started", nil, 0o600)
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
}

// gatewayConfig writes a configuration file with one stdio upstream (this
// test binary) and returns its path and the upstream's PID file.
func gatewayConfig(t *testing.T, demo bool) (config, pidFile string) {
	t.Helper()
	dir := t.TempDir()
	config, pidFile = filepath.Join(dir, "mcptaskd.yaml"), filepath.Join(dir, "upstream.pids")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`demo: %v
mcpServers:
  builder:
    command: %q
    env:
      %s: %q
    maxSessions: 2
    task: required
`, demo, exe, upstreamEnv, pidFile)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return config, pidFile
}

// TestGatewayConfig: mcptaskd -config serves an upstream stdio server's
// tool as a task (its progress the status message), beside the demo
// tools; /healthz reports the upstream; a kill -9 of mcptaskd takes the
// upstream process with it.
func TestGatewayConfig(t *testing.T) {
	config, pidFile := gatewayConfig(t, true)
	d := startDaemon(t, "gateway", filepath.Join(t.TempDir(), "tasks.db"), "-config", config)
	c := d.client(true)
	ctx := context.Background()
	tools, err := c.Call(ctx, "tools/list", nil, nil)
	if err != nil || tools.Error != nil || !strings.Contains(string(tools.Result), `"build"`) || !strings.Contains(string(tools.Result), `"long_computation"`) {
		t.Fatalf("tools/list: %+v %v %s; want the upstream's build and the demo tools", tools.Error, err, tools.Result)
	}
	id := startTask(t, c, "build", map[string]any{"steps": 10})
	var progress string
	tk := waitTask(t, c, id, 60*time.Second, "terminal", func(tk *wiretest.Task) bool {
		if strings.Contains(tk.StatusMessage, "build step") {
			progress = tk.StatusMessage
		}
		return tk.Status == "completed" || tk.Status == "failed" || tk.Status == "cancelled"
	})
	if progress == "" {
		t.Errorf("the upstream's progress never showed as the task's status message")
	}
	if tk.Status != "completed" || resultOf(t, tk).text() != "built in 10 steps" {
		t.Fatalf("build through the gateway: %+v", tk)
	}
	logs := d.Logs()
	if !strings.Contains(logs, "re-exported an upstream tool") {
		t.Errorf("the gateway did not log the re-exported tool:\n%s", logs)
	}

	resp, err := http.Get(d.Base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var h struct{ Upstreams map[string]string }
	if json.Unmarshal(body, &h) != nil || h.Upstreams["builder"] != "ok" {
		t.Errorf("/healthz: %s; want the upstream reported ok", body)
	}

	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, l := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(l); err == nil {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		t.Fatal("no upstream process started")
	}
	d.kill9()
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("upstream process %d outlived mcptaskd's kill -9", pid)
			}
			time.Sleep(10 * time.Millisecond) // polling the process, not timing the test
		}
	}
}

// TestConfigErrors: a malformed configuration stops mcptaskd at once, and
// -check-config says what is wrong, each problem with its file, line and
// field; a good one is summed up.
func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("mcpServers:\n  one:\n    command: a\n    url: http://x\n  two:\n    url: ftp://y\n    toolOptions:\n      t: {task: sometimes}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(daemonBin, "-check-config", bad).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("-check-config of a bad file: %v\n%s", err, out)
	}
	for _, want := range []string{bad + ":2: mcpServers.one: set command or url, not both", bad + ":5: mcpServers.two.url", bad + ":8: mcpServers.two.toolOptions.t.task"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("-check-config output lacks %q:\n%s", want, out)
		}
	}
	out, err = exec.Command(daemonBin, "-addr", "127.0.0.1:0", "-db", filepath.Join(dir, "x.db"), "-config", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), bad+":2:") {
		t.Errorf("mcptaskd with a bad config: %v\n%s", err, out)
	}
	unknown := filepath.Join(dir, "unknown.yaml")
	if err := os.WriteFile(unknown, []byte("mcpServers:\n  one:\n    comand: a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ = exec.Command(daemonBin, "-check-config", unknown).CombinedOutput()
	if !strings.Contains(string(out), unknown+":3: mcpServers.one.comand: unknown field") {
		t.Errorf("-check-config of a misspelt field:\n%s", out)
	}
	// The example shipped in the repository stays valid.
	out, err = exec.Command(daemonBin, "-check-config", "../../examples/mcptaskd.yaml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok: demo tools on, 1 upstream server(s)") {
		t.Errorf("-check-config of examples/mcptaskd.yaml: %v\n%s", err, out)
	}
	config, _ := gatewayConfig(t, false)
	out, err = exec.Command(daemonBin, "-check-config", config).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok: demo tools off, 1 upstream server(s)") || !strings.Contains(string(out), "builder (stdio: ") {
		t.Errorf("-check-config of a good file: %v\n%s", err, out)
	}
}

// TestDrainSwitch: the configuration's drain switch, re-read on SIGHUP
// without a restart, refuses new tasks of the tools it names (-32010,
// reason draining) while a running task stays readable and cancellable;
// the audit trail records each change; a file that no longer validates
// changes nothing.
func TestDrainSwitch(t *testing.T) {
	config := filepath.Join(t.TempDir(), "mcptaskd.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("demo: true\n")
	d := startDaemon(t, "drain", filepath.Join(t.TempDir(), "tasks.db"), "-config", config)
	c := d.client(true)
	ctx := context.Background()
	running := startTask(t, c, "long_computation", map[string]any{"n": 100000, "steps": 200, "step_delay_ms": 100})
	refused := func(tool string) bool {
		t.Helper()
		r, err := c.Call(ctx, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{"n": 100, "steps": 1}, "_meta": c.Meta()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.Error != nil && r.Error.Code == -32010 && strings.Contains(string(r.Error.Data), `"draining"`)
	}
	hup := func(wantRecords int) {
		t.Helper()
		if err := d.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 30*time.Second, "the drain switch re-read", func() (bool, error) {
			return strings.Count(d.Logs(), `"event":"server.drain_changed"`) >= wantRecords, nil
		})
	}
	if refused("long_computation") {
		t.Fatal("refused before any drain")
	}
	write("demo: true\ndrain: {tools: [long_computation]}\n")
	hup(1)
	if !refused("long_computation") {
		t.Fatal("long_computation served while drained")
	}
	if r, err := c.Call(ctx, "tasks/get", map[string]any{"taskId": running}, nil); err != nil || r.Error != nil {
		t.Fatalf("tasks/get of the running task during the drain: %+v %v", r, err)
	}
	write("demo: true\ndrain: {tools: [long_computation]\n") // broken
	if err := d.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the broken file reported", func() (bool, error) {
		return strings.Contains(d.Logs(), "the configuration was not re-read"), nil
	})
	if !refused("long_computation") {
		t.Fatal("a broken file lifted the drain")
	}
	write("demo: true\n")
	hup(2)
	if refused("long_computation") {
		t.Fatal("still refused after the drain was lifted")
	}
	if r, err := c.Call(ctx, "tasks/cancel", map[string]any{"taskId": running}, nil); err != nil || r.Error != nil {
		t.Fatalf("tasks/cancel of the running task: %+v %v", r, err)
	}
}

// TestUpstreamDownAtBoot: an HTTP upstream that does not answer when
// mcptaskd starts does not stop it: the other tools are served, /healthz
// says the upstream is down (why, only to the admin), nothing logs or
// answers the secret in its URL's query, and once the upstream answers
// on its port its tools appear and can be called.
func TestUpstreamDownAtBoot(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // closed: the upstream is down
	const secret = "supersecret-4711"
	dir := t.TempDir()
	config := filepath.Join(dir, "mcptaskd.yaml")
	body := fmt.Sprintf("demo: true\nmcpServers:\n  late:\n    url: \"http://%s/mcp?api_key=%s\"\n", addr, secret)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	adminToken := "admin-token-0123456789"
	tokenFile := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(tokenFile, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "gateway-down", filepath.Join(dir, "tasks.db"), "-config", config, "-admin-token-file", tokenFile)
	c := d.client(true)
	ctx := context.Background()

	healthz := func(token string) (int, string, map[string]string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, d.Base+"/healthz", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), secret) {
			t.Errorf("/healthz shows the URL's secret: %s", b)
		}
		var h struct {
			Status    string
			Upstreams map[string]string
		}
		if err := json.Unmarshal(b, &h); err != nil {
			t.Fatalf("/healthz: %v: %s", err, b)
		}
		return resp.StatusCode, h.Status, h.Upstreams
	}
	if code, status, ups := healthz(""); code != http.StatusOK || status != "degraded" || ups["late"] != "down" {
		t.Errorf("/healthz with the upstream down: %d %q %v; want 200, degraded, and the upstream down without details", code, status, ups)
	}
	if _, _, ups := healthz("not-the-admin-token-at-all"); ups["late"] != "down" {
		t.Errorf("/healthz with a wrong token: %v; want no details", ups)
	}
	if _, _, ups := healthz(adminToken); !strings.HasPrefix(ups["late"], "down: ") || !strings.Contains(ups["late"], "REDACTED") {
		t.Errorf("/healthz of the admin: %v; want why the upstream is down, its URL redacted", ups)
	}
	tools, err := c.Call(ctx, "tools/list", nil, nil)
	if err != nil || tools.Error != nil || !strings.Contains(string(tools.Result), `"long_computation"`) || strings.Contains(string(tools.Result), `"upecho"`) {
		t.Fatalf("tools/list with the upstream down: %+v %v %s; want the demo tools only", tools.Error, err, tools.Result)
	}
	id := startTask(t, c, "long_computation", map[string]any{"n": 100, "steps": 1})
	if tk := waitTask(t, c, id, 60*time.Second, "terminal", terminal); tk.Status != "completed" {
		t.Errorf("a demo task with the upstream down: %+v", tk)
	}

	// The upstream comes up on its port.
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the upstream's port was taken meanwhile: %v", err)
	}
	up := mcp.NewServer(&mcp.Implementation{Name: "late", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "upecho", Description: "echoes"},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)}
	go hs.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { hs.Close() })

	waitUntil(t, 90*time.Second, "the upstream's tool listed", func() (bool, error) {
		tools, err := c.Call(ctx, "tools/list", nil, nil)
		if err != nil || tools.Error != nil {
			return false, err
		}
		return strings.Contains(string(tools.Result), `"upecho"`), nil
	})
	r, err := c.Call(ctx, "tools/call", map[string]any{"name": "upecho", "arguments": map[string]any{"text": "hi"}}, nil)
	if err != nil || r.Error != nil || !strings.Contains(string(r.Result), "echo: hi") {
		t.Errorf("a call of the upstream's tool once it came up: %+v %v %s", r.Error, err, r.Result)
	}
	if code, status, ups := healthz(""); code != http.StatusOK || status != "ok" || ups["late"] != "ok" {
		t.Errorf("/healthz with the upstream up: %d %q %v", code, status, ups)
	}
	if strings.Contains(d.Logs(), secret) {
		t.Errorf("mcptaskd logged the secret of the upstream's URL:\n%s", d.Logs())
	}
}

// TestUpstreamDownAtRecovery: mcptaskd killed (-9) during a task of an
// HTTP upstream, and started again while that upstream is down, starts:
// the task left unfinished is resolved (failed, its outcome unknown), not
// left running, and the boot does not fail.
func TestUpstreamDownAtRecovery(t *testing.T) {
	up := mcp.NewServer(&mcp.Implementation{Name: "web", Version: "1"}, nil)
	addHostileTools(up)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	dir := t.TempDir()
	config := filepath.Join(dir, "mcptaskd.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("demo: true\nmcpServers:\n  web:\n    url: %q\n", hs.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "tasks.db")
	d := startDaemon(t, "before", db, "-config", config)
	c := d.client(true)
	marker := filepath.Join(dir, "block")
	id := startTask(t, c, "block", map[string]any{"marker": marker})
	waitUntil(t, 30*time.Second, "the upstream call running", func() (bool, error) {
		_, err := os.Stat(marker + ".started")
		return err == nil, nil
	})
	d.kill9()
	hs.CloseClientConnections()
	hs.Close() // the upstream is down

	d = startDaemon(t, "after", db, "-config", config)
	c = d.client(true)
	tk := waitTask(t, c, id, 60*time.Second, "terminal", terminal)
	if tk.Status != "failed" || tk.Error == nil || !strings.Contains(tk.Error.Message, "unknown") {
		t.Errorf("the task left running, after a start with its upstream down: %+v %+v; want failed, its outcome unknown", tk, tk.Error)
	} else {
		t.Logf("the task left running: %s", tk.Error.Message)
	}
	id = startTask(t, c, "long_computation", map[string]any{"n": 100, "steps": 1})
	if tk := waitTask(t, c, id, 60*time.Second, "terminal", terminal); tk.Status != "completed" {
		t.Errorf("a demo task after that start: %+v", tk)
	}
}
