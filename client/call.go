package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func (c *clientImpl) callTool(ctx context.Context, name string, args any) (*Call, error) {
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	fallback, err := c.tw.prepareCall(ctx, params)
	if err != nil {
		return nil, err
	}
	res, err := c.cs.CallTool(ctx, params)
	if err != nil {
		return nil, err
	}
	raw, isTask := res.Meta[metaTaskHandle]
	if !isTask {
		return &Call{Result: res, Fallback: fallback}, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("calling %s: %w", name, err)
	}
	st, err := parseHandle(b)
	if err != nil {
		return nil, fmt.Errorf("calling %s: %w", name, err)
	}
	c.log.Info("task created", "task", st.ID, "tool", name, "wire", c.wire)
	call := &Call{Task: st}
	if c.journal != nil {
		entry := JournalEntry{TaskID: st.ID, Target: c.target, Wire: c.wire, Tool: name, CreatedAt: st.CreatedAt}
		if entry.CreatedAt.IsZero() {
			entry.CreatedAt = time.Now().UTC()
		}
		if err := c.journal.add(entry); err != nil {
			// The task exists: hand it out with the error, so that the host
			// can still wait for it (and must not call the tool again).
			return call, fmt.Errorf("task %s of %s was created but not recorded in the journal: %w", st.ID, name, err)
		}
	}
	return call, nil
}
