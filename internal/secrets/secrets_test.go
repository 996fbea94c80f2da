package secrets

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestSet(t *testing.T) {
	var s Set
	for _, v := range []string{"abc", "   ab   ", "token", "Bearer token", "token"} {
		s.Add(v)
	}
	if s.Len() != 2 {
		t.Fatalf("Len = %d, want 2 (short, spaced and repeated values are no secrets)", s.Len())
	}
	if got := s.String("Authorization: Bearer token, abc"); got != "Authorization: [redacted], abc" {
		t.Errorf("String = %q: a secret holding another is replaced whole", got)
	}
	if b := []byte("nothing here"); &s.Bytes(b)[0] != &b[0] {
		t.Error("Bytes copied a value without secrets")
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "got token"}},
		StructuredContent: json.RawMessage(`{"token":["x token",1]}`)}
	s.Result(res)
	got, _ := json.Marshal(res.StructuredContent)
	if text := res.Content[0].(*mcp.TextContent).Text; text != "got [redacted]" || string(got) != `{"[redacted]":["x [redacted]",1]}` {
		t.Errorf("Result: %q, %s", text, got)
	}
}
