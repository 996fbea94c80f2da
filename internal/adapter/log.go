package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MethodResourcesRead is the method of a resources/read, as the audit
// trail names a denied read of a task's log.
const MethodResourcesRead = "resources/read"

// LogTemplate is the resource template of the task logs, registered on
// the server when its store keeps them.
func LogTemplate() *mcp.ResourceTemplate {
	return &mcp.ResourceTemplate{
		URITemplate: wire.LogURITemplate,
		Name:        "task-log",
		Title:       "Task log",
		Description: "The log of one of your tasks (a command's output, an upstream's log messages), " +
			"one line per line, read on from a cursor: _meta " + wire.MetaLog + ".next. Linked from tasks/get.",
		MIMEType: "text/plain",
	}
}

// WithLog returns meta with the link to the task's log under
// wire.MetaLog, for the answers of tasks/get of both wires, once the
// task logged a line: meta itself otherwise, or when the log cannot be
// read (logged: the task's own answer must not fail for its log).
func (c *Core) WithLog(ctx context.Context, t *task.Task, meta mcp.Meta) mcp.Meta {
	p, err := c.eng.LogPosition(ctx, t.ID)
	if err != nil {
		if !abandoned(ctx, err) {
			c.Log().Warn("reading the task's log position for tasks/get", "task", t.ID, "err", err)
		}
		return meta
	}
	return WithLogOf(t.ID, p, meta)
}

// WithLogOf returns meta with the link to the log of the task id, whose
// position p was already read (e.g. by engine.Engine.View), under
// wire.MetaLog, as [Core.WithLog] does: meta itself when p is nil or the
// task logged no line.
func WithLogOf(id task.ID, p *store.LogPage, meta mcp.Meta) mcp.Meta {
	if p == nil || p.Last == 0 {
		return meta
	}
	if meta == nil {
		meta = mcp.Meta{}
	}
	meta[wire.MetaLog] = wire.LogLink{URI: wire.LogURI(string(id)), Last: p.Last, Dropped: p.Dropped}
	return meta
}

// WithView returns meta with what v, a task's view read by
// engine.Engine.View, holds beside the task: its latest operation (see
// [WithOperationOf]), the link to its log (see [WithLogOf]) and the host
// correlation keys of its call (see [WithCorrelationOf]), and how it
// ended once it has (wire.MetaOutcome).
func (c *Core) WithView(v *store.View, meta mcp.Meta) mcp.Meta {
	meta = c.WithGate(v.Task, c.withLinks(v.Task, WithCorrelationOf(v.Task, WithLogOf(v.Task.ID, v.Log, WithOperationOf(v.Operation, meta)))))
	if o := v.Task.Outcome(); o != "" {
		if meta == nil {
			meta = mcp.Meta{}
		}
		meta[wire.MetaOutcome] = string(o)
	}
	return meta
}

// withLinks returns meta with the links t's tool gives about it under
// wire.MetaLinks: meta itself when there are none.
func (c *Core) withLinks(t *task.Task, meta mcp.Meta) mcp.Meta {
	links := c.Links(t)
	if len(links) == 0 {
		return meta
	}
	if meta == nil {
		meta = mcp.Meta{}
	}
	meta[wire.MetaLinks] = links
	return meta
}

// Links returns the links t's tool gives about it (Config.Links), nil
// for none. Only http and https URLs are kept.
func (c *Core) Links(t *task.Task) map[string]string {
	if t == nil || c.links == nil {
		return nil
	}
	var out map[string]string
	for name, u := range c.links(t) {
		if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = u
	}
	return out
}

// WithEvidence returns meta with the latest operation and the log link of
// t, a task owner may see that was read already (e.g. by a change feed),
// read in one round trip (engine.Engine.View, with no payload): meta
// itself when they cannot be read (the task's own answer must not fail
// for its evidence), the failure logged unless the task is gone
// meanwhile (deleted, expired).
func (c *Core) WithEvidence(ctx context.Context, owner task.Owner, t *task.Task, meta mcp.Meta) mcp.Meta {
	v, err := c.eng.View(ctx, owner, t.ID, store.ViewOptions{})
	if err != nil {
		if !errors.Is(err, engine.ErrNotFound) && !abandoned(ctx, err) {
			c.Log().Warn("reading the task's latest operation and log position", "task", t.ID, "err", err)
		}
		return meta
	}
	return c.WithView(v, meta)
}

// parseLogURI reads a task log's URI: the task ID and the query.
func parseLogURI(raw string) (task.ID, url.Values, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "mcptask" || u.Host != "tasks" {
		return "", nil, false
	}
	rest, ok := strings.CutSuffix(u.Path, "/log")
	if !ok || !strings.HasPrefix(rest, "/") {
		return "", nil, false
	}
	id, err := task.ParseID(rest[1:])
	if err != nil {
		return "", nil, false
	}
	return id, u.Query(), true
}

// ReadLogResource answers a resources/read of a task's log (the
// handler of [LogTemplate]) for the requester, as tasks/get does: the
// log of a task the requester may not see (another owner's, an expired
// or an unknown one) is answered exactly as an unknown resource, and the
// denial audited. The result's _meta carries the page's position
// (wire.LogPage) under wire.MetaLog; it may not be cached by anyone
// else than the requester, and is stale at once.
func (c *Core) ReadLogResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	// A task's resources are read at the tasks/* request rate.
	if err := c.AllowRequest(ctx, MethodResourcesRead, req); err != nil {
		return nil, err
	}
	raw := req.Params.URI
	id, q, ok := parseLogURI(raw)
	if !ok {
		return nil, mcp.ResourceNotFoundError(raw)
	}
	after, limit := int64(0), wire.LogPageLines
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, InvalidParams("invalid cursor " + strconv.Quote(v) + ": give the next of a previous page (a sequence number), or none")
		}
		after = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, InvalidParams("invalid limit " + strconv.Quote(v) + ": give a number of lines")
		}
		limit = min(n, store.MaxLogReadLines)
	}
	format := q.Get("format")
	if format != "" && format != "text" && format != "json" {
		return nil, InvalidParams("invalid format " + strconv.Quote(format) + ": give text or json")
	}
	owner := c.Requester(ctx, req)
	p, t, err := c.eng.ReadLog(ctx, owner, id, after, limit)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		c.auditDenied(ctx, MethodResourcesRead, owner, id, err)
		return nil, mcp.ResourceNotFoundError(raw)
	case err != nil:
		return nil, c.EngineError(ctx, MethodResourcesRead, owner, id, err)
	}
	contents := &mcp.ResourceContents{URI: raw, MIMEType: "text/plain"}
	if format == "json" {
		v := wire.LogLines{Lines: make([]wire.LogLine, 0, len(p.Lines))}
		for _, l := range p.Lines {
			v.Lines = append(v.Lines, wire.LogLine{Seq: l.Seq, Time: l.Time.UTC().Format(time.RFC3339Nano), Stream: l.Stream, Text: l.Text})
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, InternalError("encoding the log")
		}
		contents.MIMEType, contents.Text = "application/json", string(b)
	} else {
		var b strings.Builder
		for _, l := range p.Lines {
			b.WriteString(l.Text)
			b.WriteByte('\n')
		}
		contents.Text = b.String()
	}
	res := &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{contents}}
	res.CacheScope = "private"
	res.Meta = mcp.Meta{wire.MetaLog: wire.LogPage{
		Next: p.Next, Last: p.Last, Missed: p.Missed, Dropped: p.Dropped, More: p.More, Status: string(t.Status),
	}}
	return res, nil
}
