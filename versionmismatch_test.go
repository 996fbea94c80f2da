package mcptask_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestProtocolHeaderAndMetaDisagree (issue 25, L12): a request whose
// Mcp-Protocol-Version header says 2025-11-25 while its _meta says
// 2026-07-28 is told that the two disagree, naming both versions. (It
// was told "2025-11-25 is not supported" while data.supported listed
// 2025-11-25.) Over real loopback HTTP, for a request without a session
// and for one on a 2025-11-25 session.
func TestProtocolHeaderAndMetaDisagree(t *testing.T) {
	srv := servertest.Start(t, servertest.Options{})
	post := func(t *testing.T, hdr map[string]string, body any) (int, string) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			return resp.StatusCode, sid
		}
		return resp.StatusCode, string(raw)
	}
	meta := map[string]any{ext2026.MetaProtocolVersion: ext2026.Version,
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "t", "version": "1"}, ext2026.MetaClientCapabilities: map[string]any{}}
	list := map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": map[string]any{"_meta": meta}}
	check := func(t *testing.T, code int, raw string) {
		t.Helper()
		var resp struct {
			ID    int `json:"id"`
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Data    struct {
					Supported []string `json:"supported"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(raw), &resp); err != nil || resp.Error == nil {
			t.Fatalf("%d %s: want a JSON-RPC error", code, raw)
		}
		e := resp.Error
		if code != http.StatusBadRequest || resp.ID != 7 || e.Code != mcp.CodeHeaderMismatch {
			t.Fatalf("%d id %d code %d (%s), want 400, id 7, %d (header mismatch)", code, resp.ID, e.Code, raw, mcp.CodeHeaderMismatch)
		}
		if !strings.Contains(e.Message, "2025-11-25") || !strings.Contains(e.Message, ext2026.Version) || strings.Contains(e.Message, "not supported") {
			t.Fatalf("message %q: want both versions named, not 'not supported'", e.Message)
		}
		for _, v := range e.Data.Supported {
			if strings.Contains(e.Message, v+" is not supported") {
				t.Fatalf("message %q says %s is not supported, but data.supported lists it: %v", e.Message, v, e.Data.Supported)
			}
		}
		if len(e.Data.Supported) > 0 && !slices.Contains(e.Data.Supported, ext2026.Version) {
			t.Fatalf("data.supported %v lacks %s", e.Data.Supported, ext2026.Version)
		}
	}
	t.Run("no session", func(t *testing.T) {
		code, raw := post(t, map[string]string{"Mcp-Protocol-Version": "2025-11-25"}, list)
		check(t, code, raw)
	})
	t.Run("a 2025-11-25 version in _meta", func(t *testing.T) {
		m := map[string]any{ext2026.MetaProtocolVersion: "2025-11-25"}
		code, raw := post(t, map[string]string{"Mcp-Protocol-Version": "2025-11-25"},
			map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": map[string]any{"_meta": m}})
		var resp struct {
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(raw), &resp) != nil || resp.Error == nil || code != http.StatusBadRequest || resp.Error.Code != -32602 ||
			strings.Contains(resp.Error.Message, "not supported") || !strings.Contains(resp.Error.Message, ext2026.Version+" and later") {
			t.Fatalf("%d %s: want 400, -32602 saying a per-request version is of %s and later", code, raw, ext2026.Version)
		}
	})
	t.Run("on a 2025-11-25 session", func(t *testing.T) {
		code, sid := post(t, nil, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
			"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
		if code != http.StatusOK || strings.HasPrefix(sid, "{") {
			t.Fatalf("initialize: %d %s", code, sid)
		}
		post(t, map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid},
			map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
		code, raw := post(t, map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid}, list)
		check(t, code, raw)
	})
}
