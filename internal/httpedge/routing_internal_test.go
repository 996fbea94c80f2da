package httpedge

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/mcptask/mcptask/wire/ext2026"
)

// FuzzRoutingMismatch: the lane's routing check answers as the
// RoutingGuard's (ext2026.RoutingMismatch) for every valid JSON body and
// Mcp-Name header.
func FuzzRoutingMismatch(f *testing.F) {
	for _, seed := range []struct{ body, name string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"abc"}}`, "abc"},
		{`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"abc"}}`, " abc "},
		{`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"abc"}}`, "abd"},
		{`{"method":"tasks/cancel","params":{"TaskId":"a","taskId":"b"}}`, "a"},
		{`{"method":"tasks/update","params":{"taskId":"a","TASKID":"b"}}`, "b"},
		{`{"METHOD":"tasks/delete","params":{"taskId":"a"}}`, "x"},
		{`{"method":"tasks/get","method":"tools/call","params":{"taskId":"a"}}`, "x"},
		{`{"method":"tasks/get","params":{"taskId":null}}`, "x"},
		{`{"method":"tasks/get","params":{"taskId":5}}`, "5"},
		{`{"method":"tasks/get","params":[]}`, "x"},
		{`{"method":"tasks/get","params":{"ta\u0073kId":"a"}}`, "b"},
		{`{"method":"tasks/get","params":{"taſkId":"a"}}`, "b"},
		{`{"method":"tasks\/get","params":{"taskId":"a"}}`, "b"},
		{`{"method":"tasks/get","params":{"taskId":"\u00e9"}}`, "é"},
	} {
		f.Add(seed.body, seed.name)
	}
	f.Fuzz(func(t *testing.T, body, name string) {
		if !json.Valid([]byte(body)) {
			return
		}
		h := http.Header{}
		h.Set("Mcp-Name", name)
		_, want := ext2026.RoutingMismatch(h, []byte(body))
		if got := routingMismatch(h, []byte(body)); got != want {
			t.Fatalf("routingMismatch(%q, %q) = %v, the guard's %v", name, body, got, want)
		}
	})
}
