package gateway_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/upstreamtest"
	"github.com/mcptask/mcptask/source/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cuttingUpstream is an HTTP upstream that runs a call of its tool "slow"
// (ran counts them) and then, instead of answering, cuts the connection:
// the upstream died with the call in flight.
func cuttingUpstream(t *testing.T, ran *atomic.Int64) string {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstreamServer(false) }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			if bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(body, []byte(`"slow"`)) {
				ran.Add(1) // the tool ran: its side effect happened
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestHTTPUpstreamCutMidCall: an HTTP upstream that cuts the connection
// of a call it received (and ran) fails the task saying its outcome is
// unknown, not that the upstream was unavailable (which says the call was
// never sent); a rerunnable tool is called again.
func TestHTTPUpstreamCutMidCall(t *testing.T) {
	var ran atomic.Int64
	up := gateway.Upstream{Name: "up", URL: cuttingUpstream(t, &ran)}
	url, _ := gatewayOn(t, filepath.Join(t.TempDir(), "gw.db"), up)
	ctx := t.Context()
	c, err := client.Dial(ctx, url, &client.Options{ProtocolVersion: client.Wire20260728})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call, err := c.CallTool(ctx, "slow", map[string]any{"steps": 1})
	if err != nil || call.Task == nil {
		t.Fatalf("slow: %+v, %v; want a task", call, err)
	}
	_, err = c.Wait(ctx, call.Task.ID, nil)
	var te *client.TaskError
	if !errors.As(err, &te) || !strings.Contains(te.Message, "outcome is unknown") || strings.Contains(te.Message, "unavailable") {
		t.Errorf("a call whose connection the upstream cut after running it: %v; want a failure saying its outcome is unknown", err)
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("the upstream ran the call %d times, want 1", n)
	}

	// Rerunnable: called again, up to the attempts' bound.
	ran.Store(0)
	up.Default.Rerunnable = true
	url, _ = gatewayOn(t, filepath.Join(t.TempDir(), "gw2.db"), up)
	c2, err := client.Dial(ctx, url, &client.Options{ProtocolVersion: client.Wire20260728})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	call, err = c2.CallTool(ctx, "slow", map[string]any{"steps": 1})
	if err != nil || call.Task == nil {
		t.Fatalf("slow: %+v, %v; want a task", call, err)
	}
	if _, err = c2.Wait(ctx, call.Task.ID, nil); !errors.As(err, &te) || !strings.Contains(te.Message, "died during each of 3 calls") {
		t.Errorf("a rerunnable call cut each time: %v; want it called 3 times", err)
	}
	if n := ran.Load(); n != 3 {
		t.Errorf("the upstream ran the rerunnable call %d times, want 3", n)
	}
}

// TestTaskUpstreamCutCreate: an upstream that speaks tasks, whose
// connection breaks each time after it created the task and before its
// answer left: our task fails saying the outcome is unknown (the upstream
// may be running it), not that the upstream was unavailable.
func TestTaskUpstreamCutCreate(t *testing.T) {
	up := upstreamtest.New(t)
	url, _ := gatewayOn(t, filepath.Join(t.TempDir(), "gw.db"), gateway.Upstream{Name: "up", URL: up.URL})
	cut := func(body []byte) bool {
		return bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(body, []byte(`"work"`))
	}
	up.Cut.Store(&cut)
	ctx := t.Context()
	c, err := client.Dial(ctx, url, &client.Options{ProtocolVersion: client.Wire20260728})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call, err := c.CallTool(ctx, "work", map[string]any{"label": "deploy"})
	if err != nil || call.Task == nil {
		t.Fatalf("work: %+v, %v; want a task", call, err)
	}
	_, err = c.Wait(ctx, call.Task.ID, nil)
	var te *client.TaskError
	if !errors.As(err, &te) || !strings.Contains(te.Message, "outcome is unknown") || strings.Contains(te.Message, "unavailable") {
		t.Errorf("a create whose answer the upstream cut: %v; want a failure saying its outcome is unknown", err)
	}
}
