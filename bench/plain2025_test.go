package bench

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// plainNoop is a no-op tool.
func plainNoop(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
}

// plainCalls2025 opens a 2025-11-25 session on h and calls plainNoop on
// it b.N times.
func plainCalls2025(b *testing.B, h http.Handler) {
	hs := httptest.NewServer(h)
	defer hs.Close()
	post := func(body string, sid string) (*http.Response, []byte) {
		req, _ := http.NewRequest("POST", hs.URL, bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, data
	}
	resp, _ := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`, "")
	sid := resp.Header.Get("Mcp-Session-Id")
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid)
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"noop","arguments":{}}}`
	b.ResetTimer()
	for b.Loop() {
		_, data := post(body, sid)
		if !bytes.Contains(data, []byte(`"ok"`)) {
			b.Fatalf("%s", data)
		}
	}
}

// BenchmarkPlainCall2025Bare and BenchmarkPlainCall2025: a plain no-op
// tools/call on one 2025-11-25 session over loopback HTTP, sequential,
// to a bare go-sdk server and to the same server behind mcptask (fast
// lane on, a SQLite store): what mcptask adds to a call it does not make
// a task of (issue 33, item 2). Compare B/op and allocs/op of one run;
// ns/op only over several.
func BenchmarkPlainCall2025Bare(b *testing.B) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "b", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "noop"}, plainNoop)
	plainCalls2025(b, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
}

func BenchmarkPlainCall2025(b *testing.B) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "t.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.New(engine.Options{Store: st, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "b", Version: "1"}, nil)
	ts, err := mcptask.New(srv, eng, &mcptask.Options{FastLane: true, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	mcptask.AddTool(ts, &mcp.Tool{Name: "noop"}, plainNoop, mcptask.ToolOptions{})
	if err := ts.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer ts.Close(context.Background())
	defer st.Close()
	plainCalls2025(b, ts.Handler(nil))
}
