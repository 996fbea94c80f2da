package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// Helpers of TestSecurity: mcptaskd served in-process with a tokens file,
// and raw JSON-RPC clients of both wires that keep every response body an
// attacker receives, so that the test can check afterwards that none of
// them carries anything of the victim's.

// secServer is one in-process mcptaskd with authentication.
type secServer struct {
	url  string
	logs *lockedBuffer // the server's JSON log records

	mu     sync.Mutex
	bodies map[string][]string // principal -> every HTTP response body it received
}

// lockedBuffer is a bytes.Buffer safe for the loggers' concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// secPrincipal is one authenticated identity: TENANT/PRINCIPAL and its
// bearer token.
type secPrincipal struct {
	srv               *secServer
	principal, tenant string
	token             string
	next              atomic.Int64 // JSON-RPC request ids
}

func (p *secPrincipal) String() string { return p.principal + "@" + p.tenant }

// startSecServer serves mcptaskd in-process (httptest, loopback) with a
// tokens file holding the principals' token hashes, and returns the server
// and the principals in the order given ("principal@tenant").
func startSecServer(t *testing.T, who ...string) (*secServer, []*secPrincipal) {
	t.Helper()
	return startSecServerArgs(t, nil, who...)
}

// startSecServerArgs is startSecServer with more mcptaskd flags.
func startSecServerArgs(t *testing.T, args []string, who ...string) (*secServer, []*secPrincipal) {
	t.Helper()
	dir := t.TempDir()
	srv := &secServer{logs: &lockedBuffer{}, bodies: map[string][]string{}}
	var entries []map[string]any
	var ps []*secPrincipal
	for i, w := range who {
		principal, tenant, _ := strings.Cut(w, "@")
		p := &secPrincipal{srv: srv, principal: principal, tenant: tenant,
			token: "tok-" + principal + "-" + tenant + "-" + strings.Repeat(string(rune('a'+i)), 24)}
		h := sha256.Sum256([]byte(p.token))
		entries = append(entries, map[string]any{"token_sha256": hex.EncodeToString(h[:]), "principal": principal, "tenant": tenant})
		ps = append(ps, p)
	}
	b, _ := json.Marshal(entries)
	if err := os.WriteFile(filepath.Join(dir, "tokens.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	// The suite sends many requests on purpose, faster than the default
	// rates allow (TestLimitCreateRate and TestLimitRequestFlood cover those); the other limits keep their
	// defaults.
	srv.url = serveApp(t, srv.logs, append([]string{"-db", filepath.Join(dir, "tasks.db"), "-tokens", filepath.Join(dir, "tokens.json"),
		"-request-rate", "0", "-create-rate", "0"}, args...)...) + "/mcp"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- server log ---\n%s", srv.logs.String())
		}
	})
	return srv, ps
}

// received returns every response body p received.
func (s *secServer) received(p *secPrincipal) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies[p.String()]...)
}

// rpcResp is one HTTP exchange carrying a JSON-RPC request.
type rpcResp struct {
	HTTPStatus int
	Header     http.Header
	Body       string          // the raw HTTP body
	Result     json.RawMessage // the response's result, if any
	Error      *wiretest.Error // the response's error, if any
	// Requests are the methods of server-to-client requests the response
	// stream carried before the response (e.g. a forwarded elicitation).
	Requests []string
}

// post sends one HTTP request with p's bearer token, records the body of
// the answer as received by p, and decodes the JSON-RPC response in it.
func (p *secPrincipal) post(t *testing.T, httpMethod string, hdr http.Header, body []byte) *rpcResp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, httpMethod, p.srv.url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %s %s: %v (a request that hangs may be waiting on another principal's task)", p, httpMethod, body, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: reading the answer to %s: %v", p, body, err)
	}
	p.srv.mu.Lock()
	p.srv.bodies[p.String()] = append(p.srv.bodies[p.String()], string(raw))
	p.srv.mu.Unlock()

	r := &rpcResp{HTTPStatus: resp.StatusCode, Header: resp.Header, Body: string(raw)}
	if resp.StatusCode >= 500 {
		t.Fatalf("%s: %s: HTTP %d %q", p, body, resp.StatusCode, raw)
	}
	var msgs [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msgs = sseData(raw)
	} else if len(bytes.TrimSpace(raw)) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		msgs = [][]byte{raw}
	}
	for _, m := range msgs {
		var env struct {
			Method string          `json:"method"`
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *wiretest.Error `json:"error"`
		}
		if err := json.Unmarshal(m, &env); err != nil {
			t.Fatalf("%s: undecodable message %q in the answer to %s: %v", p, m, body, err)
		}
		switch {
		case env.Method != "" && len(env.ID) > 0:
			r.Requests = append(r.Requests, env.Method)
		case env.Result != nil || env.Error != nil:
			r.Result, r.Error = env.Result, env.Error
		}
	}
	return r
}

