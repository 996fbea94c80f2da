package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// LogLine is one line of a task's log: its sequence number, time,
// stream (stdout, stderr, log, ...) and text.
type LogLine = wire.LogLine

// LogPage is a page of a task's log (see [Client.ReadLog]).
type LogPage struct {
	// Lines are the page's lines, in order.
	Lines []LogLine
	// Next is the cursor to read on from.
	Next int64
	// Last is the sequence number of the latest line logged.
	Last int64
	// Missed is how many lines after the cursor given were dropped
	// (the log is capped) before they were read.
	Missed int64
	// Dropped is how many lines the log dropped in all.
	Dropped int64
	// More reports that more lines are there already: read on at once.
	More bool
	// Status is the task's status when the page was read.
	Status string
}

// Done reports whether the log is complete and read to its end: the task
// had ended when the page was read (its work's lines are written before
// its outcome), and no more lines follow.
func (p *LogPage) Done() bool {
	return !p.More && (p.Status == "completed" || p.Status == "failed" || p.Status == "cancelled")
}

// ReadLog reads a page of the log of the task taskID, the lines after
// the sequence number cursor (0: from the oldest line kept), at most
// limit of them (<= 0: the server's page size), with a resources/read of
// the task's log resource (wire.LogURI). Only the task's owner may read
// it: a task the requester may not see, like an unknown one, is
// ErrTaskNotFound; a server that keeps no task logs (no resources
// capability) is ErrUnsupported.
func (c *Client) ReadLog(ctx context.Context, taskID string, cursor int64, limit int) (*LogPage, error) {
	q := url.Values{"format": {"json"}}
	if cursor > 0 {
		q.Set("cursor", strconv.FormatInt(cursor, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	uri := wire.LogURI(url.PathEscape(taskID)) + "?" + q.Encode()
	res, err := onSession(ctx, c.impl, func(cs *mcp.ClientSession) (*mcp.ReadResourceResult, error) {
		if init := cs.InitializeResult(); init != nil && init.Capabilities != nil && init.Capabilities.Resources == nil {
			return nil, fmt.Errorf("the server keeps no task logs (no resources capability): %w", ErrUnsupported)
		}
		return cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	})
	switch {
	case errors.Is(err, ErrUnsupported):
		return nil, err
	case isNotFound(err):
		return nil, notFound(taskID, err)
	case err != nil:
		return nil, fmt.Errorf("reading the log of task %s: %w", taskID, err)
	}
	var page wire.LogPage
	if b, err := json.Marshal(res.Meta[wire.MetaLog]); err != nil || json.Unmarshal(b, &page) != nil || res.Meta[wire.MetaLog] == nil {
		return nil, fmt.Errorf("reading the log of task %s: the answer has no %s", taskID, wire.MetaLog)
	}
	out := &LogPage{Next: page.Next, Last: page.Last, Missed: page.Missed, Dropped: page.Dropped, More: page.More, Status: page.Status}
	if len(res.Contents) != 1 || res.Contents[0].MIMEType != "application/json" {
		return nil, fmt.Errorf("reading the log of task %s: the answer is not one application/json content", taskID)
	}
	var lines wire.LogLines
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &lines); err != nil {
		return nil, fmt.Errorf("reading the log of task %s: unreadable lines: %w", taskID, err)
	}
	out.Lines = lines.Lines
	return out, nil
}
