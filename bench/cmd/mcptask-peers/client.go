package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mcptask/mcptask/bench/internal/loadgen"
)

// The two wire revisions the benchmark speaks.
const (
	wire2025 = "2025-11-25"
	wire2026 = "2026-07-28"
)

// meta2026 is the per-request _meta of the 2026-07-28 wire, declaring the
// tasks extension (as loadgen's client).
const meta2026 = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"mcptask-peers","version":"1"},` +
	`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// newHTTPClient returns an HTTP client for conns concurrent callers that
// only ever connects to loopback addresses.
func newHTTPClient(conns int) (*http.Client, *http.Transport) {
	tr := loadgen.LoopbackTransport(conns)
	return &http.Client{
		Transport: tr,
		Timeout:   time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("redirect not followed")
		},
	}, tr
}

// session is one worker's MCP client: on 2025-11-25 an initialized session
// (Mcp-Session-Id), on 2026-07-28 stateless POSTs. Request bodies are
// encoded once (those naming a task ID from a prefix and a suffix); answers
// are checked with byte searches. A session is used by one goroutine at a
// time.
type session struct {
	url  string
	wire string
	hc   *http.Client
	id   string // Mcp-Session-Id (2025-11-25)

	plainBody []byte
	taskBody  map[string][]byte // by tool
	plainHdr  http.Header
	taskHdr   map[string]http.Header
	getHdr    http.Header // 2025: shared; 2026: Mcp-Name set per request
	resultHdr http.Header

	body bytes.Buffer // request body of tasks/get and tasks/result
	resp bytes.Buffer // answer being read
}

var (
	resultKey  = []byte(`"result":`)
	errorKey   = []byte(`"error":`)
	isErrorKey = []byte(`"isError":true`)
	taskIDKey  = []byte(`"taskId":"`)
	statusKey  = []byte(`"status":"`)
	resultTask = []byte(`"resultType":"task"`)
	resultDone = []byte(`"resultType":"complete"`)
)

// newSession opens a session on url: on 2025-11-25 it sends initialize and
// notifications/initialized.
func newSession(ctx context.Context, hc *http.Client, url, wire string, taskTools []string) (*session, error) {
	s := &session{url: url, wire: wire, hc: hc, taskBody: map[string][]byte{}, taskHdr: map[string]http.Header{}}
	if wire == wire2025 {
		if err := s.initialize(ctx); err != nil {
			return nil, err
		}
	}
	s.plainBody = s.callBody("noop", false)
	s.plainHdr = s.header("tools/call", "noop")
	for _, t := range taskTools {
		s.taskBody[t] = s.callBody(t, true)
		s.taskHdr[t] = s.header("tools/call", t)
	}
	s.getHdr = s.header("tasks/get", "")
	s.resultHdr = s.header("tasks/result", "")
	return s, nil
}

func (s *session) header(method, name string) http.Header {
	h := http.Header{
		"Content-Type": {"application/json"},
		"Accept":       {"application/json, text/event-stream"},
	}
	if s.wire == wire2025 {
		h.Set("Mcp-Protocol-Version", wire2025)
		if s.id != "" {
			h.Set("Mcp-Session-Id", s.id)
		}
		return h
	}
	h.Set("Mcp-Protocol-Version", wire2026)
	h.Set("Mcp-Method", method)
	if name != "" {
		h.Set("Mcp-Name", name)
	}
	return h
}

// callBody is a tools/call of tool: on 2025-11-25 with params.task when
// task is set; on 2026-07-28 always declaring the tasks extension.
func (s *session) callBody(tool string, task bool) []byte {
	params := `{"name":"` + tool + `","arguments":{}`
	switch {
	case s.wire == wire2026:
		params += `,"_meta":` + meta2026
	case task:
		params += `,"task":{}`
	}
	return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + params + `}}`)
}

