package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// probedStore is a real store whose Ping can be made to fail, and which
// counts its Gets.
type probedStore struct {
	*sqlite.Store
	pingErr error
	gets    atomic.Int32
}

// Ping fails with pingErr if set, else pings the store.
func (s *probedStore) Ping(ctx context.Context) error {
	if s.pingErr != nil {
		return s.pingErr
	}
	return s.Store.Ping(ctx)
}

// Get counts the call and reads from the store.
func (s *probedStore) Get(ctx context.Context, id task.ID) (*task.Task, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, id)
}

// health calls the /healthz handler of an app on st.
func health(t *testing.T, st store.Store) (code int, status, detail string) {
	t.Helper()
	a := &App{store: st, log: slog.New(slog.DiscardHandler)}
	rec := httptest.NewRecorder()
	a.healthz(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	var h struct{ Status, Detail string }
	if err := json.NewDecoder(rec.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return rec.Code, h.Status, h.Detail
}

// TestHealthzPing: /healthz asks the store with Ping (and reads no task):
// unhealthy when Ping fails, or once the store is closed.
func TestHealthzPing(t *testing.T) {
	lite, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	st := &probedStore{Store: lite}

	if code, status, _ := health(t, st); code != http.StatusOK || status != "ok" {
		t.Errorf("healthz of a healthy Pinger: %d %q", code, status)
	}
	if n := st.gets.Load(); n != 0 {
		t.Errorf("healthz of a Pinger read %d tasks, want none", n)
	}
	st.pingErr = errors.New("disk on fire")
	if code, status, detail := health(t, st); code != http.StatusServiceUnavailable || status != "unhealthy" || !strings.Contains(detail, "disk on fire") {
		t.Errorf("healthz of a Pinger whose Ping fails: %d %q %q", code, status, detail)
	}

	lite.Close()
	st.pingErr = nil
	if code, status, detail := health(t, st); code != http.StatusServiceUnavailable || !strings.Contains(detail, "closed") {
		t.Errorf("healthz of a closed Pinger: %d %q %q", code, status, detail)
	}
}

// TestHealthzUpstreamDetails: without authentication, on a loopback
// listener, /healthz says why an upstream is down to a loopback client
// only (the admin endpoint's rule); a request whose Host is not loopback
// (a page reached through DNS rebinding) reads "down" and no more.
func TestHealthzUpstreamDetails(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "mcptaskd.yaml")
	// Port 9 (discard) on loopback: nothing answers.
	if err := os.WriteFile(config, []byte("demo: false\nmcpServers:\n  gone:\n    url: \"http://user:pw-secret@127.0.0.1:9/mcp?token=q-secret\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := serveApp(t, nil, "-addr", "127.0.0.1:8080", "-db", filepath.Join(dir, "tasks.db"), "-config", config)
	get := func(host string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"/healthz", nil)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h struct {
			Status    string
			Upstreams map[string]string
		}
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || h.Status != "degraded" {
			t.Errorf("/healthz (Host %q) with an upstream down: %d %q; want 200 degraded", host, resp.StatusCode, h.Status)
		}
		for _, s := range []string{"pw-secret", "q-secret"} {
			if strings.Contains(h.Upstreams["gone"], s) {
				t.Errorf("/healthz shows a secret of the upstream's URL: %q", h.Upstreams["gone"])
			}
		}
		return h.Upstreams["gone"]
	}
	if got := get("evil.example:8080"); got != "down" {
		t.Errorf("/healthz with a foreign Host: %q; want down, no details", got)
	}
	if got := get(""); !strings.HasPrefix(got, "down: ") {
		t.Errorf("/healthz of a loopback client: %q; want why it is down", got)
	}
}
