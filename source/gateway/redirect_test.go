package gateway_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/source/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRedirectKeepsSecrets: the configured headers of an HTTP upstream (its
// credentials) go to the configured origin only. A redirect within that
// origin is followed, headers and all; a redirect to another origin (another
// port of the same host, here) is refused, and the other origin never gets
// the headers.
func TestRedirectKeepsSecrets(t *testing.T) {
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstreamServer(false) }, nil)
	var mu sync.Mutex
	var leaked []string // the secret headers the other origin received
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		for _, h := range []string{"Authorization", "X-Api-Key"} {
			if v := r.Header.Get(h); v != "" {
				leaked = append(leaked, h+": "+v)
			}
		}
		mu.Unlock()
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(other.Close)
	var sameOriginAuth []string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/mcp", http.StatusTemporaryRedirect)
		case "/away":
			http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
		default:
			mu.Lock()
			sameOriginAuth = append(sameOriginAuth, r.Header.Get("Authorization"))
			mu.Unlock()
			mcpHandler.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(origin.Close)

	// start starts a gateway of the upstream at path and returns its
	// health.
	start := func(path string) error {
		var health error
		servertest.Start(t, servertest.Options{Register: func(ts *mcptask.Server) (func(), error) {
			gw := gateway.New([]gateway.Upstream{{Name: "up", URL: origin.URL + path,
				Headers: map[string]string{"Authorization": "Bearer upstream-secret", "X-Api-Key": "key-secret"}}},
				slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})), nil)
			err := gw.Register(t.Context(), ts)
			if err != nil {
				return nil, err
			}
			health = gw.Health()["up"]
			return func() { _ = gw.Close() }, nil
		}})
		return health
	}

	if err := start("/moved"); err != nil {
		t.Fatalf("an upstream redirected within its origin: %v", err)
	}
	mu.Lock()
	if len(sameOriginAuth) == 0 || sameOriginAuth[0] != "Bearer upstream-secret" {
		t.Errorf("the redirect within the origin lost the configured headers: %q", sameOriginAuth)
	}
	mu.Unlock()

	if err := start("/away"); err == nil || !strings.Contains(err.Error(), "another origin") {
		t.Errorf("an upstream redirected to another origin: health %v; want it down, saying why", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Errorf("another origin received the upstream's secret headers: %q", leaked)
	}
}
