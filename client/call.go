package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func (c *clientImpl) callTool(ctx context.Context, name string, args any) (*Call, error) {
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	fallback, err := c.negotiate(ctx, params)
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

// negotiate decides whether a call may run as a task. On 2025-11-25 it
// asks for one (params.task, through the edge) when the server and the
// tool support it; on 2026-07-28 the extension declared in every request
// lets the server decide. It returns why the call runs plainly, "" when
// the client accepts a task.
func (c *clientImpl) negotiate(ctx context.Context, params *mcp.CallToolParams) (string, error) {
	switch {
	case c.modern():
		if !c.extension {
			return fmt.Sprintf("the server does not advertise the %s extension", ext2026.ExtensionID), nil
		}
		return "", nil
	case c.wire != Wire20251125:
		return fmt.Sprintf("the server speaks MCP %s, which has no tasks", c.wire), nil
	}
	if call, _, _ := c.e.serverTasks(); !call {
		return "the server has no tasks capability for tools/call", nil
	}
	support, err := c.toolSupport(ctx, params.Name)
	if err != nil {
		return "", err
	}
	switch support {
	case "optional", "required":
	case "":
		return fmt.Sprintf("the tool %q declares no execution.taskSupport", params.Name), nil
	default:
		return fmt.Sprintf("the tool %q does not support tasks (execution.taskSupport %q)", params.Name, support), nil
	}
	tk := map[string]any{}
	if c.opts.TTL > 0 {
		tk["ttl"] = max(c.opts.TTL.Milliseconds(), 1)
	}
	params.Meta = mcp.Meta{metaTaskRequest: tk}
	return "", nil
}

// toolSupport returns a tool's execution.taskSupport (2025-11-25), listing
// the tools first when the client has not seen it yet.
func (c *clientImpl) toolSupport(ctx context.Context, name string) (string, error) {
	if s, ok := c.e.toolSupport(name); ok {
		return s, nil
	}
	for _, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return "", fmt.Errorf("listing the tools to learn whether %s supports tasks: %w", name, err)
		}
	}
	s, _ := c.e.toolSupport(name)
	return s, nil
}
