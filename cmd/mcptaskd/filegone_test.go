package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDatabaseFileDeleted: the SQLite file is deleted under a running
// mcptaskd. /healthz fails and says why, and a new task is refused, not
// acknowledged and lost at the next start.
func TestDatabaseFileDeleted(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	d := startDaemon(t, "filegone", db)
	c := d.client(true)
	startTask(t, c, "long_computation", map[string]any{"n": 100, "steps": 1})
	if err := os.Remove(db); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(strings.TrimSuffix(d.URL, "/mcp") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "deleted or replaced") {
		t.Errorf("/healthz after the file was deleted: %d %s; want 503 saying so", resp.StatusCode, body)
	}
	tk, err := c.CallTool(context.Background(), "long_computation", map[string]any{"n": 100, "steps": 1})
	if err == nil && tk.TaskID != "" {
		t.Fatalf("a task was acknowledged (%s) on a deleted database file", tk.TaskID)
	}
}

// TestDatabaseFileCorrupted: the SQLite file is overwritten in place
// under a running mcptaskd (the same file, so not "deleted"). /healthz
// fails and says the file is corrupt, a new task is refused, and a
// restart on the damaged file fails at once, naming it.
func TestDatabaseFileCorrupted(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	d := startDaemon(t, "corrupt", db)
	c := d.client(true)
	startTask(t, c, "long_computation", map[string]any{"n": 100, "steps": 1})
	if err := os.WriteFile(db, []byte("garbage written over the database\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(strings.TrimSuffix(d.URL, "/mcp") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "corrupt") {
		t.Errorf("/healthz after the file was overwritten: %d %s; want 503 saying it is corrupt", resp.StatusCode, body)
	}
	tk, err := c.CallTool(context.Background(), "long_computation", map[string]any{"n": 100, "steps": 1})
	if err == nil && tk.TaskID != "" {
		t.Fatalf("a task was acknowledged (%s) on a corrupt database file", tk.TaskID)
	}
	d.kill9()
	out, err := exec.Command(daemonBin, "-addr", "127.0.0.1:0", "-db", db).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "corrupt") || !strings.Contains(string(out), db) {
		t.Errorf("mcptaskd on the corrupt file: %v\n%s\nwant a failure naming the file as corrupt", err, out)
	}
}
