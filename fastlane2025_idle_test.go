package mcptask_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestFastLane2025IdleTimeoutRefusedPOST: a POST of the session that the
// go-sdk refuses before it finds the session (415, 403, 400) does not
// restart the go-sdk's idle timer, so it must not count as activity for
// the lane either. A client polling tasks/get (with such a POST now and
// then, e.g. another user who knows the session ID, refused 403 every
// time) keeps its session open, as with the go-sdk alone.
func TestFastLane2025IdleTimeoutRefusedPOST(t *testing.T) {
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
				taskID := startTask25(t, ctx, s, "work", map[string]any{"label": "t"})
				// The refused POST: a wrong Content-Type (415) without
				// authn, bob's token on alice's session (403) with it.
				bad := laneRequest{name: "refused", session: s.ID,
					body:   `{"jsonrpc":"2.0","id":99,"method":"ping"}`,
					header: map[string]string{"Content-Type": "text/plain"}}
				if authn {
					bad.header = map[string]string{"Authorization": "Bearer bob"}
				}
				var failed error
				gets := 0
				last := time.Now()
				for end := time.Now().Add(3 * timeout); time.Now().Before(end); gets++ {
					if _, err := s.Call(ctx, "tasks/get", map[string]any{"taskId": taskID}); err != nil {
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