// sseData returns the data of each event of an event stream.
func sseData(raw []byte) [][]byte {
	var out [][]byte
	var cur []byte
	flush := func() {
		if len(cur) > 0 {
			out = append(out, cur)
			cur = nil
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			flush()
			continue
		}
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if len(cur) > 0 {
				cur = append(cur, '\n')
			}
			cur = append(cur, bytes.TrimPrefix(d, []byte(" "))...)
		}
	}
	flush()
	return out
}

// meta26 is the per-request _meta of the 2026-07-28 wire declaring the
// tasks extension, with extra keys added.
func meta26(extra map[string]any) map[string]any {
	m := (&wiretest.Client{Tasks: true}).Meta()
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// call26 sends method with params over the 2026-07-28 wire. params["_meta"]
// is meta26(nil) unless params has one. Mcp-Name is params.taskId (or the
// tool name) when that is a string a header can carry.
func (p *secPrincipal) call26(t *testing.T, method string, params map[string]any) *rpcResp {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	if _, ok := params["_meta"]; !ok {
		params["_meta"] = meta26(nil)
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": p.next.Add(1), "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	hdr := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {method}}
	name, ok := params["taskId"].(string)
	if !ok {
		name, ok = params["name"].(string)
	}
	if !ok {
		name, ok = params["uri"].(string) // resources/read
	}
	if ok && name != "" && headerSafe(name) {
		hdr.Set("Mcp-Name", name)
	}
	return p.post(t, http.MethodPost, hdr, body)
}

// start26 calls a tool as a task over the 2026-07-28 wire and returns the
// task's ID. extraMeta is added to the request's _meta.
func (p *secPrincipal) start26(t *testing.T, tool string, args map[string]any, extraMeta map[string]any) string {
	t.Helper()
	r := p.call26(t, "tools/call", map[string]any{"name": tool, "arguments": args, "_meta": meta26(extraMeta)})
	tk := decodeTask26(t, r, "tools/call "+tool)
	if tk.ResultType != "task" || tk.TaskID == "" {
		t.Fatalf("%s: tools/call %s: want a task handle, got %s", p, tool, r.Body)
	}
	return tk.TaskID
}

// get26 returns a task over the 2026-07-28 wire; the call must succeed.
func (p *secPrincipal) get26(t *testing.T, id string) *wiretest.Task {
	t.Helper()
	return decodeTask26(t, p.call26(t, "tasks/get", map[string]any{"taskId": id}), "tasks/get "+id)
}

func decodeTask26(t *testing.T, r *rpcResp, what string) *wiretest.Task {
	t.Helper()
	if r.Error != nil || r.Result == nil {
		t.Fatalf("%s: HTTP %d %s", what, r.HTTPStatus, r.Body)
	}
	var tk wiretest.Task
	if err := json.Unmarshal(r.Result, &tk); err != nil {
		t.Fatalf("%s: %v: %s", what, err, r.Result)
	}
	return &tk
}

// wait26 polls a task of p over the 2026-07-28 wire until cond holds.
func (p *secPrincipal) wait26(t *testing.T, id, what string, cond func(*wiretest.Task) bool) *wiretest.Task {
	t.Helper()
	var tk *wiretest.Task
	waitUntil(t, 30*time.Second, "task "+id+" "+what, func() (bool, error) {
		tk = p.get26(t, id)
		return cond(tk), nil
	})
	return tk
}

// session25 is one 2025-11-25 Streamable HTTP session of a principal.
type session25 struct {
	p  *secPrincipal
	id string
}

// open25 initializes a 2025-11-25 session.
func (p *secPrincipal) open25(t *testing.T) *session25 {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": p.next.Add(1), "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "security-test-" + p.principal, "version": "1"}}})
	r := p.post(t, http.MethodPost, nil, body)
	s := &session25{p: p, id: r.Header.Get("Mcp-Session-Id")}
	if r.HTTPStatus != http.StatusOK || r.Error != nil || s.id == "" {
		t.Fatalf("%s: initialize: HTTP %d %s", p, r.HTTPStatus, r.Body)
	}
	var init struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    map[string]any `json:"capabilities"`
	}
	if err := json.Unmarshal(r.Result, &init); err != nil || init.ProtocolVersion != "2025-11-25" || init.Capabilities["tasks"] == nil {
		t.Fatalf("%s: initialize: want protocol 2025-11-25 with the tasks capability, got %s (%v)", p, r.Result, err)
	}
	if r := s.send(t, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); r.HTTPStatus/100 != 2 {
		t.Fatalf("%s: notifications/initialized: HTTP %d %s", p, r.HTTPStatus, r.Body)
	}
	return s
}

