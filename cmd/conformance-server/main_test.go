package main

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// rpc posts one JSON-RPC message and returns the HTTP response and the
// JSON-RPC messages of its body (SSE data lines or a plain JSON body).
func rpc(t *testing.T, url string, hdr map[string]string, body string) (*http.Response, []map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msgs []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data:")
		var m map[string]any
		if json.Unmarshal([]byte(strings.TrimSpace(line)), &m) == nil {
			msgs = append(msgs, m)
		}
	}
	io.Copy(io.Discard, resp.Body)
	return resp, msgs
}

func newTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, stop, err := newHandler(filepath.Join(t.TempDir(), "tasks.db"), logger)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(stop)
	t.Cleanup(ts.Close)
	return ts
}

const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

func statelessHeaders(method, name string) map[string]string {
	h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}

func result(t *testing.T, msgs []map[string]any) map[string]any {
	t.Helper()
	for _, m := range msgs {
		if r, ok := m["result"].(map[string]any); ok {
			return r
		}
		if e, ok := m["error"]; ok {
			t.Fatalf("error response: %v", e)
		}
	}
	t.Fatalf("no result in %v", msgs)
	return nil
}

func TestStatelessWire(t *testing.T) {
	ts := newTestServer(t)
	resp, msgs := rpc(t, ts.URL, statelessHeaders("server/discover", ""),
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta2026+`}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("discover: status %d", resp.StatusCode)
	}
	res := result(t, msgs)
	if !slices.Contains(toStrings(res["supportedVersions"]), "2026-07-28") || res["resultType"] != "complete" {
		t.Errorf("discover result = %v", res)
	}

	_, msgs = rpc(t, ts.URL, statelessHeaders("tools/call", "test_simple_text"),
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_simple_text",`+meta2026+`}}`)
	if res := result(t, msgs); res["resultType"] != "complete" {
		t.Errorf("tools/call result = %v", res)
	}

	// Removed methods get 404 and -32601 on the stateless wire.
	resp, msgs = rpc(t, ts.URL, statelessHeaders("ping", ""),
		`{"jsonrpc":"2.0","id":3,"method":"ping","params":{`+meta2026+`}}`)
	if resp.StatusCode != http.StatusNotFound || len(msgs) != 1 || msgs[0]["error"].(map[string]any)["code"] != float64(-32601) {
		t.Errorf("ping: status %d, %v", resp.StatusCode, msgs)
	}
}

func TestStatefulWire(t *testing.T) {
	ts := newTestServer(t)
	resp, msgs := rpc(t, ts.URL, nil,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{},"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: status %d, session %q", resp.StatusCode, sid)
	}
	if res := result(t, msgs); res["protocolVersion"] != "2025-11-25" {
		t.Errorf("initialize result = %v", res)
	}
	hdr := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	resp, _ = rpc(t, ts.URL, hdr, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: status %d", resp.StatusCode)
	}

	var first []string
	for i := range 3 {
		_, msgs = rpc(t, ts.URL, hdr, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		var names []string
		for _, tool := range result(t, msgs)["tools"].([]any) {
			tool := tool.(map[string]any)
			if tool["description"] == "" || tool["description"] == nil || tool["inputSchema"] == nil {
				t.Errorf("tool %v lacks a description or input schema", tool["name"])
			}
			names = append(names, tool["name"].(string))
		}
		if i == 0 {
			first = names
		} else if !slices.Equal(first, names) {
			t.Fatalf("tools/list order changed: %v then %v", first, names)
		}
	}
	for _, want := range []string{"test_simple_text", "test_sampling", "test_missing_capability", "test_input_required_result_multi_round", "json_schema_2020_12_tool"} {
		if !slices.Contains(first, want) {
			t.Errorf("tools/list lacks %s", want)
		}
	}

	_, msgs = rpc(t, ts.URL, hdr, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if res := result(t, msgs); len(res) != 0 {
		t.Errorf("ping result = %v, want {}", res)
	}
}

func TestDNSRebinding(t *testing.T) {
	ts := newTestServer(t)
	discover := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta2026 + `}}`
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{"evil.example.com", "http://evil.example.com", http.StatusForbidden},
		{"evil.example.com", "", http.StatusForbidden},
		{"localhost:3001", "http://evil.example.com", http.StatusForbidden},
		{"localhost:3001", "http://localhost:3001", http.StatusOK},
		{"127.0.0.1", "", http.StatusOK},
		{"[::1]:8080", "http://[::1]:8080", http.StatusOK},
	} {
		hdr := statelessHeaders("server/discover", "")
		hdr["Host"] = tc.host
		if tc.origin != "" {
			hdr["Origin"] = tc.origin
		}
		resp, _ := rpc(t, ts.URL, hdr, discover)
		if resp.StatusCode != tc.want {
			t.Errorf("Host %q Origin %q: status %d, want %d", tc.host, tc.origin, resp.StatusCode, tc.want)
		}
	}
}

func TestCheckLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:3001": true,
		"localhost:0":    true,
		"[::1]:3001":     true,
		"0.0.0.0:3001":   false,
		":3001":          false,
		"10.0.0.1:3001":  false,
	} {
		if err := checkLoopback(addr); (err == nil) != ok {
			t.Errorf("checkLoopback(%q) = %v", addr, err)
		}
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
