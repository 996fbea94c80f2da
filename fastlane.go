package mcptask

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// The fast lane answers the 2026-07-28 tasks/get, tasks/update,
// tasks/cancel and tasks/delete, and the 2025-11-25 tasks/get and
// tasks/result of a finished task (fastlane2025.go), without the go-sdk's
// per-request machinery (the temporary session, its jsonrpc2 connection
// and goroutines, the stream bookkeeping): it decodes the request with
// the go-sdk's exported codec, runs mcptask's own part of the handling
// (requester, request rate, metrics, trace context, the wire's handler
// with its owner check and audit) and writes the answer as the go-sdk's
// stateless handler would, byte for byte.
//
// It takes a request only when it can tell that the go-sdk would accept it
// and hand it, unchanged, to mcptask's middleware: every check the go-sdk
// and the RoutingGuard make before that is made here too, and any request
// that one of them would refuse, or that is unusual in any way the lane
// does not reproduce (a batch, a body above fastLaneMaxBody, params that
// do not decode, a _meta the go-sdk would refuse, …), goes on to the
// go-sdk untouched, which answers it as always. What the lane answers
// itself are the outcomes of mcptask's handling: the task, or the errors
// of the wire's handler (unknown task, missing capability, invalid task
// ID, rate limited, …).
//
// What the lane cannot reproduce: go-sdk receiving middleware other than
// mcptask's (none runs on the lane; see Options.FastLane), and a
// custom Options.Owner (the lane is then off).

// fastLaneMaxBody bounds the bodies the fast lane reads; a larger one goes
// to the go-sdk.
const fastLaneMaxBody = 64 << 10

// fastLane serves the fast-lane requests of one [Server.Handler].
type fastLane struct {
	s *Server
	// slow is the go-sdk's stateless handler, which the lane probes once
	// (see probe) before it answers anything.
	slow      http.Handler
	probeOnce sync.Once
	on        bool // the probe succeeded: the lane serves 2026-07-28
	on25      bool // and the server supports 2025-11-25
	// sessions is the record of the 2025-11-25 sessions of the stateful
	// handler (fastlane2025.go); nil when the lane does not serve them.
	sessions *laneSessions
	// serverInfo is the go-sdk server's Implementation, which the go-sdk
	// adds to the _meta of every 2026-07-28 result (learnt by the probe).
	serverInfo *mcp.Implementation
	// The handler options the go-sdk's answer depends on.
	jsonResponse, localhostProtection bool
	maxBody                           int64
}

// newFastLane returns the fast lane of a handler with options o, nil when
// the server has none or the handler's options or the go-sdk server are
// not what the lane reproduces.
func newFastLane(s *Server, o mcp.StreamableHTTPOptions, slow http.Handler) *fastLane {
	if !s.fastLane || o.CrossOriginProtection != nil {
		return nil
	}
	var sessions *laneSessions
	if o.EventStore == nil {
		// (With an event store, the go-sdk's answers on a session carry
		// event IDs the lane cannot reproduce.)
		sessions = &laneSessions{timeout: o.SessionTimeout}
	}
	max := int64(fastLaneMaxBody)
	if o.MaxRequestBodyBytes > 0 {
		max = min(max, o.MaxRequestBodyBytes)
	}
	if o.MaxRequestBodyBytes == 0 {
		max = min(max, mcp.DefaultMaxRequestBodyBytes)
	}
	return &fastLane{
		s:                   s,
		slow:                slow,
		sessions:            sessions,
		jsonResponse:        o.JSONResponse,
		localhostProtection: !o.DisableLocalhostProtection,
		maxBody:             max,
	}
}

// probeBody is the server/discover request the fast lane sends, once,
// through the go-sdk's own stateless handler, to learn what the go-sdk
// adds to each 2026-07-28 answer (its serverInfo) and whether it serves
// that revision at all.
const probeBody = `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{` +
	`"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"mcptask-fast-lane-probe","version":"1"},` +
	`"io.modelcontextprotocol/clientCapabilities":{}}}}`

