package gateway_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/source/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestUpstreamDown: an upstream that goes down fails its tools' calls
// with a clear error, quickly, and once it failed a few times in a row
// at once (a pause before the next attempt, doubling: no reconnection
// in a tight loop); once it is back, calls work again.
func TestUpstreamDown(t *testing.T) {
	var down atomic.Bool
	var requests atomic.Int64
	up := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstreamServer(false) }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		up.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	url, _ := gatewayOn(t, filepath.Join(t.TempDir(), "gw.db"), gateway.Upstream{Name: "up", URL: hs.URL, MaxSessions: 1})
	ctx := t.Context()
	c, err := client.Dial(ctx, url, &client.Options{ProtocolVersion: client.Wire20260728})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call := func() error {
		cl, err := c.CallTool(ctx, "slow", map[string]any{"steps": 1})
		if err != nil || cl.Task == nil {
			t.Fatalf("slow: %+v, %v; want a task", cl, err)
		}
		_, err = c.Wait(ctx, cl.Task.ID, nil)
		return err
	}
	if err := call(); err != nil {
		t.Fatal(err)
	}

	down.Store(true)
	var te *client.TaskError
	for i := 1; ; i++ {
		start := time.Now()
		err := call()
		if !errors.As(err, &te) || !strings.Contains(te.Message, "upstream up unavailable") {
			t.Fatalf("call %d to an upstream that is down: %v; want a failed task saying it is unavailable", i, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("call %d took %v to fail", i, d)
		}
		if strings.Contains(te.Message, "next attempt in") {
			break // the gateway pauses before reconnecting
		}
		if i == 10 {
			t.Fatalf("after %d failed calls the gateway still reconnects at once: %s", i, te.Message)
		}
	}
	// In the pause, calls fail without reaching the upstream.
	before := requests.Load()
	if err := call(); !errors.As(err, &te) || !strings.Contains(te.Message, "down after") {
		t.Errorf("a call during the pause: %v; want it refused at once", err)
	}
	if n := requests.Load() - before; n != 0 {
		t.Errorf("a call during the pause reached the upstream %d times", n)
	}

	down.Store(false)
	deadline := time.Now().Add(60 * time.Second)
	for call() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the upstream is back but calls still fail")
		}
	}
}
