package httpjob_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/source/httpjob"
	"github.com/mcptask/mcptask/task"
)

// TestHealth: Tools.Health says a tool's job API is down while its
// requests fail (HTTP 5xx), never with the tool's secrets, and up again
// once it answers.
func TestHealth(t *testing.T) {
	j := newJobs(t)
	var failing atomic.Bool
	target, _ := url.Parse(j.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() && r.Method == http.MethodGet {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(api.Close)

	var tools *httpjob.Tools
	s := servertest.Start(t, servertest.Options{
		DB:     filepath.Join(t.TempDir(), "tasks.db"),
		Logger: slog.New(slog.DiscardHandler),
		Engine: engine.Options{Policy: task.Policy{PollInterval: 20 * time.Millisecond}},
		Register: func(ts *mcptask.Server) (func(), error) {
			tools = httpjob.New([]httpjob.Tool{buildTool(api.URL, false)}, &http.Client{}, nil)
			return nil, tools.Register(t.Context(), ts)
		},
	})
	health := func() error {
		h := tools.Health()
		if _, ok := h["build"]; !ok || len(h) != 1 {
			t.Fatalf("health %v, want the tool build only", h)
		}
		return h["build"]
	}
	waitHealth := func(what string, cond func(error) bool) error {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := health()
			if cond(err) {
				return err
			}
			if time.Now().After(deadline) {
				t.Fatalf("the job API was never %s (last %v)", what, err)
			}
			time.Sleep(5 * time.Millisecond) // polling the state, not timing the test
		}
	}
	if err := health(); err != nil {
		t.Fatalf("before any request: %v", err)
	}

	c := &wiretest.Client{URL: s.URL + "/mcp", Tasks: true}
	var h wiretest.Task
	if err := c.Result(context.Background(), "tools/call", map[string]any{"name": "build", "arguments": map[string]any{"ref": "main", "count": 1}, "_meta": c.Meta()}, &h); err != nil || h.TaskID == "" {
		t.Fatalf("build: %+v, %v", h, err)
	}
	job := j.jobOf(t, h.TaskID)
	failing.Store(true)
	err := waitHealth("down", func(err error) bool { return err != nil })
	if !strings.Contains(err.Error(), "HTTP 503") || strings.Contains(err.Error(), token) {
		t.Errorf("down: %v", err)
	}
	failing.Store(false)
	j.hook(t, "/test/jobs/"+job+"/finish", map[string]any{"artifact": "main.tgz"})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if tk, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal); err != nil || tk.Status != "completed" {
		t.Fatalf("task: %+v, %v", tk, err)
	}
	waitHealth("up again", func(err error) bool { return err == nil })
}