// probe asks the go-sdk handler slow for its server/discover answer and
// returns the serverInfo in it; ok is false (and the lane stays off) when
// the answer is not a result of a server serving 2026-07-28. It goes
// through the go-sdk's public edge, an HTTP request to its handler, so
// that the lane never reads the go-sdk's unexported state.
func probe(slow http.Handler) (impl *mcp.Implementation, versions []string, ok bool) {
	req := httptest.NewRequest(http.MethodPost, "http://localhost/mcp", strings.NewReader(probeBody))
	req.Host = "localhost"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", ext2026.Version)
	req.Header.Set("Mcp-Method", "server/discover")
	rec := httptest.NewRecorder()
	slow.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil, nil, false
	}
	body := rec.Body.Bytes()
	if ct := rec.Header().Get("Content-Type"); strings.HasPrefix(ct, "text/event-stream") {
		// One event: its data line holds the answer.
		for line := range bytes.SplitSeq(body, []byte("\n")) {
			if d, found := bytes.CutPrefix(line, []byte("data:")); found {
				body = bytes.TrimSpace(d)
				break
			}
		}
	}
	var resp struct {
		Result *struct {
			Meta              map[string]json.RawMessage `json:"_meta"`
			SupportedVersions []string                   `json:"supportedVersions"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &resp) != nil || resp.Result == nil ||
		!slices.Contains(resp.Result.SupportedVersions, ext2026.Version) {
		return nil, nil, false
	}
	raw, found := resp.Result.Meta[mcp.MetaKeyServerInfo]
	if !found || json.Unmarshal(raw, &impl) != nil || impl == nil {
		return nil, nil, false
	}
	return impl, resp.Result.SupportedVersions, true
}

// doProbe probes the go-sdk (see probe), once, before the lane answers
// anything: the 2025-11-25 part needs the server to support that
// revision (the go-sdk refuses a request whose Mcp-Protocol-Version it
// does not support).
func (f *fastLane) doProbe() {
	var versions []string
	f.serverInfo, versions, f.on = probe(f.slow)
	f.on25 = f.on && slices.Contains(versions, v1.Version)
}

// rebindingOK reports whether the go-sdk's DNS rebinding protection, when
// on, lets r through.
func (f *fastLane) rebindingOK(r *http.Request) bool {
	if !f.localhostProtection {
		return true
	}
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return !ok || la == nil || !isLoopback(la.String()) || isLoopback(r.Host)
}

// serve answers r if it is a fast-lane request and reports whether it did;
// when it did not, r (its body included) is as it came.
func (f *fastLane) serve(w http.ResponseWriter, r *http.Request) bool {
	f.probeOnce.Do(f.doProbe)
	if !f.on {
		return false
	}
	h := r.Header
	if r.Method != http.MethodPost || r.Body == nil ||
		laneMethods[h.Get("Mcp-Method")] == nil ||
		h.Get("Mcp-Protocol-Version") != ext2026.Version ||
		len(h.Values("Last-Event-ID")) > 0 ||
		baseMediaType(h.Get("Content-Type")) != "application/json" ||
		!acceptsBoth(h.Values("Accept")) {
		return false
	}
	if !f.rebindingOK(r) {
		// The go-sdk's DNS rebinding protection would refuse it.
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, f.maxBody+1))
	if err != nil || int64(len(body)) > f.maxBody {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		return false
	}
	r.Body.Close()
	if !f.answer(w, r, body) {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		return false
	}
	return true
}

// answer answers the request of body if the go-sdk would hand it to
// mcptask's middleware as it is, and reports whether it did.
func (f *fastLane) answer(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if !plainObject(body) {
		return false
	}
	jreq, ok := decodeRequest(body)
	method := r.Header.Get("Mcp-Method")
	if !ok || jreq.Method != method || !jreq.IsCall() || len(jreq.Params) == 0 {
		return false
	}
	if _, bad := ext2026.RoutingMismatch(r.Header, body); bad {
		return false
	}
	ctx := r.Context()
	extra := &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(ctx), Header: r.Header}
	p, req, ok := laneMethods[method](jreq.Params, extra, nil)
	if !ok || !sdkAcceptsMeta(p.GetMeta(), r.Header.Get("Mcp-Protocol-Version")) {
		return false
	}
	s := f.s
	h := s.w26.Table()[method]
	res, err := s.limitedTasksRequest(ctx, method, req, func(ctx context.Context) (mcp.Result, error) {
		return s.runTasksHandler(ctx, h, &adapter.Request{Method: method, Req: req, Params: p}, p)
	})
	f.writeAnswer(w, jreq.ID, res, err, true)
	s.fastServed.Add(1)
	return true
}

// plainObject reports whether body is a JSON object (never a batch)
// whose nesting is well within the go-sdk's bound of 1000, as the lanes
// require before they decode it.
func plainObject(body []byte) bool {
	i := bytes.IndexFunc(body, func(r rune) bool { return !strings.ContainsRune(" \t\r\n", r) })
	return i >= 0 && body[i] == '{' && bytes.Count(body, []byte("{"))+bytes.Count(body, []byte("[")) <= 1000
}

// wireDecode is the shape jsonrpc.DecodeMessage decodes a message into.
type wireDecode struct {
	VersionTag string          `json:"jsonrpc"`
	ID         any             `json:"id,omitempty"`
	Method     json.RawMessage `json:"method"`
	Params     json.RawMessage `json:"params,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *jsonrpc.Error  `json:"error,omitempty"`
}

// decodeRequest decodes body, one valid JSON value, as
// jsonrpc.DecodeMessage does, and returns it if it is a request. It is
// jsonrpc.DecodeMessage step by step, with the same decoder, less the
// 32 KiB buffer the go-sdk's decoder allocates per call before it parses
// (body is one value already): the heaviest allocation of a tasks/get.
func decodeRequest(body []byte) (*jsonrpc.Request, bool) {
	if !json.Valid(body) {
		return nil, false
	}
	var msg wireDecode
	if sdkUnmarshal(body, &msg) != nil || msg.VersionTag != "2.0" || len(msg.Method) == 0 {
		return nil, false
	}
	id, err := jsonrpc.MakeID(msg.ID)
	if err != nil {
		return nil, false
	}
	var method string
	if sdkUnmarshal(msg.Method, &method) != nil {
		return nil, false
	}
	return &jsonrpc.Request{Method: method, ID: id, Params: msg.Params}, true
}

// laneDecoder decodes the params of a fast-lane method into the shape the
// go-sdk decodes them into (see addMethods), and returns the request the
// go-sdk would hand the middleware, of session ss (nil on 2026-07-28: the
// default requester of a stateless request does not depend on its
// temporary session). ok is false when the params do not decode, or are
// null.
type laneDecoder func(raw json.RawMessage, extra *mcp.RequestExtra, ss *mcp.ServerSession) (p mcp.Params, req mcp.Request, ok bool)

// laneMethods are the 2026-07-28 methods of the fast lane.
var laneMethods = map[string]laneDecoder{
	wire.MethodTasksGet:    laneParams[ext2026.GetTaskParams],
	wire.MethodTasksUpdate: laneParams[ext2026.UpdateTaskParams],
	wire.MethodTasksCancel: laneParams[ext2026.CancelTaskParams],
	wire.MethodTasksDelete: laneParams[ext2026.CancelTaskParams],
}

func laneParams[T any, P interface {
	*T
	mcp.Params
}](raw json.RawMessage, extra *mcp.RequestExtra, ss *mcp.ServerSession) (mcp.Params, mcp.Request, bool) {
	var p P
	if sdkUnmarshal(raw, &p) != nil || p == nil {
		return nil, nil, false
	}
	return p, &mcp.ServerRequest[P]{Session: ss, Params: p, Extra: extra}, true
}

// writeAnswer writes the answer to the request id (res, or the error
// err) as the go-sdk does: its stateless handler for a 2026-07-28 request
// (v2026), else its stateful one for a 2025-11-25 request of a session.
func (f *fastLane) writeAnswer(w http.ResponseWriter, id jsonrpc.ID, res mcp.Result, err error, v2026 bool) {
	resp := &jsonrpc.Response{ID: id}
	if err == nil && !v2026 {
		resp.Result, err = marshalNoEscape(res)
	} else if err == nil {
		// The go-sdk's serverInfo in the result's _meta (SEP-2575).
		m := res.GetMeta()
		if m == nil {
			m = map[string]any{}
		}
		if _, ok := m[mcp.MetaKeyServerInfo]; !ok {
			m[mcp.MetaKeyServerInfo] = f.serverInfo
			res.SetMeta(m)
		}
		resp.Result, err = marshalNoEscape(res)
	}
	if err != nil {
		resp.Error = err
	}
	data, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-cache, no-transform")
	if f.jsonResponse {
		hdr.Set("Content-Type", "application/json")
	} else {
		hdr.Set("Content-Type", "text/event-stream")
		hdr.Set("Connection", "keep-alive")
	}
	if status := errorStatus(resp.Error); v2026 && status != 0 {
		// SEP-2575: a protocol-level error is a plain JSON body with its
		// HTTP status.
		hdr.Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(data)
		return
	}
	if f.jsonResponse {
		_, _ = w.Write(data)
		return
	}
	// The go-sdk flushes its one event, which makes the answer chunked; the
	// answer being whole here, it is sent chunked without the flush: one
	// write to the socket (headers, event and last chunk) instead of two.
	hdr.Set("Transfer-Encoding", "chunked")
	buf := make([]byte, 0, len("event: message\ndata: \n\n")+len(data))
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	_, _ = w.Write(buf)
}

// errorStatus is the HTTP status of a 2026-07-28 answer with error err, 0
// for 200 (as the go-sdk's extractErrorStatus).
func errorStatus(err error) int {
	var jerr *jsonrpc.Error
	if err == nil || !errors.As(err, &jerr) {
		return 0
	}
	switch jerr.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return 0
}

// marshalNoEscape marshals v as the go-sdk's jsonrpc2 codec does: without
// HTML escaping.
func marshalNoEscape(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// sdkUnmarshal decodes data, one JSON value, into v as the go-sdk
// decodes params: case-sensitively, with the decoder the go-sdk uses.
// The go-sdk's decoder reads the value into a buffer of its own (32 KiB
// at least, per call) before it parses it; data being one value already,
// it is parsed as it is.
func sdkUnmarshal(data []byte, v any) error {
	_, err := segjson.Parse(data, v, segjson.DontMatchCaseInsensitiveStructFields)
	return err
}

// sdkClientCapabilities is the shape the go-sdk decodes the
// per-request client capabilities into.
type sdkClientCapabilities struct {
	mcp.ClientCapabilities
	Roots *mcp.RootCapabilities `json:"roots,omitempty"`
}

// sdkAcceptsMeta reports whether the go-sdk accepts a 2026-07-28 request
// with the _meta meta and the protocol version header version and handles
// it on the new protocol, as its servePOST and ServerSession.handle check.
func sdkAcceptsMeta(meta map[string]any, version string) bool {
	if v, _ := meta[mcp.MetaKeyProtocolVersion].(string); v != version || !ext2026.UsesWire(meta) {
		return false
	}
	if ci, present := meta[mcp.MetaKeyClientInfo]; present {
		var impl *mcp.Implementation
		if ci == nil || !decodesAs(ci, implementationStrings, nil) && remarshal(ci, &impl) != nil {
			return false
		}
	}
	caps, present := meta[mcp.MetaKeyClientCapabilities]
	if !present || caps == nil {
		return false
	}
	var c *sdkClientCapabilities
	return decodesAs(caps, nil, capabilityObjects) || remarshal(caps, &c) == nil
}

// The fields of mcp.Implementation that are strings, and of
// mcp.ClientCapabilities that are maps (any JSON object decodes into
// them); see decodesAs.
var (
	implementationStrings = map[string]bool{"name": true, "title": true, "description": true, "version": true, "websiteUrl": true}
	capabilityObjects     = map[string]bool{"experimental": true, "extensions": true}
)

// decodesAs reports, without encoding v again, that v (a value the JSON
// decoder made of a request) decodes into a struct whose fields named in
// strings are strings and in objects are maps: v is an object, and each
// of its members is one of those fields with a value of its type (a
// string; an object, which always decodes into a map). false means only
// that it cannot tell (another member, a null, another type):
// remarshal, the go-sdk's way, then decides.
func decodesAs(v any, strings, objects map[string]bool) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for k, x := range m {
		switch {
		case strings[k]:
			if _, ok := x.(string); !ok {
				return false
			}
		case objects[k]:
			if _, ok := x.(map[string]any); !ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// remarshal is the go-sdk's: from through its JSON into to.
func remarshal(from, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return sdkUnmarshal(data, to)
}

// baseMediaType is the media type of a Content-Type value, "" if it does
// not parse.
func baseMediaType(v string) string {
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return ""
	}
	return mt
}

// acceptsBoth reports whether the Accept values admit both
// application/json and text/event-stream, as the go-sdk requires.
func acceptsBoth(values []string) bool {
	var jsonOK, streamOK bool
	for _, value := range values {
		for raw := range strings.SplitSeq(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

// isLoopback reports whether addr (host or host:port) is a loopback
// address or localhost, as the go-sdk's check of DNS rebinding decides.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
