package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/httpguard"
)

// Client is a lean client of the 2026-07-28 wire for load: the request
// bodies are encoded once, responses are checked with byte searches rather
// than decoded, so that as little as possible of the measured time (and of
// the CPU shared with an in-process server) goes to the client. It is safe
// for concurrent use.
type Client struct {
	url       string
	requester string
	hc        *http.Client
	tr        *http.Transport
	bufs      sync.Pool

	plainBody, createBody []byte
	plainHdr, createHdr   http.Header
}

// ClientOptions configures [NewClient].
type ClientOptions struct {
	// Conns is the number of keep-alive connections to keep open: at
	// least the number of concurrent callers.
	Conns int
	// PlainTool and PlainArgs are the tool called by [Client.Plain]
	// (a tool without task support); defaults: [PlainTool], {}.
	PlainTool string
	PlainArgs json.RawMessage
	// TaskTool and TaskArgs are the tool called by [Client.Create] (a tool
	// with task support); defaults: [TaskTool], {}.
	TaskTool string
	TaskArgs json.RawMessage
	// Requester, if set, is sent in the [RequesterHeader] header of every
	// request: to a server started with [ServerOptions].RequesterHeader,
	// the client is then the requester "loadgen:"+Requester. Empty sends
	// no such header.
	Requester string
}

// meta is the per-request _meta of the 2026-07-28 wire, declaring the
// tasks extension.
const meta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"mcptask-load","version":"1"},` +
	`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// NewClient returns a client of the MCP endpoint url.
func NewClient(url string, o ClientOptions) (*Client, error) {
	if o.Conns <= 0 {
		o.Conns = 1
	}
	if o.PlainTool == "" {
		o.PlainTool = PlainTool
	}
	if o.TaskTool == "" {
		o.TaskTool = TaskTool
	}
	if len(o.PlainArgs) == 0 {
		o.PlainArgs = json.RawMessage(`{}`)
	}
	if len(o.TaskArgs) == 0 {
		o.TaskArgs = json.RawMessage(`{}`)
	}
	for _, a := range []json.RawMessage{o.PlainArgs, o.TaskArgs} {
		if !json.Valid(a) || !bytes.HasPrefix(bytes.TrimSpace(a), []byte("{")) {
			return nil, fmt.Errorf("tool arguments %s are not a JSON object", a)
		}
	}
	tr := LoopbackTransport(o.Conns)
	c := &Client{
		url:       url,
		requester: o.Requester,
		tr:        tr,
		hc: &http.Client{
			Transport: tr,
			Timeout:   time.Minute,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return errors.New("the server answered with a redirect: not followed")
			},
		},
		bufs:       sync.Pool{New: func() any { return new(bytes.Buffer) }},
		plainBody:  callBody(o.PlainTool, o.PlainArgs),
		createBody: callBody(o.TaskTool, o.TaskArgs),
	}
	c.plainHdr = c.header("tools/call", o.PlainTool)
	c.createHdr = c.header("tools/call", o.TaskTool)
	return c, nil
}

func callBody(tool string, args json.RawMessage) []byte {
	name, _ := json.Marshal(tool)
	return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":` + string(name) +
		`,"arguments":` + string(args) + `,"_meta":` + meta + `}}`)
}

func (c *Client) header(method, name string) http.Header {
	h := http.Header{
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {"2026-07-28"},
		"Mcp-Method":           {method},
		"Mcp-Name":             {name},
	}
	if c.requester != "" {
		h.Set(RequesterHeader, c.requester)
	}
	return h
}

// Close closes the client's idle connections.
func (c *Client) Close() { c.tr.CloseIdleConnections() }

// post sends one request and passes the JSON-RPC message of the answer
// (from a JSON or an event-stream body) to check, which must not retain it.
func (c *Client) post(ctx context.Context, body []byte, hdr http.Header, check func(msg []byte) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = hdr // read-only: shared by concurrent requests
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	buf := c.bufs.Get().(*bytes.Buffer)
	defer c.bufs.Put(buf)
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	raw := buf.Bytes()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, raw)
	}
	msg := raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msg = sseData(raw)
	}
	if msg == nil {
		return fmt.Errorf("no JSON-RPC message in %.300q", raw)
	}
	if !bytes.Contains(msg, []byte(`"result":`)) {
		if bytes.Contains(msg, limitCode) && bytes.Contains(msg, rateLimited) {
			return fmt.Errorf("%w: %.300s", ErrRateLimited, msg)
		}
		return fmt.Errorf("not a result: %.300s", msg)
	}
	return check(msg)
}

