package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/source/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolMeta: Upstream.ToolMeta adds entries to the _meta of the
// re-exported tools in tools/list, on both wires: "*" to every tool of
// the upstream, a tool's own entry over it; the other tools get "*"
// only.
func TestToolMeta(t *testing.T) {
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstreamServer(false) }, nil))
	t.Cleanup(hs.Close)
	url := gatewayServer(t, gateway.Upstream{Name: "up", URL: hs.URL, Tools: []string{"slow", "ask"},
		ToolMeta: map[string]map[string]any{
			"*":    {"example.com/all": true, "example.com/over": "all"},
			"slow": {"example.com/over": "slow", "anthropic/maxResultSizeChars": 200000},
		}})
	want := map[string]map[string]any{
		"slow": {"anthropic/maxResultSizeChars": float64(200000), "example.com/all": true, "example.com/over": "slow"},
		"ask":  {"example.com/all": true, "example.com/over": "all"},
	}
	// check: each tool's _meta holds the entries wanted (and those
	// mcptask adds itself, e.g. the tool's task support).
	check := func(t *testing.T, metas map[string]json.RawMessage) {
		t.Helper()
		for name, w := range want {
			var got map[string]any
			if err := json.Unmarshal(metas[name], &got); err != nil {
				t.Fatalf("%s: _meta %s: %v", name, metas[name], err)
			}
			for k, v := range w {
				if got[k] != v {
					t.Errorf("%s: _meta[%q] = %v, want %v (_meta %s)", name, k, got[k], v, metas[name])
				}
			}
		}
	}
	t.Run("2026-07-28", func(t *testing.T) {
		c := &wiretest.Client{URL: url, Tasks: true}
		var res struct {
			Tools []struct {
				Name string          `json:"name"`
				Meta json.RawMessage `json:"_meta"`
			} `json:"tools"`
		}
		if err := c.Result(t.Context(), "tools/list", nil, &res); err != nil {
			t.Fatal(err)
		}
		metas := map[string]json.RawMessage{}
		for _, tl := range res.Tools {
			metas[tl.Name] = tl.Meta
		}
		check(t, metas)
	})
	t.Run("2025-11-25", func(t *testing.T) {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
			t.Fatalf("negotiated %s, want 2025-11-25", v)
		}
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		metas := map[string]json.RawMessage{}
		for _, tl := range res.Tools {
			b, _ := json.Marshal(tl.Meta)
			metas[tl.Name] = b
		}
		check(t, metas)
	})
}
