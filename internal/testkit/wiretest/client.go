// Package wiretest is a small raw JSON-RPC client of the 2026-07-28 wire over
// Streamable HTTP, for tests and benchmarks that must see exactly what
// travels on the wire (headers, HTTP statuses, error objects).
package wiretest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
)

// Client posts JSON-RPC requests to one MCP endpoint.
type Client struct {
	// URL is the endpoint, e.g. http://127.0.0.1:port/mcp.
	URL string
	// HTTP is the HTTP client; nil means a client with keep-alive.
	HTTP *http.Client
	// Tasks, if true, declares the tasks extension in every request's
	// per-request capabilities.
	Tasks bool
	// Header is added to every request.
	Header http.Header
	// Events, if true, declares the MCP Events extension in every
	// request's per-request capabilities.
	Events bool

	id atomic.Int64
}

// Response is one JSON-RPC response and the HTTP status it came with.
type Response struct {
	HTTPStatus int
	Result     json.RawMessage
	Error      *Error
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// Meta returns the per-request _meta of the 2026-07-28 wire.
func (c *Client) Meta() map[string]any {
	caps := map[string]any{}
	exts := map[string]any{}
	if c.Tasks {
		exts[ext2026.ExtensionID] = map[string]any{}
	}
	if c.Events {
		exts["io.modelcontextprotocol/events"] = map[string]any{}
	}
	if len(exts) > 0 {
		caps["extensions"] = exts
	}
	return map[string]any{
		ext2026.MetaProtocolVersion:          ext2026.Version,
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "wiretest", "version": "1"},
		ext2026.MetaClientCapabilities:       caps,
	}
}

// Call sends method with params (a map; _meta is added) and returns the
// response. name is the Mcp-Name header ("" derives it from params).
func (c *Client) Call(ctx context.Context, method string, params map[string]any, hdr http.Header) (*Response, error) {
	if params == nil {
		params = map[string]any{}
	}
	if _, ok := params["_meta"]; !ok {
		params["_meta"] = c.Meta()
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id.Add(1), "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", ext2026.Version)
	req.Header.Set("Mcp-Method", method)
	switch {
	case params["taskId"] != nil:
		req.Header.Set("Mcp-Name", fmt.Sprint(params["taskId"]))
	case params["name"] != nil:
		req.Header.Set("Mcp-Name", fmt.Sprint(params["name"]))
	case params["uri"] != nil: // resources/read
		req.Header.Set("Mcp-Name", fmt.Sprint(params["uri"]))
	}
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	msg, err := lastMessage(resp.Header.Get("Content-Type"), raw)
	if err != nil {
		return nil, fmt.Errorf("HTTP %d: %w: %q", resp.StatusCode, err, raw)
	}
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *Error          `json:"error"`
	}
	if err := json.Unmarshal(msg, &env); err != nil {
		return nil, fmt.Errorf("HTTP %d: decoding %q: %w", resp.StatusCode, msg, err)
	}
	if err := checkEmbedded(method, env.Result); err != nil {
		return nil, fmt.Errorf("%s answered %w", method, err)
	}
	return &Response{HTTPStatus: resp.StatusCode, Result: env.Result, Error: env.Error}, nil
}

// checkEmbedded checks the tool results in a successful answer against
// the 2026-07-28 schema, as that revision's clients validate them: a
// complete tools/call answer, and a completed task's result in a
// tasks/get answer. Every test that uses a Client checks them so.
func checkEmbedded(method string, result json.RawMessage) error {
	if len(result) == 0 {
		return nil
	}
	var probe struct {
		ResultType string          `json:"resultType"`
		Status     string          `json:"status"`
		Result     json.RawMessage `json:"result"`
	}
	if json.Unmarshal(result, &probe) != nil {
		return nil // the caller's decoding reports it
	}
	switch {
	case method == "tools/call" && probe.ResultType != ext2026.ResultTypeTask:
		return CheckCallToolResult(result)
	case method == wire.MethodTasksGet && probe.Status == "completed":
		return CheckCallToolResult(probe.Result)
	}
	return nil
}

// lastMessage extracts the JSON-RPC response from a JSON or SSE body.
func lastMessage(ctype string, raw []byte) ([]byte, error) {
	if !strings.HasPrefix(ctype, "text/event-stream") {
		return raw, nil
	}
	var last []byte
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20) // grows as needed
	for sc.Scan() {
		line := sc.Bytes()
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			d = bytes.TrimSpace(d)
			if bytes.Contains(d, []byte(`"result"`)) || bytes.Contains(d, []byte(`"error"`)) {
				last = append([]byte(nil), d...)
			}
		}
	}
	if last == nil {
		return nil, fmt.Errorf("no JSON-RPC response in the event stream")
	}
	return last, nil
}

// Result calls method and decodes a successful result into out, or
// returns the JSON-RPC error.
func (c *Client) Result(ctx context.Context, method string, params map[string]any, out any) error {
	r, err := c.Call(ctx, method, params, nil)
	if err != nil {
		return err
	}
	if r.Error != nil {
		return r.Error
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.Result, out)
}

// Task is the task object of the 2026-07-28 wire.
type Task struct {
	ResultType     string                     `json:"resultType"`
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          *int64                     `json:"ttlMs"`
	PollIntervalMs int64                      `json:"pollIntervalMs"`
	Result         json.RawMessage            `json:"result"`
	Error          *Error                     `json:"error"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
	Content        json.RawMessage            `json:"content"`
	IsError        bool                       `json:"isError"`
	Meta           map[string]json.RawMessage `json:"_meta"`
}

// CallTool calls a tool and decodes the answer (a task handle or a result).
func (c *Client) CallTool(ctx context.Context, name string, args map[string]any) (*Task, error) {
	var t Task
	err := c.Result(ctx, "tools/call", map[string]any{"name": name, "arguments": args}, &t)
	return &t, err
}

// Get fetches a task.
func (c *Client) Get(ctx context.Context, id string) (*Task, error) {
	var t Task
	err := c.Result(ctx, wire.MethodTasksGet, map[string]any{"taskId": id}, &t)
	return &t, err
}

// WaitFor polls a task until cond holds or ctx is done, at the task's
// suggested interval (capped at 50ms to keep tests quick).
func (c *Client) WaitFor(ctx context.Context, id string, cond func(*Task) bool) (*Task, error) {
	for {
		t, err := c.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if cond(t) {
			return t, nil
		}
		d := min(time.Duration(t.PollIntervalMs)*time.Millisecond, 50*time.Millisecond)
		select {
		case <-ctx.Done():
			return t, fmt.Errorf("task %s still %s: %w", id, t.Status, ctx.Err())
		case <-time.After(d):
		}
	}
}

// Terminal reports whether a task is in a final status.
func Terminal(t *Task) bool {
	return t.Status == "completed" || t.Status == "failed" || t.Status == "cancelled"
}
