package gateway

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSlowUpstreamAtStart: a stdio upstream that takes longer to start
// than the dial timeout does not fail the start; it is reported down and
// tried again, each attempt given twice the time of the one that ran out,
// until it answers and its tools are added.
func TestSlowUpstreamAtStart(t *testing.T) {
	saved := dialTimeout
	dialTimeout = 150 * time.Millisecond
	t.Cleanup(func() { dialTimeout = saved })

	var mu sync.Mutex
	var added []string
	addedCh := make(chan struct{}, 16)
	var gw *Gateway
	servertest.Start(t, servertest.Options{Register: func(ts *mcptask.Server) (func(), error) {
		var err error
		gw = New([]Upstream{{
			Name: "slow", Command: os.Args[0],
			// The process takes 700 ms before it answers: the first
			// attempts (150 ms, 300 ms, 600 ms) run out, the next fits.
			Env: map[string]string{"GATEWAY_TEST_UPSTREAM": "1", "GATEWAY_TEST_SLOW_START": "700ms"},
		}}, slog.New(slog.NewTextHandler(io.Discard, nil)), &Options{AddTool: func(tl *mcp.Tool, _ mcp.ToolHandler) {
			mu.Lock()
			added = append(added, tl.Name)
			mu.Unlock()
			addedCh <- struct{}{}
		}})
		err = gw.Register(context.Background(), ts)
		if err != nil {
			return nil, err
		}
		return func() { _ = gw.Close() }, nil
	}})
	if err := gw.Health()["slow"]; err == nil {
		t.Fatal("the upstream that did not answer in time is reported up")
	}
	select {
	case <-addedCh:
	case <-time.After(60 * time.Second):
		t.Fatalf("the slow upstream's tools were never added (health: %v)", gw.Health()["slow"])
	}
	deadline := time.Now().Add(30 * time.Second)
	for gw.Health()["slow"] != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream is up but reported %v", gw.Health()["slow"])
		}
		time.Sleep(10 * time.Millisecond) // polling the health, not timing the test
	}
	mu.Lock()
	defer mu.Unlock()
	if len(added) == 0 || added[0] == "" {
		t.Errorf("tools added: %q", added)
	}
}
