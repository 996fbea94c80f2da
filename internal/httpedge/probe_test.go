package httpedge

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/wire/ext2026"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestProbe: the probe learns the go-sdk server's serverInfo and its
// versions through the stateless handler, and its recorder keeps what an
// httptest.ResponseRecorder keeps of the same answer, for SSE and JSON.
func TestProbe(t *testing.T) {
	impl := &mcp.Implementation{Name: "probed", Version: "7"}
	srv := mcp.NewServer(impl, nil)
	for _, jsonResponse := range []bool{false, true} {
		slow := ext2026.RoutingGuard(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
			&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: jsonResponse}))
		got, versions, ok := probe(slow)
		if !ok || got.Name != impl.Name || got.Version != impl.Version {
			t.Fatalf("json=%v: probe: %+v %v", jsonResponse, got, ok)
		}
		if !slices.Contains(versions, ext2026.Version) || !slices.Contains(versions, v1.Version) {
			t.Errorf("json=%v: versions %v", jsonResponse, versions)
		}

		newReq := func() *http.Request {
			req := httptest.NewRequest(http.MethodPost, "http://localhost/mcp", strings.NewReader(probeBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", ext2026.Version)
			req.Header.Set("Mcp-Method", "server/discover")
			return req
		}
		want := httptest.NewRecorder()
		slow.ServeHTTP(want, newReq())
		rec := &recorder{header: http.Header{}}
		slow.ServeHTTP(rec, newReq())
		if rec.status() != want.Code || rec.body.String() != want.Body.String() ||
			rec.header.Get("Content-Type") != want.Header().Get("Content-Type") {
			t.Errorf("json=%v: the recorder kept %d %q %q, httptest %d %q %q", jsonResponse,
				rec.status(), rec.header.Get("Content-Type"), rec.body.String(),
				want.Code, want.Header().Get("Content-Type"), want.Body.String())
		}
	}
}
