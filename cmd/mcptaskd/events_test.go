package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/wire/events"
)

// TestWebhooksDeadLetters: mcptaskd with -webhooks (and its configuration
// file's events section publishing the commands' stdout) delivers to a
// callback that verified itself and then answers 413 (final) to everything: the
// deliveries are given up (dead letters) on the dashboard's Webhooks page
// and in /metrics, and no secret shows anywhere.
func TestWebhooksDeadLetters(t *testing.T) {
	t.Parallel()
	const adminTok, aliceTok = "admin-token-0123456789abcdef", "alice-token-0123456789abcdef"
	const secret = "whsec_ZGVhZC1sZXR0ZXJzLXNlY3JldC0wMTIzNDU2Nzg5"
	tokens := writeTokens(t,
		map[string]any{"token": adminTok, "principal": "root", "tenant": "ops", "scopes": []string{"mcptask:admin"}},
		map[string]any{"token": aliceTok, "principal": "alice", "tenant": "acme", "scopes": []string{"tasks"}})
	dir := t.TempDir()
	config := filepath.Join(dir, "mcptaskd.yaml")
	if err := os.WriteFile(config, []byte(`events:
  publishLog: [stdout]
commands:
  hello:
    argv: ["/bin/echo", "hello from stdout"]
    task: required
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var events410 atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ctl events.ControlEnvelope
		if json.Unmarshal(body, &ctl) == nil && ctl.Type == "verification" {
			_ = json.NewEncoder(w).Encode(map[string]string{"challenge": ctl.Challenge})
			return
		}
		events410.Add(1)
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	}))
	defer hook.Close()
	app, base := serveAppOf(t, nil, "-db", filepath.Join(dir, "tasks.db"), "-tokens", tokens, "-config", config,
		"-webhooks", "-webhooks-allow-private", "-metrics-addr", "")
	t.Cleanup(app.dashboard.Close)
	alice := &wiretest.Client{URL: base + "/mcp", Tasks: true, Events: true, Header: http.Header{"Authorization": {"Bearer " + aliceTok}}}
	ctx := t.Context()
	if err := alice.Result(ctx, events.MethodSubscribe, map[string]any{"name": events.TypeOutput,
		"delivery": map[string]any{"url": hook.URL + "/hooks/alice?token=receiver-side-secret", "secret": secret}}, nil); err != nil {
		t.Fatal(err)
	}
	id := startTask(t, alice, "hello", nil)
	// The published line is an output event.
	zero := "e1.0.0"
	waitCond(t, "the published line", func() bool {
		var p events.PollResult
		if err := alice.Result(ctx, events.MethodPoll, map[string]any{"name": events.TypeOutput, "arguments": map[string]any{"taskId": id}, "cursor": zero}, &p); err != nil {
			t.Fatal(err)
		}
		return len(p.Events) == 1 && strings.Contains(string(p.Events[0].Data), "hello from stdout")
	})
	// 413 is final: the delivery is a dead letter at once.
	evs := app.tasks.Engine().Events()
	waitCond(t, "the dead letter", func() bool {
		_, dead, err := evs.EventCounts(ctx)
		return err == nil && dead == 1
	})

	d := newDashClient(t, base)
	if resp, _ := d.do(http.MethodPost, "/dashboard/login", url.Values{"token": {adminTok}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %s", resp.Status)
	}
	_, page := d.do(http.MethodGet, "/dashboard/webhooks", nil)
	for _, want := range []string{`id="dead" class="bad">1<`, "output", id, "http_4xx", "127.0.0.1"} {
		if !strings.Contains(page, want) {
			t.Errorf("the Webhooks page lacks %q", want)
		}
	}
	for _, secretPart := range []string{secret, "receiver-side-secret", "/hooks/alice"} {
		if strings.Contains(page, secretPart) {
			t.Errorf("the Webhooks page shows %q", secretPart)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+adminTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`mcptask_webhook_deliveries{state="dead"} 1`, `mcptask_webhook_deliveries_total{error="http_4xx",result="dead"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// waitCond waits for cond (checked every few milliseconds) for 20 s.
func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
