package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/clitest"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/source/command"
)

// daemonBin is the mcptaskd binary built once for the whole test run.
var daemonBin string

func TestMain(m *testing.M) {
	command.Supervise() // the commands of in-process servers run under this binary
	if os.Getenv(upstreamEnv) != "" {
		os.Exit(runUpstream()) // an upstream MCP server of a gateway test
	}
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	bins, cleanup, err := clitest.Build(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	daemonBin = bins[0]
	return m.Run()
}

// daemon is one running mcptaskd process; Logs holds its stderr (JSON
// log records).
type daemon struct {
	*proctest.Process
	t    testing.TB
	name string
	// URL is the MCP endpoint, Base the server's root URL.
	URL, Base string
}

// startDaemon starts mcptaskd on a free loopback port with the SQLite file
// db and extra flags, and waits until it serves /healthz.
func startDaemon(t testing.TB, name, db string, extra ...string) *daemon {
	t.Helper()
	return startDaemonEnv(t, name, db, nil, extra...)
}

// startDaemonEnv is startDaemon with env added to the process's
// environment.
func startDaemonEnv(t testing.TB, name, db string, env []string, extra ...string) *daemon {
	t.Helper()
	args := append([]string{"-addr", "127.0.0.1:0", "-db", db, "-log-format", "json", "-log-level", "info"}, extra...)
	return spawnDaemonEnv(t, name, env, args...)()
}

// spawnDaemon starts mcptaskd with args and returns at once; the returned
// function waits until the process serves /healthz. Several processes can
// so start at the same moment.
func spawnDaemon(t testing.TB, name string, args ...string) (await func() *daemon) {
	t.Helper()
	return spawnDaemonEnv(t, name, nil, args...)
}

// spawnDaemonEnv is spawnDaemon with env added to the process's
// environment.
func spawnDaemonEnv(t testing.TB, name string, env []string, args ...string) (await func() *daemon) {
	t.Helper()
	// These tests drive one anonymous requester hard: the per-requester
	// limits are off unless a test's own flags (which come later, and
	// win) set them.
	args = append([]string{"-max-active-tasks", "0", "-create-rate", "0", "-request-rate", "0", "-max-poll-interval", "0"}, args...)
	p, err := proctest.Start(proctest.Config{Path: daemonBin, Args: args, Env: append(append(os.Environ(), "GORACE=halt_on_error=1"), env...)})
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{Process: p, t: t, name: name}
	t.Cleanup(func() {
		d.Kill()
		if t.Failed() {
			t.Logf("--- log of %s ---\n%s", d.name, d.Logs())
		}
	})
	return func() *daemon {
		t.Helper()
		var err error
		d.URL, err = d.WaitListening(context.Background(), 60*time.Second)
		switch {
		case errors.Is(err, proctest.ErrExited):
			t.Fatalf("%s exited before listening: %v\n%s", name, d.Err(), d.Logs())
		case err != nil:
			t.Fatalf("%s did not start listening within 60s\n%s", name, d.Logs())
		}
		d.Base = strings.TrimSuffix(d.URL, "/mcp")
		if err := proctest.WaitHTTPOK(context.Background(), d.Base+"/healthz", 30*time.Second); err != nil {
			t.Fatalf("timed out after %v waiting for %s healthz OK", 30*time.Second, name)
		}
		return d
	}
}

func (d *daemon) running() bool { return d.Running() }

// signal sends sig and waits (up to timeout) for the process to exit.
func (d *daemon) signal(sig os.Signal, timeout time.Duration) error {
	d.t.Helper()
	if err := d.Signal(sig); err != nil {
		d.t.Fatalf("signalling %s: %v", d.name, err)
	}
	select {
	case <-d.Exited():
		return d.Err()
	case <-time.After(timeout):
		d.t.Fatalf("%s did not exit within %v of %v\n%s", d.name, timeout, sig, d.Logs())
		return nil
	}
}

// kill9 kills the process with SIGKILL, as a crash would.
func (d *daemon) kill9() {
	d.t.Helper()
	err := d.signal(syscall.SIGKILL, 10*time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		d.t.Fatalf("%s after SIGKILL: %v", d.name, err)
	}
}

// client returns a wire client of the daemon; tasks says whether it
// declares the tasks extension.
func (d *daemon) client(tasks bool) *wiretest.Client {
	return &wiretest.Client{URL: d.URL, Tasks: tasks, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// waitUntil polls cond until it holds, fails, or timeout passes.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronization
	}
}

// waitTask polls a task until cond holds, within timeout.
func waitTask(t *testing.T, c *wiretest.Client, id string, timeout time.Duration, what string, cond func(*wiretest.Task) bool) *wiretest.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tk, err := c.WaitFor(ctx, id, cond)
	if err != nil {
		t.Fatalf("task %s: waiting for %s: %v (last: %+v)", id, what, err, tk)
	}
	return tk
}

func terminal(tk *wiretest.Task) bool { return wiretest.Terminal(tk) }

// startTask calls a tool as a task and returns the task's ID.
func startTask(t *testing.T, c *wiretest.Client, tool string, args map[string]any) string {
	t.Helper()
	tk, err := c.CallTool(context.Background(), tool, args)
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	if tk.ResultType != "task" || tk.TaskID == "" {
		t.Fatalf("calling %s: want a task handle, got %+v", tool, tk)
	}
	return tk.TaskID
}

// toolResult is the CallToolResult stored as a task's result.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

// resultOf decodes a completed task's result.
func resultOf(t *testing.T, tk *wiretest.Task) toolResult {
	t.Helper()
	if tk.Status != "completed" {
		t.Fatalf("task %s is %s, want completed (error %+v, message %q)", tk.TaskID, tk.Status, tk.Error, tk.StatusMessage)
	}
	var r toolResult
	if err := json.Unmarshal(tk.Result, &r); err != nil {
		t.Fatalf("task %s: decoding result %s: %v", tk.TaskID, tk.Result, err)
	}
	return r
}

// text returns the text of a result's first content block.
func (r toolResult) text() string {
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// primesUpTo counts the primes at most n, independently of the demo code.
func primesUpTo(n int) int {
	count := 0
	for i := 2; i <= n; i++ {
		prime := true
		for d := 2; d*d <= i; d++ {
			if i%d == 0 {
				prime = false
				break
			}
		}
		if prime {
			count++
		}
	}
	return count
}

// serveApp runs mcptaskd in-process with the flags args (the environment
// is ignored) behind an httptest server on loopback, and returns the
// server's base URL (mcptaskd serves /mcp and /healthz there). Its JSON
// log records go to logs (nil discards them), with the go-sdk's at
// warning level, as the daemon logs. When the test ends the HTTP server
// closes, then the app stops at once: work still running is cut short
// and resolved by its recovery policy.
func serveApp(t testing.TB, logs io.Writer, args ...string) string {
	t.Helper()
	_, url := serveAppOf(t, logs, args...)
	return url
}

// serveAppOf is serveApp returning the App as well.
func serveAppOf(t testing.TB, logs io.Writer, args ...string) (*App, string) {
	t.Helper()
	cfg, err := parseConfig(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if logs == nil {
		logs = io.Discard
	}
	logger, sdkLogger := newLogger(logs, "json", slog.LevelInfo)
	app, err := NewApp(cfg, logger, sdkLogger)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		app.Close(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() {
		now, stop := context.WithCancel(context.Background())
		stop()
		app.Close(now)
	})
	hs := httptest.NewServer(app.Handler())
	t.Cleanup(hs.Close) // runs before app.Close
	return app, hs.URL
}
