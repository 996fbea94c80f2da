package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/disktest"
)

// TestDiskFull: mcptaskd keeps its SQLite file on a small tmpfs that the
// test fills up while a task runs. The outcome of the finished work cannot
// be written: /healthz answers 503 and says why, and the task stays
// working (its outcome kept, not lost). Once space is back, the outcome is
// written: the task completes with its result, and /healthz is ok again.
// (One failed write left the task working for ever, with /healthz ok.)
func TestDiskFull(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "small-disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	unmount, err := disktest.Mount(dir, "8m")
	if err != nil {
		t.Skipf("SKIPPED: the full-disk test needs to mount a small tmpfs (root), and cannot here: %v", err)
	}
	t.Cleanup(unmount)

	d := startDaemon(t, "diskfull", filepath.Join(dir, "tasks.db"))
	c := d.client(true)
	id := startTask(t, c, "long_computation", map[string]any{"n": 1000, "steps": 40, "step_delay_ms": 100})

	// Fill the disk to the last byte.
	filler := filepath.Join(dir, "filler")
	if err := disktest.Fill(filler); err != nil {
		t.Fatal(err)
	}

	health := func() (int, string) {
		resp, err := http.Get(strings.TrimSuffix(d.URL, "/mcp") + "/healthz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitUntil(t, 60*time.Second, "/healthz to report the failing outcome write", func() (bool, error) {
		code, body := health()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "task engine"), nil
	})
	if code, body := health(); !strings.Contains(body, "full") {
		t.Errorf("/healthz while the disk is full: %d %s; want it to say the disk is full", code, body)
	}
	if tk, err := c.Get(t.Context(), id); err != nil || tk.Status != "working" {
		t.Fatalf("the task while its outcome cannot be written: %+v, %v; want working", tk, err)
	}

	if err := os.Remove(filler); err != nil { // space is back
		t.Fatal(err)
	}
	tk := waitTask(t, c, id, 60*time.Second, "the outcome written", terminal)
	if tk.Status != "completed" || !strings.Contains(resultOf(t, tk).text(), "168 primes up to 1000") {
		t.Fatalf("after space came back: %s %s; want completed with the result", tk.Status, tk.Result)
	}
	waitUntil(t, 30*time.Second, "/healthz ok again", func() (bool, error) {
		code, _ := health()
		return code == http.StatusOK, nil
	})
}
