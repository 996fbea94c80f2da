package client

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestWireStrategyPerRevision checks which strategy each negotiated
// revision gets, and that a revision without tasks runs every call plainly
// and refuses every task operation with ErrUnsupported.
func TestWireStrategyPerRevision(t *testing.T) {
	withExt := &mcp.InitializeResult{Capabilities: &mcp.ServerCapabilities{Extensions: map[string]any{ext2026.ExtensionID: map[string]any{}}}}
	for _, tc := range []struct {
		wire  string
		init  *mcp.InitializeResult
		check func(wireStrategy) bool
	}{
		{Wire20260728, withExt, func(s wireStrategy) bool { w, ok := s.(*wire2026); return ok && w.extension }},
		{Wire20260728, &mcp.InitializeResult{}, func(s wireStrategy) bool { w, ok := s.(*wire2026); return ok && !w.extension }},
		{"2027-01-01", withExt, func(s wireStrategy) bool { _, ok := s.(*wire2026); return ok }},
		{Wire20251125, &mcp.InitializeResult{}, func(s wireStrategy) bool { _, ok := s.(*wire2025); return ok }},
		{"2025-06-18", &mcp.InitializeResult{}, func(s wireStrategy) bool { _, ok := s.(wireNone); return ok }},
	} {
		c := &clientImpl{wire: tc.wire, e: newEdge()}
		if s := newWireStrategy(c, tc.init); !tc.check(s) {
			t.Errorf("%s: strategy %T", tc.wire, s)
		}
	}

	ctx := context.Background()
	s := newWireStrategy(&clientImpl{wire: "2025-06-18"}, &mcp.InitializeResult{})
	if fb, resendable, err := s.prepareCall(ctx, &mcp.CallToolParams{Name: "t"}); err != nil || resendable || !strings.Contains(fb, "MCP 2025-06-18, which has no tasks") {
		t.Errorf("prepareCall: %q %v %v", fb, resendable, err)
	}
	if s.tasksSupported() || s.taskSupport("t") != "" {
		t.Error("a revision without tasks reports tasks")
	}
	_, err1 := s.get(ctx, "x")
	_, err2 := s.cancel(ctx, "x")
	_, _, err3 := s.list(ctx, "")
	_, err4 := s.wait(&waiter{id: "x"})
	for _, err := range []error{err1, err2, err3, err4} {
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("want ErrUnsupported, got %v", err)
		}
	}
}
