package mcptask_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzWireRequest sends arbitrary tasks requests (any method name, any
// params) through the full HTTP handler and checks that each gets a clear
// answer (never a server error or a panic) and that nothing stored is lost
// or changed: a completed sentinel task stays exactly as it was.
func FuzzWireRequest(f *testing.F) {
	s := startServerWith(f, filepath.Join(f.TempDir(), "fuzz.db"), func(ts *mcptask.Server) {
		mcptask.AddTool(ts, &mcp.Tool{Name: "quick", Description: "returns at once"},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return text("ok"), nil, nil
			}, mcptask.ToolOptions{Support: mcptask.Optional})
	})
	c := &wiretest.Client{URL: s.url, Tasks: true}
	ctx := context.Background()
	h, err := c.CallTool(ctx, "quick", nil)
	if err != nil {
		f.Fatal(err)
	}
	sentinel, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal)
	if err != nil {
		f.Fatal(err)
	}
	meta, _ := json.Marshal(c.Meta())

	for _, seed := range []struct{ method, params string }{
		{"tasks/get", `{"taskId":"` + sentinel.TaskID + `"}`},
		{"tasks/get", `{"taskId":12}`},
		{"tasks/get", `{"taskId":null}`},
		{"tasks/get", `{}`},
		{"tasks/update", `{"taskId":"x","inputResponses":{"k":{"action":"accept"}}}`},
		{"tasks/update", `{"taskId":"` + sentinel.TaskID + `","inputResponses":[1,2]}`},
		{"tasks/update", `{"taskId":"` + sentinel.TaskID + `","inputResponses":{"input-1":null}}`},
		{"tasks/cancel", `{"taskId":"` + sentinel.TaskID + `"}`},
		{"tasks/cancel", `{"taskId":"\u0000"}`},
		{"tools/call", `{"name":"quick"}`},
		{"tools/call", `{"name":"quick","arguments":"nope"}`},
		{"tasks/result", `{"taskId":"a"}`},
		{"tasks/list", `{"cursor":"zzz"}`},
		{"tasks/get", `[]`},
		{"tasks/get", `not json`},
		{"subscriptions/listen", `{"notifications":{"taskIds":["` + sentinel.TaskID + `"]}}`},
		{"subscriptions/listen", `{"notifications":{"taskIds":["` + sentinel.TaskID + `","x",7,null]}}`},
		{"subscriptions/listen", `{"notifications":{"taskIds":"` + sentinel.TaskID + `"}}`},
		{"subscriptions/listen", `{"notifications":{"taskIds":[]}}`},
		{"subscriptions/listen", `{"notifications":null}`},
		{"events/list", `{}`},
		{"events/poll", `{"name":"task.status","cursor":null}`},
		{"events/poll", `{"name":"task.output","arguments":{"taskId":"` + sentinel.TaskID + `"},"cursor":"e1.0.0","maxEvents":1}`},
		{"events/poll", `{"name":"task.output","arguments":{"taskId":7},"cursor":"e1.-1.zz"}`},
		{"events/poll", `{"name":"x.output","arguments":[],"cursor":"e1.0.0","maxAgeMs":-5}`},
		{"events/stream", `{"name":"task.output","arguments":{"taskId":"` + sentinel.TaskID + `"},"cursor":"e1.0.0"}`},
		{"events/stream", `{"name":"task.status","arguments":"nope"}`},
		{"events/subscribe", `{"name":"task.status","delivery":{"url":"https://127.0.0.1/x","secret":"whsec_AAAA"}}`},
		{"events/subscribe", `{"name":"task.status","delivery":{"url":"javascript:alert(1)","secret":"whsec_` + strings.Repeat("QUJD", 8) + `"},"ttlMs":"x"}`},
		{"events/unsubscribe", `{"name":"task.status","delivery":{"url":"https://h/x"}}`},
	} {
		f.Add(seed.method, seed.params, true)
		f.Add(seed.method, seed.params, false)
	}
	f.Fuzz(func(t *testing.T, method, params string, withMeta bool) {
		var p map[string]json.RawMessage
		body := []byte(`{"jsonrpc":"2.0","id":7,"method":` + quote(method) + `,"params":` + params + `}`)
		if json.Unmarshal([]byte(params), &p) == nil && p != nil && withMeta {
			if _, ok := p["_meta"]; !ok {
				p["_meta"] = meta
			}
			pb, _ := json.Marshal(p)
			body = []byte(`{"jsonrpc":"2.0","id":7,"method":` + quote(method) + `,"params":` + string(pb) + `}`)
		}
		req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		var tid struct {
			TaskID string `json:"taskId"`
		}
		_ = json.Unmarshal([]byte(params), &tid)
		req.Header.Set("Mcp-Name", tid.TaskID)
		// A listen stream the go-sdk keeps open (e.g. toolsListChanged)
		// lasts until the client goes: this one goes after a moment.
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		req = req.WithContext(rctx)
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("HTTP %d for %s %s: %s", rec.Code, method, params, rec.Body.Bytes())
		}
		got, err := c.Get(ctx, sentinel.TaskID)
		if err != nil {
			t.Fatalf("sentinel task lost after %s %s: %v", method, params, err)
		}
		if got.Status != sentinel.Status || !bytes.Equal(got.Result, sentinel.Result) || got.LastUpdatedAt != sentinel.LastUpdatedAt {
			t.Fatalf("sentinel task changed by %s %s: %+v", method, params, got)
		}
	})
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
