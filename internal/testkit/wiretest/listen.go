package wiretest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
)

// Message is one JSON-RPC message read from an event stream.
type Message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *Error          `json:"error"`
}

// Stream is an open subscriptions/listen stream.
type Stream struct {
	// ID is the listen request's JSON-RPC ID, as sent.
	ID int64
	// HTTPStatus is the status the stream's response came with.
	HTTPStatus int
	// Messages delivers the stream's messages in order; it is closed when
	// the stream ends.
	Messages <-chan Message

	body   io.Closer
	cancel context.CancelFunc
}

// Close closes the stream from the client's side.
func (s *Stream) Close() {
	s.cancel()
	_ = s.body.Close()
}

// Listen opens a subscriptions/listen stream with params.notifications set
// to notifications (e.g. {"taskIds": [...]}). A refusal answered as JSON
// arrives as the stream's only message.
func (c *Client) Listen(ctx context.Context, notifications map[string]any) (*Stream, error) {
	return c.OpenStream(ctx, wire.MethodSubscriptionsListen, map[string]any{"notifications": notifications})
}

// OpenStream sends the long-lived request method (e.g. events/stream)
// with params (_meta is added) and returns its stream. A refusal
// answered as JSON arrives as the stream's only message.
func (c *Client) OpenStream(ctx context.Context, method string, params map[string]any) (*Stream, error) {
	id := c.id.Add(1)
	p := map[string]any{"_meta": c.Meta()}
	for k, v := range params {
		p[k] = v
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": p})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", ext2026.Version)
	req.Header.Set("Mcp-Method", method)
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	return &Stream{ID: id, HTTPStatus: resp.StatusCode, Messages: readEvents(ctx, resp), body: resp.Body, cancel: cancel}, nil
}
