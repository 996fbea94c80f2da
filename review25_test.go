package mcptask_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/wiretest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReview25IdleTimeoutRefreshedByRefusedPOST: the lane's idle clock
// (lastSDK) is refreshed by any POST of the session that goes to the
// go-sdk, even one the go-sdk refuses before it finds the session (415,
// 403, 400), which does not restart the go-sdk's idle timer. A client
// polling tasks/get (and sending such a POST now and then) then has its
// session closed under it by the idle timeout, which the go-sdk alone
// never does. With authn, another user who knows the session ID (403
// every time) kills alice's actively used session.
func TestReview25IdleTimeoutRefreshedByRefusedPOST(t *testing.T) {
	for _, authn := range []bool{false, true} {
		t.Run(fmt.Sprintf("authn=%v", authn), func(t *testing.T) {
			g := &gates{}
			const timeout = time.Second
			p := startLanePair(t, g, mcptask.Options{}, mcp.StreamableHTTPOptions{SessionTimeout: timeout}, authn)
			ctx := ctxT(t)
			for _, url := range []string{p.fast, p.slow} {
				name := map[string]string{p.fast: "fast lane", p.slow: "go-sdk only"}[url]
				s := &wiretest.Session{URL: url}
				if authn {
					s.Header = http.Header{"Authorization": {"Bearer alice"}}
				}
				if _, err := s.Initialize(ctx); err != nil {
					t.Fatal(err)
				}
				raw, err := s.Call(ctx, "tools/call", map[string]any{"name": "work", "arguments": map[string]any{"label": "t"}, "task": map[string]any{}})
				if err != nil {
					t.Fatal(err)
				}
				var res struct {
					Task struct {
						TaskID string `json:"taskId"`
					} `json:"task"`
				}
				if err := json.Unmarshal(raw, &res); err != nil {
					t.Fatal(err)
				}
				// The refused POST: a wrong Content-Type (415) without
				// authn, bob's token on alice's session (403) with it.
				bad := laneRequest{name: "refused", session: s.ID,
					body: `{"jsonrpc":"2.0","id":99,"method":"ping"}`,
					header: map[string]string{"Content-Type": "text/plain"}}
				if authn {
					bad.header = map[string]string{"Authorization": "Bearer bob"}
				}
				var failed error
				gets := 0
				last := time.Now()
				for end := time.Now().Add(3 * timeout); time.Now().Before(end); gets++ {
					if _, err := s.Call(ctx, "tasks/get", map[string]any{"taskId": res.Task.TaskID}); err != nil {
						failed = err
						break
					}
					if time.Since(last) > timeout/4 {
						if got := bad.send(t, url); !strings.HasPrefix(got, "HTTP 415") && !strings.HasPrefix(got, "HTTP 403") {
							t.Fatalf("refused POST answered %s", got)
						}
						last = time.Now()
					}
					time.Sleep(50 * time.Millisecond)
				}
				if failed != nil {
					t.Errorf("%s: the session, polled every 50 ms, was closed after %d gets: %v", name, gets, failed)
				} else {
					t.Logf("%s: %d gets, session open", name, gets)
				}
			}
		})
	}
}

// TestReview25DuplicateFastThenSlow: a call whose ID is in flight on the
// fast lane does not stop the go-sdk from accepting a call with the same
// ID on the slow lane: the go-sdk alone refuses it (400, duplicate
// in-flight request ID), the lane's server runs it.
func TestReview25DuplicateFastThenSlow(t *testing.T) {
	g := &gates{}
	p := startLanePairSessions(t, g, mcptask.Options{}, mcp.StreamableHTTPOptions{}, false, laneSessionID)
	ctx := ctxT(t)
	setup := &wiretest.Session{URL: p.setup}
	if _, err := setup.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := setup.Call(ctx, "tools/call", map[string]any{"name": "ask", "task": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	for {
		raw, err := setup.Call(ctx, "tasks/get", map[string]any{"taskId": res.Task.TaskID})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), `"input_required"`) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The go-sdk alone: a call with ID 2 (a tasks/result waiting for the
	// task) in flight, then a ping with ID 2.
	ping := laneRequest{name: "ping", session: laneSessionID, body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`}
	s := &wiretest.Session{URL: p.slow}
	if _, err := s.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	msgs, err := s.CallStream(rctx, "tasks/result", map[string]any{"taskId": res.Task.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := <-msgs; !ok || m.Method != "elicitation/create" {
		t.Fatalf("tasks/result: %+v, want the question", m)
	}
	slow := ping.send(t, p.slow)
	cancel()
	for range msgs {
	}
	// The fast lane: a tasks/get with ID 2 in flight on the lane, then
	// the same ping.
	f := &wiretest.Session{URL: p.fast}
	if _, err := f.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	end := mcptask.MarkFastLaneCall(p.fastHandler, laneSessionID, 2)
	fast := ping.send(t, p.fast)
	end()
	if fast != slow {
		t.Errorf("a duplicate of a call in flight on the fast lane: answered\n%s\n\nthe go-sdk alone answered\n%s", fast, slow)
	}
}
