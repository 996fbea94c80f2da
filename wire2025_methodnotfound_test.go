package mcptask_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// Test2025MethodNotFoundMessages: the -32601 answers of the 2025-11-25
// wire reach the client with mcptask's own message over Streamable HTTP
// (the go-sdk would replace it with `method not found: "tools/call"`).
func Test2025MethodNotFoundMessages(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), &gates{})
	ctx := ctxT(t)
	sess := &wiretest.Session{URL: s.url}
	if _, err := sess.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method string
		params map[string]any
		want   string
	}{
		{"tools/call", map[string]any{"name": "only_task", "arguments": map[string]any{}}, `the tool "only_task" must be called as a task`},
		{"tools/call", map[string]any{"name": "plain", "arguments": map[string]any{}, "task": map[string]any{}}, `the tool "plain" does not support task-augmented calls`},
		{"tasks/update", map[string]any{"taskId": "x", "inputResponses": map[string]any{}}, "belongs to the 2026-07-28 tasks extension"},
	} {
		_, err := sess.Call(ctx, c.method, c.params)
		if err == nil || !strings.Contains(err.Error(), "-32601") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v, want -32601 %q", c.method, c.params, err, c.want)
		}
	}
}
