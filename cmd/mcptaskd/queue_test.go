package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// TestGatewayQueue: an upstream with maxConcurrent: 1 in the
// configuration runs one task at a time; a task beyond the cap is
// acknowledged at once and shows "queued: …" until the running one ends,
// then runs to completion. The upstream's environment takes a value from
// a file (${file:PATH}): the upstream, which writes its process ID to the
// file that value names, shows it arrived.
func TestGatewayQueue(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "upstream.pids")
	secret := filepath.Join(dir, "pidfile-name")
	if err := os.WriteFile(secret, []byte(pidFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "mcptaskd.yaml")
	body := fmt.Sprintf(`demo: false
mcpServers:
  builder:
    command: %q
    env:
      %s: "${file:%s}"
    task: required
    maxConcurrent: 1
    maxTtl: 10m
`, exe, upstreamEnv, secret)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "queue", filepath.Join(dir, "tasks.db"), "-config", config)
	c := d.client(true)
	first := startTask(t, c, "build", map[string]any{"steps": 200}) // about 10 s, cancelled below
	waitTask(t, c, first, 30*time.Second, "the first build's progress", func(tk *wiretest.Task) bool {
		return strings.Contains(tk.StatusMessage, "build step")
	})
	second := startTask(t, c, "build", map[string]any{"steps": 2})
	third := startTask(t, c, "build", map[string]any{"steps": 2})
	for id, want := range map[string]string{second: "queued: next to start", third: "queued: 1 ahead"} {
		tk, err := c.Get(context.Background(), id)
		if err != nil || tk.Status != "working" || tk.StatusMessage != want {
			t.Errorf("task beyond the cap: %+v, %v; want working, %q", tk, err, want)
		}
		if tk.TTLMs == nil || *tk.TTLMs != (10*time.Minute).Milliseconds() {
			t.Errorf("task of a tool with maxTtl 10m has ttlMs %v", tk.TTLMs)
		}
	}
	// Ending the running task frees the slot: the others run, in order.
	if _, err := c.Call(context.Background(), "tasks/cancel", map[string]any{"taskId": first}, nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{second, third} {
		tk := waitTask(t, c, id, 60*time.Second, "terminal", wiretest.Terminal)
		if tk.Status != "completed" || resultOf(t, tk).text() != "built in 2 steps" {
			t.Errorf("queued build: %+v", tk)
		}
	}
	if data, err := os.ReadFile(pidFile); err != nil || len(strings.Fields(string(data))) == 0 {
		t.Errorf("the upstream got no PID file path from ${file:…}: %v", err)
	}
	// The value read from the file is a secret as far as mcptaskd knows:
	// never logged.
	if strings.Contains(d.Logs(), pidFile) {
		t.Errorf("mcptaskd logged the content of a ${file:…} value:\n%s", d.Logs())
	}
}

// TestConfigQueueErrors: a negative cap, and a ${file:…} that cannot be
// read, are configuration errors naming line and field (and the file,
// never a content).
func TestConfigQueueErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("mcpServers:\n  one:\n    command: a\n    maxConcurrent: -1\n    env: {TOKEN: \"${file:"+dir+"/missing}\"}\n    toolOptions:\n      t: {maxConcurrent: -2, maxTtl: soon}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(daemonBin, "-check-config", bad).CombinedOutput()
	if !strings.Contains(string(out), bad+":7:") || !strings.Contains(string(out), `"soon" is not a duration`) {
		t.Errorf("-check-config of a bad maxTtl:\n%s", out)
	}
	if err := os.WriteFile(bad, []byte("mcpServers:\n  one:\n    command: a\n    maxConcurrent: -1\n    env: {TOKEN: \"${file:"+dir+"/missing}\"}\n    toolOptions:\n      t: {maxConcurrent: -2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ = exec.Command(daemonBin, "-check-config", bad).CombinedOutput()
	for _, want := range []string{
		bad + ":2: mcpServers.one.maxConcurrent: must not be negative",
		bad + ":7: mcpServers.one.toolOptions.t.maxConcurrent: must not be negative",
		bad + ":2: mcpServers.one: TOKEN names the file " + dir + "/missing: no such file or directory",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("-check-config output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "secret") {
		t.Errorf("-check-config printed a URL's query:\n%s", out)
	}
}

// TestCheckConfigSummary: -check-config sums up the caps, the drain
// switch and the job tools a valid file declares.
func TestCheckConfigSummary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcptaskd.yaml")
	body := "drain: {tools: [echo], fallback: sync}\njobTools: {enabled: true}\nmcpServers:\n  ci:\n    url: http://127.0.0.1:1/mcp\n    maxConcurrent: 4\n    toolOptions:\n      deploy: {maxConcurrent: 1}\n" +
		"  keyed:\n    url: \"http://bob:secret@127.0.0.1:2/mcp?api_key=secret\"\n" +
		"httpJobs:\n  build:\n    start: {url: \"http://127.0.0.1:1/jobs?token=secret\", jobId: /id}\n    status: {url: \"http://127.0.0.1:1/jobs/{jobId}\", state: /state, working: [running], completed: [done]}\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(daemonBin, "-check-config", path).CombinedOutput()
	if err != nil {
		t.Fatalf("-check-config: %v\n%s", err, out)
	}
	for _, want := range []string{
		"ci (http://127.0.0.1:1/mcp; at most 4 tasks at once, deploy: at most 1 at once)",
		"drain: echo (fallback sync)",
		`job tools: on (prefix "job_")`,
		"build (http job: POST http://127.0.0.1:1/jobs)",
		"keyed (http://127.0.0.1:2/mcp)",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("-check-config output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "secret") {
		t.Errorf("-check-config printed a URL's query:\n%s", out)
	}
}