func (s *session) initialize(ctx context.Context) error {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{},"clientInfo":{"name":"mcptask-peers","version":"1"}}}`)
	h := http.Header{
		"Content-Type": {"application/json"},
		"Accept":       {"application/json, text/event-stream"},
	}
	resp, err := s.do(ctx, http.MethodPost, body, h)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	s.id = resp.Header.Get("Mcp-Session-Id")
	if s.id == "" {
		return errors.New("initialize: no Mcp-Session-Id in the answer")
	}
	if _, err := s.message(resp); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	resp, err = s.do(ctx, http.MethodPost, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), s.header("", ""))
	if err != nil {
		return fmt.Errorf("notifications/initialized: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("notifications/initialized: HTTP %d: %.300s", resp.StatusCode, s.resp.Bytes())
	}
	return nil
}

// close ends a 2025-11-25 session (DELETE), best effort.
func (s *session) close(ctx context.Context) {
	if s.wire == wire2025 && s.id != "" {
		_, _ = s.do(ctx, http.MethodDelete, nil, s.header("", ""))
	}
}

// do sends a request and reads the whole answer into s.resp.
func (s *session) do(ctx context.Context, method string, body []byte, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = hdr
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, err
	}
	s.resp.Reset()
	_, err = s.resp.ReadFrom(resp.Body)
	resp.Body.Close()
	return resp, err
}

// message returns the JSON-RPC answer of resp (its JSON body, or the last
// event of its event stream that holds a result or an error), an error if
// it is not a result.
func (s *session) message(resp *http.Response) ([]byte, error) {
	raw := s.resp.Bytes()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, raw)
	}
	msg := raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msg = nil
		for line := range bytes.Lines(raw) {
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				d = bytes.TrimSpace(d)
				if bytes.Contains(d, resultKey) || bytes.Contains(d, errorKey) {
					msg = d
				}
			}
		}
	}
	if msg == nil {
		return nil, fmt.Errorf("no JSON-RPC message in %.300q", raw)
	}
	if !bytes.Contains(msg, resultKey) {
		return nil, fmt.Errorf("not a result: %.300s", msg)
	}
	return msg, nil
}

func (s *session) post(ctx context.Context, body []byte, hdr http.Header) ([]byte, error) {
	resp, err := s.do(ctx, http.MethodPost, body, hdr)
	if err != nil {
		return nil, err
	}
	return s.message(resp)
}

// plain calls noop; the answer must be a successful synchronous result.
func (s *session) plain(ctx context.Context) error {
	msg, err := s.post(ctx, s.plainBody, s.plainHdr)
	if err != nil {
		return err
	}
	if bytes.Contains(msg, isErrorKey) || bytes.Contains(msg, taskIDKey) {
		return fmt.Errorf("plain call: unexpected answer %.300s", msg)
	}
	return nil
}

// create calls tool as a task and returns the task's ID.
func (s *session) create(ctx context.Context, tool string) (string, error) {
	msg, err := s.post(ctx, s.taskBody[tool], s.taskHdr[tool])
	if err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	if s.wire == wire2026 && !bytes.Contains(msg, resultTask) {
		return "", fmt.Errorf("create: not a task handle: %.300s", msg)
	}
	id, ok := field(msg, taskIDKey)
	if !ok || id == "" {
		return "", fmt.Errorf("create: no taskId in %.300s", msg)
	}
	return id, nil
}

// taskRequest writes the body of a tasks/* request (method) of the task id
// to s.body and returns it.
func (s *session) taskRequest(method, id string) []byte {
	s.body.Reset()
	s.body.WriteString(`{"jsonrpc":"2.0","id":1,"method":"`)
	s.body.WriteString(method)
	s.body.WriteString(`","params":{"taskId":"`)
	s.body.WriteString(id) // IDs hold no characters to escape
	s.body.WriteString(`"`)
	if s.wire == wire2026 {
		s.body.WriteString(`,"_meta":` + meta2026)
	}
	s.body.WriteString(`}}`)
	return s.body.Bytes()
}

// get sends tasks/get and returns the task's status.
func (s *session) get(ctx context.Context, id string) (string, error) {
	if s.wire == wire2026 {
		s.getHdr["Mcp-Name"] = []string{id}
	}
	msg, err := s.post(ctx, s.taskRequest("tasks/get", id), s.getHdr)
	if err != nil {
		return "", fmt.Errorf("tasks/get: %w", err)
	}
	if s.wire == wire2026 && !bytes.Contains(msg, resultDone) {
		return "", fmt.Errorf("tasks/get: unexpected answer %.300s", msg)
	}
	st, ok := field(msg, statusKey)
	if !ok {
		return "", fmt.Errorf("tasks/get: no status in %.300s", msg)
	}
	return st, nil
}

// result sends tasks/result (2025-11-25); the answer must be a successful
// tool result.
func (s *session) result(ctx context.Context, id string) error {
	msg, err := s.post(ctx, s.taskRequest("tasks/result", id), s.resultHdr)
	if err != nil {
		return fmt.Errorf("tasks/result: %w", err)
	}
	if bytes.Contains(msg, isErrorKey) {
		return fmt.Errorf("tasks/result: tool error %.300s", msg)
	}
	return nil
}

// field returns the string value after key (which ends with the value's
// opening quote); the values read here hold no escapes.
func field(msg, key []byte) (string, bool) {
	_, rest, ok := bytes.Cut(msg, key)
	if !ok {
		return "", false
	}
	v, _, ok := bytes.Cut(rest, []byte(`"`))
	return string(v), ok
}

// terminal reports whether a task status is terminal.
func terminal(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}