// sseData returns the data of the last event of an event stream that
// carries a result or an error.
func sseData(raw []byte) []byte {
	var last []byte
	for line := range bytes.Lines(raw) {
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			d = bytes.TrimSpace(d)
			if bytes.Contains(d, []byte(`"result"`)) || bytes.Contains(d, []byte(`"error"`)) {
				last = d
			}
		}
	}
	return last
}

// ErrRateLimited is the error of a request the server refused with
// mcptask's CodeLimitExceeded and reason rate_limited.
var ErrRateLimited = errors.New("refused: rate_limited")

var (
	limitCode      = []byte(`"code":` + strconv.Itoa(mcptask.CodeLimitExceeded))
	rateLimited    = []byte(`"reason":"` + mcptask.ReasonRateLimited + `"`)
	resultTask     = []byte(`"resultType":"task"`)
	resultComplete = []byte(`"resultType":"complete"`)
	isError        = []byte(`"isError":true`)
	taskIDKey      = []byte(`"taskId":"`)
	statusKey      = []byte(`"status":"`)
)

// Plain calls the tool without task support; its answer must be a
// successful, synchronous result.
func (c *Client) Plain(ctx context.Context) error {
	return c.post(ctx, c.plainBody, c.plainHdr, func(msg []byte) error {
		if bytes.Contains(msg, resultTask) || bytes.Contains(msg, isError) {
			return fmt.Errorf("plain call: unexpected answer %.300s", msg)
		}
		return nil
	})
}

// Create calls the tool with task support, declaring the tasks extension,
// and returns the ID of the task created.
func (c *Client) Create(ctx context.Context) (string, error) {
	var id string
	err := c.post(ctx, c.createBody, c.createHdr, func(msg []byte) error {
		if !bytes.Contains(msg, resultTask) {
			return fmt.Errorf("create: not a task handle: %.300s", msg)
		}
		v, ok := field(msg, taskIDKey)
		if !ok || v == "" {
			return fmt.Errorf("create: no taskId in %.300s", msg)
		}
		id = v
		return nil
	})
	return id, err
}

// Get fetches a task with tasks/get and returns its status.
func (c *Client) Get(ctx context.Context, id string) (string, error) {
	quoted, err := json.Marshal(id)
	if err != nil {
		return "", err
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":` + string(quoted) + `,"_meta":` + meta + `}}`)
	var status string
	err = c.post(ctx, body, c.header("tasks/get", id), func(msg []byte) error {
		if !bytes.Contains(msg, resultComplete) {
			return fmt.Errorf("tasks/get: unexpected answer %.300s", msg)
		}
		v, ok := field(msg, statusKey)
		if !ok {
			return fmt.Errorf("tasks/get: no status in %.300s", msg)
		}
		status = v
		return nil
	})
	return status, err
}

// field returns the string value that follows key (which ends with the
// value's opening quote); the values read here (IDs, statuses) hold no
// escapes.
func field(msg, key []byte) (string, bool) {
	_, rest, ok := bytes.Cut(msg, key)
	if !ok {
		return "", false
	}
	v, _, ok := bytes.Cut(rest, []byte(`"`))
	return string(v), ok
}

// WaitCompleted polls a task until it is completed; another terminal
// status is an error.
func (c *Client) WaitCompleted(ctx context.Context, id string) error {
	for {
		st, err := c.Get(ctx, id)
		if err != nil {
			return err
		}
		switch st {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("task %s ended %s", id, st)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("task %s still %s: %w", id, st, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// CheckLoopback returns an error unless raw is an http(s) URL of a
// loopback host (localhost, 127.0.0.0/8, [::1]): load is never sent
// anywhere else.
func CheckLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: the scheme must be http or https", raw)
	}
	if u.Host == "" || !httpguard.IsLoopbackHost(u.Host) {
		return fmt.Errorf("%q: %w (only localhost, 127.0.0.0/8 or [::1] may be targeted)", raw, ErrNotLoopback)
	}
	return nil
}

// ErrNotLoopback is the error of [CheckLoopback] for a non-loopback host.
var ErrNotLoopback = errors.New("not a loopback URL")