// headers are the HTTP headers of a request in the session.
func (s *session25) headers() http.Header {
	return http.Header{"Mcp-Session-Id": {s.id}, "Mcp-Protocol-Version": {"2025-11-25"}}
}

func (s *session25) send(t *testing.T, msg map[string]any) *rpcResp {
	t.Helper()
	body, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return s.p.post(t, http.MethodPost, s.headers(), body)
}

// call sends a request in the session.
func (s *session25) call(t *testing.T, method string, params map[string]any) *rpcResp {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	return s.send(t, map[string]any{"jsonrpc": "2.0", "id": s.p.next.Add(1), "method": method, "params": params})
}

// task25 is the task object of the 2025-11-25 wire.
type task25 struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
}

// start calls a tool as a task (params.task) and returns the task's ID.
// extraMeta, if not nil, is the request's _meta.
func (s *session25) start(t *testing.T, tool string, args map[string]any, extraMeta map[string]any) string {
	t.Helper()
	params := map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": 600000}}
	if extraMeta != nil {
		params["_meta"] = extraMeta
	}
	r := s.call(t, "tools/call", params)
	var res struct {
		Task task25 `json:"task"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.Task.TaskID == "" {
		t.Fatalf("%s: task-augmented tools/call %s: want CreateTaskResult, got HTTP %d %s", s.p, tool, r.HTTPStatus, r.Body)
	}
	return res.Task.TaskID
}

// get returns a task over the 2025-11-25 wire; the call must succeed.
func (s *session25) get(t *testing.T, id string) task25 {
	t.Helper()
	r := s.call(t, "tasks/get", map[string]any{"taskId": id})
	var tk task25
	if r.Error != nil || json.Unmarshal(r.Result, &tk) != nil || tk.TaskID != id {
		t.Fatalf("%s: tasks/get %s: HTTP %d %s", s.p, id, r.HTTPStatus, r.Body)
	}
	return tk
}

// wait polls a task of the session until cond holds.
func (s *session25) wait(t *testing.T, id, what string, cond func(task25) bool) task25 {
	t.Helper()
	var tk task25
	waitUntil(t, 30*time.Second, "task "+id+" "+what, func() (bool, error) {
		tk = s.get(t, id)
		return cond(tk), nil
	})
	return tk
}

// list returns the IDs of every task tasks/list shows in the session,
// following nextCursor.
func (s *session25) list(t *testing.T) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for page := 0; ; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		r := s.call(t, "tasks/list", params)
		var res struct {
			Tasks      []task25 `json:"tasks"`
			NextCursor string   `json:"nextCursor"`
		}
		if r.Error != nil || json.Unmarshal(r.Result, &res) != nil {
			t.Fatalf("%s: tasks/list: HTTP %d %s", s.p, r.HTTPStatus, r.Body)
		}
		for _, tk := range res.Tasks {
			ids = append(ids, tk.TaskID)
		}
		if res.NextCursor == "" {
			return ids
		}
		if page > 100 {
			t.Fatalf("%s: tasks/list does not end", s.p)
		}
		cursor = res.NextCursor
	}
}

// textOf returns the text of the first content block of a tool result.
func textOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r toolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("decoding tool result %s: %v", raw, err)
	}
	return r.text()
}

// errShape is a JSON-RPC error with the task ID it was about replaced by
// "ID", and the HTTP status it came with: what must not differ between
// another principal's task and an unknown one.
type errShape struct {
	HTTPStatus int
	Code       int64
	Message    string
	Data       string
}

func shapeOf(r *rpcResp, id string) errShape {
	if r.Error == nil || r.Result != nil {
		// Not an error: a shape no error has, showing what came instead.
		return errShape{HTTPStatus: r.HTTPStatus, Message: "NOT AN ERROR: " + r.Body}
	}
	s := errShape{HTTPStatus: r.HTTPStatus, Code: r.Error.Code, Message: r.Error.Message, Data: string(r.Error.Data)}
	if id != "" {
		s.Message = strings.ReplaceAll(s.Message, id, "ID")
		s.Data = strings.ReplaceAll(s.Data, id, "ID")
	}
	return s
}

// headerSafe reports whether s can travel unchanged as an HTTP header
// value: no control characters, no surrounding whitespace (which the
// server trims).
func headerSafe(s string) bool {
	if strings.TrimSpace(s) != s {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}
