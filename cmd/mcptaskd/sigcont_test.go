package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tasksGetCount reads how many tasks/get requests d has answered (any
// outcome) from its /metrics.
func tasksGetCount(t *testing.T, d *daemon) int {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(d.Base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n := 0
	for _, m := range regexp.MustCompile(`(?m)^mcptask_requests_total\{[^}]*method="tasks/get"[^}]*\} (\d+)$`).FindAllSubmatch(b, -1) {
		v, _ := strconv.Atoi(string(m[1]))
		n += v
	}
	return n
}

// TestNoLogBurstAfterSIGCONT (issue 25, L11): mcptaskd is stopped
// (SIGSTOP) while 40 clients each send a tasks/get and give up (close
// their connection), and continued (SIGCONT): it then handles those 40
// abandoned requests at once, and must not log one identical line each.
// (Each logged "task operation failed ... context canceled" at ERROR: 19
// lines in 30 ms.)
func TestNoLogBurstAfterSIGCONT(t *testing.T) {
	// No view cache: each tasks/get reads the store, through its pool of
	// read connections.
	d := startDaemon(t, "stopped", filepath.Join(t.TempDir(), "tasks.db"), "-sqlite-view-cache", "0")
	c := d.client(true)
	id := startTask(t, c, "long_computation", map[string]any{"n": 100000, "steps": 1000, "step_delay_ms": 50})
	// Tasks that write a step every few milliseconds: after SIGCONT their
	// writes come at once, and the requests' reads contend with them.
	for range 10 {
		startTask(t, c, "long_computation", map[string]any{"n": 100000, "steps": 100000, "step_delay_ms": 2})
	}
	u, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": map[string]any{"taskId": id, "_meta": c.Meta()}})
	served := tasksGetCount(t, d)
	before := len(d.Logs())
	if err := d.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	const abandoned = 100
	for range abandoned {
		// The kernel accepts the connection and keeps the request for the
		// stopped process; the client gives up and closes it.
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, d.URL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tasks/get")
		req.Header.Set("Mcp-Name", id)
		if err := req.Write(conn); err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}
	if err := d.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// All 40 handled (/metrics counts a request once it is answered, after
	// its logging).
	waitUntil(t, 30*time.Second, "the abandoned requests to be handled", func() (bool, error) {
		return tasksGetCount(t, d) >= served+abandoned, nil
	})
	counts := map[string]int{}
	for _, line := range strings.Split(d.Logs()[before:], "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		key, _ := json.Marshal([]any{rec["level"], rec["msg"], rec["task"], rec["err"]})
		counts[string(key)]++
	}
	for line, n := range counts {
		if n > 3 {
			t.Errorf("logged %d times after SIGCONT: %s", n, line)
		}
	}
	// The task was never affected.
	if tk, err := c.Get(t.Context(), id); err != nil || tk.Status != "working" {
		t.Fatalf("the task after the burst: %+v %v", tk, err)
	}
}
