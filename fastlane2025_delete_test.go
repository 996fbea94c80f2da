package mcptask_test

import (
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestFastLane2025RefusedDELETE: the router forgets a session on any
// DELETE, before the go-sdk answers it; when the go-sdk refuses it (here
// 400, an unsupported protocol version; with authn, another user's 403),
// the session's next message records it again. That must not add a
// goroutine waiting on ServerSession.Wait each time (one per session).
func TestFastLane2025RefusedDELETE(t *testing.T) {
	g := &gates{}
	p := startLanePair(t, g, mcptask.Options{}, mcp.StreamableHTTPOptions{}, false)
	ctx := ctxT(t)
	s := &wiretest.Session{URL: p.fast}
	if _, err := s.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	taskID := startTask25(t, ctx, s, "work", map[string]any{"label": "t"})
	cycle := func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, p.fast, nil)
		req.Header.Set("Mcp-Session-Id", s.ID)
		req.Header.Set("Mcp-Protocol-Version", "1999-01-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("DELETE: HTTP %d", resp.StatusCode)
		}
		if _, err := s.Call(ctx, "tasks/get", map[string]any{"taskId": taskID}); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		cycle()
	}
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()
	const n = 300
	for range n {
		cycle()
	}
	time.Sleep(100 * time.Millisecond)
	after := runtime.NumGoroutine()
	t.Logf("goroutines: %d before, %d after %d refused DELETEs", before, after, n)
	if after-before > n/10 {
		t.Errorf("%d goroutines more after %d refused DELETEs of a live session", after-before, n)
	}
}
