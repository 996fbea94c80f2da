package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/wire/events"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

const (
	hookToken  = "faults-webhooks-token-3f8a1c"
	hookSecret = "whsec_ZmF1bHRzLXdlYmhvb2stc2VjcmV0LTAxMjM0NTY3"
)

// hookSink is a webhook endpoint on loopback that verifies every delivery
// with the Standard Webhooks library, echoes challenges, answers slowly
// (up to 40 ms) and fails one attempt in five with 503, so that
// deliveries are in flight and pending when a fault strikes; it counts
// each webhook-id it accepted.
type hookSink struct {
	t   *testing.T
	wh  *standardwebhooks.Webhook
	srv *httptest.Server

	mu       sync.Mutex
	accepted map[string]int
	bad      int
}

func newHookSink(t *testing.T) *hookSink {
	wh, err := standardwebhooks.NewWebhook(hookSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := &hookSink{t: t, wh: wh, accepted: map[string]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := wh.Verify(body, r.Header); err != nil {
			h.mu.Lock()
			h.bad++
			h.mu.Unlock()
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ctl events.ControlEnvelope
		if json.Unmarshal(body, &ctl) == nil && ctl.Type == "verification" {
			_ = json.NewEncoder(w).Encode(map[string]string{"challenge": ctl.Challenge})
			return
		}
		time.Sleep(time.Duration(randN(40)) * time.Millisecond) // a slow endpoint
		if randN(5) == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		h.mu.Lock()
		h.accepted[r.Header.Get("webhook-id")]++
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// hookArgs are the flags of a daemon delivering to the sink.
func hookArgs(t *testing.T) []string {
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(tokens, []byte(fmt.Sprintf(`[{"token": %q, "principal": "alice", "tenant": "acme"}]`, hookToken)), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"-tokens", tokens, "-webhooks", "-webhooks-allow-private", "-lease", "2s"}
}

// rpc sends one JSON-RPC request on the 2026-07-28 wire as alice.
func rpc(t *testing.T, url, method string, params map[string]any) json.RawMessage {
	t.Helper()
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/events": map[string]any{}}}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Authorization", "Bearer "+hookToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if i := bytes.Index(raw, []byte("data:")); i >= 0 {
		raw = bytes.TrimSpace(raw[i+5:])
	}
	var m struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || m.Error != nil {
		t.Fatalf("%s: %s", method, raw)
	}
	return m.Result
}

// produced returns the IDs of every status event the store holds for
// alice (events/poll from the start).
func produced(t *testing.T, url string) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	cursor := "e1.0.0"
	for {
		var p events.PollResult
		if err := json.Unmarshal(rpc(t, url, events.MethodPoll, map[string]any{"name": events.TypeStatus, "cursor": cursor, "maxEvents": 1000}), &p); err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Events {
			ids[e.EventID] = true
		}
		cursor = *p.Cursor
		if !p.HasMore {
			return ids
		}
	}
}

// webhookRounds runs rounds against fleet: in each, calls go to random
// instances, one instance (victim, or a random one when -1) is killed
// with SIGKILL at a random moment and started again; then every event
// the store holds must reach the sink (at least once), and the round
// counts them.
func webhookRounds(t *testing.T, fleet []*daemon, rounds int) {
	webhookRoundsWith(t, fleet, rounds, func(victim *daemon) string {
		victim.kill9()
		victim.start()
		return "kill -9 of " + victim.addr
	})
}

// webhookRoundsWith is webhookRounds with the fault given: fault strikes
// victim (or the store) and says what it did.
func webhookRoundsWith(t *testing.T, fleet []*daemon, rounds int, fault func(victim *daemon) string) {
	sink := newHookSink(t)
	rpc(t, fleet[0].URL, events.MethodSubscribe, map[string]any{"name": events.TypeStatus,
		"delivery": map[string]any{"url": sink.srv.URL + "/hook", "secret": hookSecret}, "ttlMs": 3600000})
	for r := range rounds {
		// The calls first (their tasks run for up to 600 ms), then the
		// kill, while their status changes and deliveries are under way.
		var ids []string
		for i := range 8 {
			d := fleet[i%len(fleet)]
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			c := dialWith(t, d.URL, client.Wire20260728, &client.Options{BearerToken: hookToken})
			call, err := c.CallTool(ctx, "long_computation", map[string]any{"n": 2000, "steps": 2, "step_delay_ms": randN(300)})
			cancel()
			if err != nil || call.Task == nil {
				t.Fatalf("call %d: %v", i, err)
			}
			ids = append(ids, call.Task.ID)
		}
		ms := randN(600)
		time.Sleep(time.Duration(ms) * time.Millisecond) // the random moment of the fault
		what := fault(fleet[randN(len(fleet))])
		t.Logf("round %d: %s %d ms after the calls started (seed %d); %d tasks", r, what, ms, seed, len(ids))
		// Every task ends (a killed computation is re-run), then every
		// event reaches the sink.
		c := dialWith(t, fleet[0].URL, client.Wire20260728, &client.Options{BearerToken: hookToken})
		for _, id := range ids {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			if _, err := c.Wait(ctx, id, nil); err != nil && !strings.Contains(err.Error(), "outcome") {
				t.Errorf("task %s: %v", id, err)
			}
			cancel()
		}
		want := produced(t, fleet[0].URL)
		var missing []string
		waitFor(t, "every event the store holds to be delivered", 120*time.Second, func() bool {
			sink.mu.Lock()
			defer sink.mu.Unlock()
			missing = missing[:0]
			for id := range want {
				if sink.accepted[id] == 0 {
					missing = append(missing, id)
				}
			}
			return len(missing) == 0
		})
		sink.mu.Lock()
		dup := 0
		for id, n := range sink.accepted {
			if want[id] && n > 1 {
				dup += n - 1
			}
		}
		bad := sink.bad
		sink.mu.Unlock()
		if bad > 0 {
			t.Fatalf("%d deliveries failed the signature check", bad)
		}
		t.Logf("round %d: %d events produced so far, all delivered, %d delivered again", r, len(want), dup)
		if r == rounds-1 {
			counts.eventsProduced.Add(int64(len(want)))
			counts.eventsDelivered.Add(int64(len(want) - len(missing)))
			counts.eventsDuplicated.Add(int64(dup))
			counts.eventsLost.Add(int64(len(missing)))
		}
	}
}

// TestWebhookKill9Rounds: an mcptaskd on SQLite delivers its task status
// events to a slow, sometimes failing endpoint and is killed with
// SIGKILL at random moments: no event the store committed is lost (each
// reaches the endpoint, verified, at least once) across the restarts.
func TestWebhookKill9Rounds(t *testing.T) {
	d := sqliteDaemon(t, "", hookArgs(t)...)
	webhookRounds(t, []*daemon{d}, 4)
}

// TestWebhookKill9RoundsPostgres: two instances share a PostgreSQL
// schema; one of them, at random, is killed in each round: the survivor
// takes over its leased deliveries after the 2s lease, and no event is
// lost.
func TestWebhookKill9RoundsPostgres(t *testing.T) {
	dsn := pgDSN(t)
	schema := ownSchema(t, dsn)
	args := hookArgs(t)
	var fleet []*daemon
	for range 2 {
		fleet = append(fleet, postgresDaemon(t, dsn, schema, append(args, "-db", filepath.Join(t.TempDir(), "unused.db"))...))
	}
	webhookRounds(t, fleet, 3)
}

// TestWebhookPostgresRestart: the PostgreSQL server restarts while an
// instance's deliveries and status changes are under way: every event
// committed before or after reaches the endpoint.
func TestWebhookPostgresRestart(t *testing.T) {
	dsn := pgDSN(t)
	schema := ownSchema(t, dsn)
	d := postgresDaemon(t, dsn, schema, append(hookArgs(t), "-db", filepath.Join(t.TempDir(), "unused.db"))...)
	webhookRoundsWith(t, []*daemon{d}, 1, func(*daemon) string {
		out, err := exec.Command("sh", "-c", "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main restart").CombinedOutput()
		if err != nil {
			t.Skipf("SKIPPED: restarting PostgreSQL failed, so the restart round cannot run here: %v\n%s", err, out)
		}
		counts.faults.Add(1)
		waitFor(t, "PostgreSQL to accept connections again", 60*time.Second, func() bool { return pgPing(dsn) == nil })
		return "a PostgreSQL restart"
	})
}
