package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resolveResultLink returns the whole result of the task id when res is
// the server's link to it (a result larger than the server answers
// inline: _meta io.mcptask/result-link, one resource_link content), read
// with resources/read; res itself otherwise.
func (c *clientImpl) resolveResultLink(ctx context.Context, id string, res *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	if res == nil || res.Meta[wire.MetaResultLink] == nil || len(res.Content) != 1 {
		return res, nil
	}
	link, ok := res.Content[0].(*mcp.ResourceLink)
	if !ok || link.URI != wire.ResultURI(id) {
		return res, nil
	}
	read, err := onSession(ctx, c, func(cs *mcp.ClientSession) (*mcp.ReadResourceResult, error) {
		return cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: link.URI})
	})
	if err != nil {
		return nil, fmt.Errorf("task %s: reading its result at %s: %w", id, link.URI, err)
	}
	if len(read.Contents) != 1 {
		return nil, fmt.Errorf("task %s: its result at %s has %d contents, want 1", id, link.URI, len(read.Contents))
	}
	var whole mcp.CallToolResult
	if err := json.Unmarshal([]byte(read.Contents[0].Text), &whole); err != nil {
		return nil, fmt.Errorf("task %s: its result at %s is not a tool result: %w", id, link.URI, err)
	}
	return &whole, nil
}
