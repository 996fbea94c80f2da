package ext2026

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
)

// FuzzDecodeRouted: the routing check answers the same (refused or not,
// and the id it echoes) with the faster decoder as with encoding/json,
// for every body and Mcp-Name header.
func FuzzDecodeRouted(f *testing.F) {
	for _, seed := range []struct{ body, name string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"abc"}}`, "abc"},
		{`{"jsonrpc":"2.0","id":"x","method":"tasks/get","params":{"taskId":"abc"}}`, " abc "},
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
		{`{"id":[1],"method":"tasks/get","params":{"taskId":"a"}} x`, "b"},
		{`{"method":"tasks/get","params":{"taskId":"a"`, "b"},
	} {
		f.Add(seed.body, seed.name)
	}
	unmarshal := func(body []byte, msg *routed) error { return json.Unmarshal(body, msg) }
	f.Fuzz(func(t *testing.T, body, name string) {
		h := http.Header{}
		h.Set("Mcp-Name", name)
		wantID, want := routingMismatch(h, []byte(body), unmarshal)
		gotID, got := routingMismatch(h, []byte(body), decodeRouted)
		if got != want || !bytes.Equal(gotID, wantID) {
			t.Fatalf("body %q, Mcp-Name %q: refused %v (id %s), encoding/json's %v (id %s)", body, name, got, gotID, want, wantID)
		}
	})
}
