package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ResultTemplate is the resource template of the task results answered
// as links (see Config.ResultLinkBytes).
func ResultTemplate() *mcp.ResourceTemplate {
	return &mcp.ResourceTemplate{
		URITemplate: wire.ResultURITemplate,
		Name:        "task-result",
		Title:       "Task result",
		Description: "The whole result of one of your tasks (its CallToolResult as JSON), when it was too large to answer inline.",
		MIMEType:    "application/json",
	}
}

// Presented returns t as the task methods answer it: t itself, or, when
// t completed with a result larger than Config.ResultLinkBytes, a copy
// whose result is a link to its result resource (wire.ResultURI): one
// resource_link content, the original isError, and _meta
// wire.MetaResultLink. The stored result is unchanged. The original
// isError is the result's top-level member, as task.ToolError reads it
// (the 2025-11-25 wire's status too).
func (c *Core) Presented(t *task.Task) *task.Task {
	if c.resultLink <= 0 || t.Status != task.Completed || len(t.Result) <= c.resultLink {
		return t
	}
	// Only the top-level isError is read: the result, above the link
	// threshold, is not decoded.
	isError := task.ToolError(t.Result)
	uri := wire.ResultURI(string(t.ID))
	size := int64(len(t.Result))
	link := &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.ResourceLink{URI: uri, Name: "result", MIMEType: "application/json", Size: &size,
			Description: fmt.Sprintf("The task's result, %d bytes: read it with resources/read.", size)}},
		IsError: isError,
	}
	link.Meta = mcp.Meta{wire.MetaResultLink: wire.ResultLink{URI: uri, Size: len(t.Result)}}
	b, err := json.Marshal(link)
	if err != nil {
		return t
	}
	cp := *t
	cp.Result = b
	return &cp
}

// parseResultURI reads a task result's URI.
func parseResultURI(raw string) (task.ID, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "mcptask" || u.Host != "tasks" || u.RawQuery != "" {
		return "", false
	}
	rest, ok := strings.CutSuffix(u.Path, "/result")
	if !ok || !strings.HasPrefix(rest, "/") {
		return "", false
	}
	id, err := task.ParseID(rest[1:])
	return id, err == nil
}

// ReadResultResource answers a resources/read of a task's result (the
// handler of [ResultTemplate]) for the requester, as tasks/get does: a
// task the requester may not see is an unknown resource (the denial
// audited), and so is a task without a result (not completed). The
// content is the stored result, bounded by the engine's result cap, with
// resultType "complete" when read on the 2026-07-28 wire.
func (c *Core) ReadResultResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	// A task's resources are read at the tasks/* request rate.
	if err := c.AllowRequest(ctx, MethodResourcesRead, req); err != nil {
		return nil, err
	}
	raw := req.Params.URI
	id, ok := parseResultURI(raw)
	if !ok {
		return nil, mcp.ResourceNotFoundError(raw)
	}
	owner := c.Requester(ctx, req)
	t, err := c.eng.Get(ctx, owner, id)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		c.auditDenied(ctx, MethodResourcesRead, owner, id, err)
		return nil, mcp.ResourceNotFoundError(raw)
	case err != nil:
		return nil, c.EngineError(ctx, MethodResourcesRead, owner, id, err)
	case t.Status != task.Completed:
		return nil, mcp.ResourceNotFoundError(raw)
	}
	c.AuditOutcome(ctx, MethodResourcesRead, owner, t)
	text := t.Result
	if ext2026.UsesWire(req.Params.GetMeta()) {
		// Read on the 2026-07-28 wire, the result is that revision's
		// CallToolResult, as tasks/get would have inlined it.
		text = wire.WithResultType(text, ext2026.ResultTypeComplete)
	}
	res := &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: raw, MIMEType: "application/json", Text: string(text)}}}
	res.CacheScope = "private"
	return res, nil
}
