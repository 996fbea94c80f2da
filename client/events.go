package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mcptask/mcptask/wire/events"
	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EventSource is what a server that speaks MCP Events links a new task
// to (the eventSource of its CreateTaskResult): the event type of its
// outputs, the task, and the cursor before its first event. Pass it to
// [Client.Events] (with [EventSource.Query]) to receive what the task
// emits while it runs.
type EventSource struct {
	Name          string
	TaskID        string
	InitialCursor string
}

// Query returns the EventQuery that follows the source from its start.
func (s *EventSource) Query() EventQuery {
	return EventQuery{Name: s.Name, TaskID: s.TaskID, Cursor: s.InitialCursor}
}

// EventQuery selects the events Client.Events and Client.PollEvents
// read: an event type of the server's events/list and its arguments.
type EventQuery struct {
	// Name is the event type; empty means "task.output".
	Name string
	// TaskID and Tool narrow the events to one task, or one tool's.
	TaskID, Tool string
	// Cursor is where to continue; empty means from now.
	Cursor string
	// MaxAge skips events older than it (zero: no floor).
	MaxAge time.Duration
	// MaxEvents caps one poll's events (zero: the server's default).
	MaxEvents int
}

// Event is one event received.
type Event struct {
	// ID is the event's stable ID (dedupe on it).
	ID string
	// Name is its event type.
	Name string
	// Time is when it happened.
	Time time.Time
	// Data is its payload: for the task types, events.OutputData or
	// events.StatusData.
	Data json.RawMessage
	// Cursor, when set, is the position after it: pass it back to
	// continue.
	Cursor string
}

// EventPage is what one poll returns.
type EventPage struct {
	Events []Event
	// Cursor is where to continue.
	Cursor string
	// More says more events wait: poll again at once.
	More bool
	// Truncated says events after the cursor given were skipped (older
	// than the server's retention, or than MaxAge).
	Truncated bool
	// NextPoll is the interval the server suggests.
	NextPoll time.Duration
}

// ErrEventsUnsupported is returned when the server does not serve MCP
// Events.
var ErrEventsUnsupported = errors.New("the server does not serve MCP Events")

func (q EventQuery) params() *events.PollParams {
	name := q.Name
	if name == "" {
		name = events.TypeOutput
	}
	p := &events.PollParams{Name: name}
	if q.TaskID != "" || q.Tool != "" {
		p.Arguments, _ = json.Marshal(events.TaskArgs{TaskID: q.TaskID, Tool: q.Tool})
	}
	if q.Cursor != "" {
		c := q.Cursor
		p.Cursor = &c
	}
	if q.MaxAge > 0 {
		ms := q.MaxAge.Milliseconds()
		p.MaxAgeMs = &ms
	}
	if q.MaxEvents > 0 {
		n := q.MaxEvents
		p.MaxEvents = &n
	}
	return p
}

func toEvent(o events.Occurrence) Event {
	e := Event{ID: o.EventID, Name: o.Name, Data: o.Data}
	e.Time, _ = time.Parse(time.RFC3339Nano, o.Timestamp)
	if o.Cursor != nil {
		e.Cursor = *o.Cursor
	}
	return e
}

// eventsCall sends an events/* request and decodes its result into out.
func (c *clientImpl) eventsCall(ctx context.Context, method string, p *events.PollParams, out any) error {
	c.requestMeta(ctx, &p.Meta)
	res, err := onSession(ctx, c, func(cs *mcp.ClientSession) (*rawResult, error) {
		return mcp.CallCustomMethod[*events.PollParams, *rawResult](ctx, cs, method, p)
	})
	if err != nil {
		if we, ok := rpcError(err); ok && we.Code == -32601 {
			return fmt.Errorf("%s: %w", method, ErrEventsUnsupported)
		}
		return fmt.Errorf("%s: %w", method, err)
	}
	if err := json.Unmarshal(res.JSON, out); err != nil {
		return fmt.Errorf("%s: unreadable answer: %w", method, err)
	}
	return nil
}

// PollEvents reads one page of the events q selects (events/poll). With
// an empty q.Cursor it reads none and returns the cursor of "now".
func (c *Client) PollEvents(ctx context.Context, q EventQuery) (*EventPage, error) {
	var res events.PollResult
	if err := c.impl.eventsCall(ctx, events.MethodPoll, q.params(), &res); err != nil {
		return nil, err
	}
	p := &EventPage{More: res.HasMore, Truncated: res.Truncated, NextPoll: time.Duration(res.NextPollMs) * time.Millisecond}
	if res.Cursor != nil {
		p.Cursor = *res.Cursor
	}
	for _, o := range res.Events {
		p.Events = append(p.Events, toEvent(o))
	}
	return p, nil
}

// minEventPoll is the floor of the interval between polls.
const minEventPoll = 250 * time.Millisecond

// Events follows the events q selects, calling fn with each in order,
// until ctx ends, fn returns an error (returned), or, for a query of one
// task, the task has ended and its last events are delivered. It follows
// a push stream (events/stream) on a Streamable HTTP server, and polls
// otherwise or when the stream fails, from the last cursor it got: an
// event may then be given twice (dedupe on Event.ID), never skipped
// unless the server says it truncated.
func (c *Client) Events(ctx context.Context, q EventQuery, fn func(Event) error) error {
	if q.Cursor == "" {
		p, err := c.PollEvents(ctx, EventQuery{Name: q.Name, TaskID: q.TaskID, Tool: q.Tool})
		if err != nil {
			return err
		}
		q.Cursor = p.Cursor
	}
	if l := c.impl.listen; l != nil {
		cursor, ended, err := l.streamEvents(ctx, c.impl, q, fn)
		var fnErr *callbackError
		switch {
		case errors.As(err, &fnErr):
			return fnErr.err
		case ended || ctx.Err() != nil:
			return ctx.Err()
		}
		if cursor != "" {
			q.Cursor = cursor
		}
		c.impl.log.Debug("events: the stream failed; polling", "err", err)
	}
	return c.pollEvents(ctx, q, fn)
}

