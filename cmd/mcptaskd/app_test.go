package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// TestAppInProcess assembles the server in-process and serves it with
// httptest: the tools answer, and /healthz reports the shutdown.
func TestAppInProcess(t *testing.T) {
	cfg, err := parseConfig([]string{"-db", filepath.Join(t.TempDir(), "tasks.db")}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	app, err := NewApp(cfg, logger, logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(app.Handler())
	defer hs.Close()

	health := func() (int, string) {
		resp, err := http.Get(hs.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h struct{ Status string }
		json.NewDecoder(resp.Body).Decode(&h)
		return resp.StatusCode, h.Status
	}
	if code, status := health(); code != 200 || status != "ok" {
		t.Fatalf("healthz: %d %q", code, status)
	}

	c := &wiretest.Client{URL: hs.URL + "/mcp", Tasks: true}
	ctx := context.Background()
	tk, err := c.CallTool(ctx, "long_computation", map[string]any{"n": 50, "steps": 1, "step_delay_ms": 0})
	if err != nil || tk.TaskID == "" {
		t.Fatalf("%+v %v", tk, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tk, err = c.WaitFor(wctx, tk.TaskID, wiretest.Terminal)
	if err != nil || tk.Status != "completed" || !strings.Contains(string(tk.Result), "There are 15 primes up to 50") {
		t.Fatalf("%+v %v", tk, err)
	}

	// A second app on the same database is refused while this one runs.
	if _, err := NewApp(cfg, logger, logger); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second app on the same database: %v", err)
	}

	if err := app.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if code, status := health(); code != http.StatusServiceUnavailable || status != "stopping" {
		t.Fatalf("healthz after Close: %d %q", code, status)
	}
	// Closing releases the database.
	app2, err := NewApp(cfg, logger, logger)
	if err != nil {
		t.Fatal(err)
	}
	app2.Close(ctx)
}
