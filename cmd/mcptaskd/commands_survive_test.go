//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// surviveScript writes a script that records its PIDs (as treeScript's),
// counts its runs, says "step 1", waits for the file go, says "step 2",
// asks the user through the input line protocol, echoes the answer and
// exits 7.
func surviveScript(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "survive.sh")
	body := `#!/bin/sh
echo run >> "$1.runs"
sleep 1000 &
echo "$$ $PPID $!" > "$1.tmp" && mv "$1.tmp" "$1"
echo "step 1"
while [ ! -e "$1.go" ]; do sleep 0.05; done
echo "step 2"
echo '::mcptask-input:: {"message": "continue?", "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}}}'
read answer
echo "answered: $answer"
kill $!
exit 7
`
	if err := os.WriteFile(path, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

const surviveTool = `  survivor:
    description: outlives mcptaskd
    inputSchema: {type: object, properties: {pidfile: {type: string}}, required: [pidfile]}
    argv: [%q, "{pidfile}"]
    progress: '^step (\d+)'
    survivesRestart: true
    restartGrace: %s
    killGrace: 2s
`

// TestCommandSurvivesKill9: a command of survivesRestart outlives a
// kill -9 of mcptaskd (2026-07-28), and a graceful stop (2025-11-25); the restarted mcptaskd re-attaches to it: its
// progress, its log (no line lost, none twice), its input request
// answered by the client, and its real exit code; it ran once, and
// nothing of it is left after. On both wires.
func TestCommandSurvivesKill9(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	config := exampleCommandsConfig(t, fmt.Sprintf(surviveTool, surviveScript(t, dir), "30s"))
	db := filepath.Join(t.TempDir(), "tasks.db")
	d := startDaemon(t, "commands", db, "-config", config)
	for i, wire := range []string{client.Wire20260728, client.Wire20251125} {
		pidFile := filepath.Join(dir, fmt.Sprintf("pids-%d", i))
		id := startTask(t, d.client(true), "survivor", map[string]any{"pidfile": pidFile})
		script, supervisor, grandchild := readPIDs(t, pidFile)
		waitTask(t, d.client(true), id, 30*time.Second, "step 1", func(tk *wiretest.Task) bool { return tk.StatusMessage == "1" })
		// What the task's log holds is recorded with the task (at its
		// first line): a kill -9 after that repeats nothing.
		waitUntil(t, 30*time.Second, "the log's offset recorded", func() (bool, error) {
			return strings.Contains(externalRef(t, db, id), `"stdout":`), nil
		})

		if i == 0 {
			d.kill9()
		} else if err := d.signal(syscall.SIGTERM, 30*time.Second); err != nil { // a graceful restart
			t.Fatalf("SIGTERM: %v", err)
		}
		for _, pid := range []int{script, supervisor, grandchild} {
			if !alive(pid) {
				t.Fatalf("%s: process %d died with mcptaskd", wire, pid)
			}
		}
		d = startDaemon(t, fmt.Sprintf("commands#%d", i+2), db, "-config", config)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := client.Dial(ctx, d.URL, &client.Options{ProtocolVersion: wire,
			Elicit: func(context.Context, string, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes"}}, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := os.WriteFile(pidFile+".go", nil, 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := c.Wait(ctx, id, &client.WaitOptions{Deadline: time.Minute})
		if err != nil {
			t.Fatalf("%s: %v", wire, err)
		}
		out := ""
		if len(res.Content) > 0 {
			out = res.Content[0].(*mcp.TextContent).Text
		}
		if !res.IsError || !strings.Contains(out, "exited with code 7") || !strings.Contains(out, "answered: {\"action\":\"accept\",\"content\":{\"answer\":\"yes\"}}") ||
			!strings.Contains(out, "step 1") {
			t.Fatalf("%s: result %q (isError %v); want exit code 7 after the answer, the whole output", wire, out, res.IsError)
		}
		page, err := c.ReadLog(ctx, id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var log strings.Builder
		for _, l := range page.Lines {
			log.WriteString(l.Text + "\n")
		}
		for _, line := range []string{"step 1\n", "step 2\n"} {
			if n := strings.Count(log.String(), line); n != 1 {
				t.Errorf("%s: the task's log has %q %d times:\n%s", wire, line, n, log.String())
			}
		}
		if runs, _ := os.ReadFile(pidFile + ".runs"); strings.Count(string(runs), "run") != 1 {
			t.Errorf("%s: the command ran %d times", wire, strings.Count(string(runs), "run"))
		}
		waitGone(t, "the command's processes", script, supervisor, grandchild)
	}
}

// TestCommandSurvivorAbandoned: a command of survivesRestart whose
// mcptaskd does not come back within its restartGrace is killed, group
// and supervisor; the mcptaskd started later fails its task saying why.
func TestCommandSurvivorAbandoned(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	config := exampleCommandsConfig(t, fmt.Sprintf(surviveTool, surviveScript(t, dir), "1s"))
	db := filepath.Join(t.TempDir(), "tasks.db")
	d := startDaemon(t, "commands", db, "-config", config)
	pidFile := filepath.Join(dir, "pids")
	id := startTask(t, d.client(true), "survivor", map[string]any{"pidfile": pidFile})
	script, supervisor, grandchild := readPIDs(t, pidFile)
	d.kill9()
	waitGone(t, "the abandoned command's processes", script, supervisor, grandchild)

	d2 := startDaemon(t, "commands#2", db, "-config", config)
	tk := waitTask(t, d2.client(true), id, 30*time.Second, "the end", terminal)
	if tk.Status != "failed" || tk.Error == nil || !strings.Contains(tk.Error.Message, "no program re-attached to the command within 1s") {
		t.Fatalf("the abandoned command's task: %s %+v", tk.Status, tk.Error)
	}
}

// externalRef reads a task's external reference from mcptaskd's SQLite
// file (another connection: the file is shared in WAL mode).
func externalRef(t *testing.T, db, id string) string {
	t.Helper()
	st, err := sqlite.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tk, err := st.Get(t.Context(), task.ID(id))
	if err != nil {
		t.Fatal(err)
	}
	return tk.ExternalRef
}