// callbackError carries fn's error out of a stream.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// pollEvents is Events by polling.
func (c *Client) pollEvents(ctx context.Context, q EventQuery, fn func(Event) error) error {
	for {
		p, err := c.PollEvents(ctx, q)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, ErrEventsUnsupported) || refused(err) {
				return err // asking again would get the same answer
			}
			c.impl.log.Debug("events: a poll failed; trying again", "err", err)
			p = &EventPage{Cursor: q.Cursor, NextPoll: time.Second}
		}
		for _, e := range p.Events {
			if err := fn(e); err != nil {
				return err
			}
		}
		q.Cursor = p.Cursor
		if p.More {
			continue
		}
		if q.TaskID != "" && len(p.Events) == 0 {
			st, err := c.Get(ctx, q.TaskID)
			if errors.Is(err, ErrTaskNotFound) || (err == nil && isTerminal(st.Status)) {
				// More reads drain what it wrote before it ended.
				for {
					last, err := c.PollEvents(ctx, q)
					if err != nil {
						return nil
					}
					for _, e := range last.Events {
						if err := fn(e); err != nil {
							return err
						}
					}
					q.Cursor = last.Cursor
					if !last.More {
						return nil
					}
				}
			}
		}
		t := time.NewTimer(max(p.NextPoll, minEventPoll))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func isTerminal(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// streamEvents follows q on an events/stream POST stream. It returns the
// last cursor it got, and ended when the server ended the stream (the
// task of a task-scoped stream ended).
func (l *listener) streamEvents(ctx context.Context, c *clientImpl, q EventQuery, fn func(Event) error) (cursor string, ended bool, err error) {
	rid := l.ids.Add(1)
	p := q.params()
	meta := map[string]any{}
	if l.wire == Wire20260728 {
		// The stateless wire's per-request _meta; a 2025-11-25 request
		// rides on its session instead.
		meta = map[string]any{
			ext2026.MetaProtocolVersion:          l.wire,
			"io.modelcontextprotocol/clientInfo": l.info,
			ext2026.MetaClientCapabilities: map[string]any{
				"extensions": map[string]any{ext2026.ExtensionID: map[string]any{}, events.ExtensionID: map[string]any{}},
			},
		}
	}
	c.requestMeta(ctx, &p.Meta)
	for k, v := range p.Meta {
		meta[k] = v
	}
	p.Meta = meta
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rid, "method": events.MethodStream, "params": p})
	if err != nil {
		return "", false, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, l.url, bytes.NewReader(body))
	if err != nil {
		return "", false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Method", events.MethodStream)
	if l.wire == Wire20260728 {
		req.Header.Set("Mcp-Protocol-Version", l.wire)
	} else if cs := c.session(); cs != nil && cs.ID() != "" {
		req.Header.Set("Mcp-Protocol-Version", l.wire)
		req.Header.Set("Mcp-Session-Id", cs.ID())
	}
	resp, err := l.hc.Do(req)
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return "", false, fmt.Errorf("events/stream refused (HTTP %d): %s", resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	// A stream with neither event nor heartbeat for this long is dead.
	const silence = 75 * time.Second
	alive := time.AfterFunc(silence, cancel)
	defer alive.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		alive.Reset(silence)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int64  `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(data)), &m) != nil {
			continue
		}
		switch {
		case m.Method == events.NotifyEvent:
			var o events.Occurrence
			if json.Unmarshal(m.Params, &o) != nil {
				continue
			}
			e := toEvent(o)
			if err := fn(e); err != nil {
				return cursor, false, &callbackError{err}
			}
			if e.Cursor != "" {
				cursor = e.Cursor
			}
		case m.Method == events.NotifyActive || m.Method == events.NotifyHeartbeat:
			var h struct {
				Cursor *string `json:"cursor"`
			}
			if json.Unmarshal(m.Params, &h) == nil && h.Cursor != nil {
				cursor = *h.Cursor
			}
		case m.Method == "" && m.Error != nil:
			if m.Error.Code == -32601 {
				return cursor, false, ErrEventsUnsupported
			}
			return cursor, false, fmt.Errorf("events/stream refused: %s", m.Error.Message)
		case m.Method == "" && m.Result != nil:
			return cursor, true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return cursor, false, err
	}
	return cursor, false, errors.New("events/stream ended without its result")
}

// eventSourceOf reads the eventSource of a task handle, nil when it has
// none.
func eventSourceOf(handle []byte) *EventSource {
	var h struct {
		EventSource *events.TaskEventSource `json:"eventSource"`
	}
	if json.Unmarshal(handle, &h) != nil || h.EventSource == nil || h.EventSource.Name == "" {
		return nil
	}
	return &EventSource{Name: h.EventSource.Name, TaskID: h.EventSource.Input.TaskID, InitialCursor: h.EventSource.InitialCursor}
}

// refused reports whether err is the server's refusal of the query
// itself (invalid params, unknown event type, forbidden, unsupported):
// asking again gets the same.
func refused(err error) bool {
	we, ok := rpcError(err)
	if !ok {
		return false
	}
	switch we.Code {
	case -32602, events.CodeNotFound, events.CodeForbidden, events.CodeUnsupported:
		return true
	}
	return false
}
