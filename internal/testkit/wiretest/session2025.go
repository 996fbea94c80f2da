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
)

// Session is a raw 2025-11-25 Streamable HTTP session: initialize, then
// requests with its Mcp-Session-Id, and its standalone GET stream.
type Session struct {
	// URL is the endpoint.
	URL string
	// HTTP is the HTTP client; nil means http.DefaultClient.
	HTTP *http.Client
	// Header is added to every request (e.g. Authorization).
	Header http.Header
	// ID is the session's ID, set by Initialize.
	ID string

	id atomic.Int64
}

// Initialize opens the session (initialize, then notifications/initialized)
// and returns the initialize result.
func (s *Session) Initialize(ctx context.Context) (json.RawMessage, error) {
	res, err := s.Call(ctx, "initialize", map[string]any{
		"protocolVersion": "2025-11-25",
		"capabilities":    map[string]any{"elicitation": map[string]any{}},
		"clientInfo":      map[string]any{"name": "wiretest", "version": "1"},
	})
	if err != nil {
		return nil, err
	}
	if _, err := s.post(ctx, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); err != nil {
		return nil, err
	}
	return res, nil
}

// Call sends a request and returns its result, or the JSON-RPC error.
func (s *Session) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	resp, err := s.post(ctx, map[string]any{"jsonrpc": "2.0", "id": s.id.Add(1), "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s: HTTP %d: %s", method, resp.StatusCode, bytes.TrimSpace(raw))
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		s.ID = sid
	}
	msg, err := lastMessage(resp.Header.Get("Content-Type"), raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *Error          `json:"error"`
	}
	if err := json.Unmarshal(msg, &env); err != nil {
		return nil, err
	}
	if env.Error != nil {
		return nil, env.Error
	}
	return env.Result, nil
}

func (s *Session) post(ctx context.Context, msg any) (*http.Response, error) {
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	s.headers(req)
	resp, err := s.client().Do(req)
	if err != nil {
		return nil, err
	}
	if _, isCall := msg.(map[string]any)["id"]; !isCall {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, nil
}

func (s *Session) headers(req *http.Request) {
	if s.ID != "" {
		req.Header.Set("Mcp-Session-Id", s.ID)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	for k, vs := range s.Header {
		req.Header[k] = vs
	}
}

func (s *Session) client() *http.Client {
	if s.HTTP != nil {
		return s.HTTP
	}
	return http.DefaultClient
}

// Stream opens the session's standalone GET stream. Its messages arrive
// on the returned channel, closed when the stream ends; status is the
// response's HTTP status. Cancel ctx to close it.
func (s *Session) Stream(ctx context.Context) (status int, msgs <-chan Message, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	s.headers(req)
	resp, err := s.client().Do(req)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, readEvents(ctx, resp), nil
}

// CallStream sends a request and returns the messages of its response
// stream as they arrive (notifications and server requests, then the
// response), on a channel closed when the stream ends.
func (s *Session) CallStream(ctx context.Context, method string, params any) (<-chan Message, error) {
	resp, err := s.post(ctx, map[string]any{"jsonrpc": "2.0", "id": s.id.Add(1), "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	return readEvents(ctx, resp), nil
}

// readEvents delivers the JSON-RPC messages of an event stream (or of a
// JSON body: its one message).
func readEvents(ctx context.Context, resp *http.Response) <-chan Message {
	ch := make(chan Message, 64)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			var m Message
			raw, _ := io.ReadAll(resp.Body)
			if json.Unmarshal(raw, &m) == nil {
				ch <- m
			}
			return
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
		for sc.Scan() {
			d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:"))
			if !ok {
				continue
			}
			var m Message
			if json.Unmarshal(bytes.TrimSpace(d), &m) != nil {
				continue
			}
			select {
			case ch <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// Respond answers a server-to-client request of the session (an
// elicitation/create read from one of its streams) with result.
func (s *Session) Respond(ctx context.Context, id json.RawMessage, result any) error {
	resp, err := s.post(ctx, map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("answering request %s: HTTP %d", id, resp.StatusCode)
	}
	return nil
}
