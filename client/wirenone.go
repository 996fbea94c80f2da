package client

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wireNone is the strategy of the MCP revisions without tasks (before
// 2025-11-25): every call runs plainly and no task operation exists.
type wireNone struct {
	version string // the negotiated revision
}

func (wireNone) tasksSupported() bool      { return false }
func (wireNone) taskSupport(string) string { return "" }
func (wireNone) forget(string)             {}

func (n wireNone) prepareCall(context.Context, *mcp.CallToolParams) (string, bool, error) {
	return fmt.Sprintf("the server speaks MCP %s, which has no tasks", n.version), false, nil
}

func (n wireNone) get(context.Context, string) (*TaskStatus, error) {
	return nil, fmt.Errorf("tasks/get on MCP %s: %w", n.version, ErrUnsupported)
}

func (n wireNone) cancel(context.Context, string) (*TaskStatus, error) {
	return nil, fmt.Errorf("tasks/cancel on MCP %s: %w", n.version, ErrUnsupported)
}

func (n wireNone) deleteAdvertised() (bool, string) {
	return false, "MCP " + n.version + " has no tasks"
}

func (n wireNone) list(context.Context, string) ([]TaskStatus, string, error) {
	return nil, "", fmt.Errorf("tasks/list on MCP %s: %w", n.version, ErrUnsupported)
}

func (n wireNone) wait(*waiter) (*mcp.CallToolResult, error) {
	return nil, fmt.Errorf("waiting for a task on MCP %s: %w", n.version, ErrUnsupported)
}
