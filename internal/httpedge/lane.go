package httpedge

import (
	"context"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/mcptask/mcptask/internal/adapter"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fast lane answers the 2026-07-28 tasks/get, tasks/update,
// tasks/cancel and tasks/delete (lane2026.go), and the 2025-11-25
// tasks/get and tasks/result of a finished task (lane2025.go), without
// the go-sdk's per-request machinery (the temporary session, its jsonrpc2
// connection and goroutines, the stream bookkeeping): it decodes the
// request with the go-sdk's exported codec, runs the server's own part
// of the handling ([Tasks.Run]: requester, request rate, metrics, trace
// context, the wire's handler with its owner check and audit) and writes
// the answer as the go-sdk's handler would, byte for byte.
//
// It takes a request only when it can tell that the go-sdk would accept it
// and hand it, unchanged, to the server's middleware: every check the
// go-sdk and the RoutingGuard make before that is made here too, and any
// request that one of them would refuse, or that is unusual in any way
// the lane does not reproduce (a batch, a body above fastLaneMaxBody,
// params that do not decode, a _meta the go-sdk would refuse, …), goes on
// to the go-sdk untouched, which answers it as always. What the lane
// answers itself are the outcomes of the server's handling: the task, or
// the errors of the wire's handler (unknown task, missing capability,
// invalid task ID, rate limited, …).
//
// What the lane cannot reproduce: go-sdk receiving middleware other than
// mcptask's (none runs on the lane; see mcptask's Options.FastLane), and
// a custom Options.Owner (the lane is then off).

// Tasks is what the fast lane asks of the server behind the edge: the
// server's own handling of the tasks/* requests it answers.
type Tasks interface {
	// Run answers the tasks/* request r with h, the handler of its
	// wire's table, as the server's middleware does on the go-sdk's
	// path: the request rate of its requester first (a refusal is the
	// answer), then take, when not nil, which may decline the request
	// (served false: the rate's charge is given back and nothing else
	// happens), then h, in the trace context of r's _meta, and the
	// request metrics of the outcome.
	Run(ctx context.Context, h adapter.Handler, r *adapter.Request, take func(context.Context) bool) (res mcp.Result, err error, served bool)
	// Finished reports whether the task that req, a tasks/result of
	// params p, names has finished, for its requester; a task it cannot
	// see, or an invalid ID, counts as finished (the answer, an error,
	// does not wait).
	Finished(ctx context.Context, req mcp.Request, p mcp.Params) bool
	// Call answers the tools/call r (Req, its params decoded; Session,
	// for a 2025-11-25 call, its session, else nil for a 2026-07-28 one;
	// Next unset) as the server's middleware and wire do on
	// the go-sdk's path when the server answers it with a task, and
	// reports whether it did: served false means it is not such a call,
	// and nothing happened.
	Call(ctx context.Context, r *adapter.Request) (res mcp.Result, err error, served bool)
	// CallsTool reports whether Call may answer a call of the tool name
	// (a tool that runs as a task, whose definition the server knows):
	// the calls of any other tool go to the go-sdk unread.
	CallsTool(name string) bool
}

// fastLaneMaxBody bounds the bodies the fast lane reads; a larger one goes
// to the go-sdk.
const fastLaneMaxBody = 64 << 10

// fastLane serves the fast-lane requests of one [Handler].
type fastLane struct {
	tasks      Tasks
	v2026, v25 adapter.Wire
	// slow is the go-sdk's stateless handler, which the lane probes once
	// (see probe) before it answers anything.
	slow      http.Handler
	probeOnce sync.Once
	on        bool // the probe succeeded: the lane serves 2026-07-28
	on25      bool // and the server supports 2025-11-25
	// sessions is the record of the 2025-11-25 sessions of the stateful
	// handler (sessions.go); nil when the lane does not serve them.
	sessions *sessions
	// serverInfo is the go-sdk server's Implementation, which the go-sdk
	// adds to the _meta of every 2026-07-28 result (learnt by the probe).
	serverInfo *mcp.Implementation
	// The handler options the go-sdk's answer depends on.
	jsonResponse, localhostProtection bool
	maxBody                           int64
}

// newFastLane returns the fast lane of a handler with options o, whose
// go-sdk stateless handler is slow, answering with tasks and the tables
// of the wires v2026 and v25; nil when the handler's options are not what
// the lane reproduces.
func newFastLane(tasks Tasks, v2026, v25 adapter.Wire, o mcp.StreamableHTTPOptions, slow http.Handler) *fastLane {
	if o.CrossOriginProtection != nil {
		return nil
	}
	var ls *sessions
	if o.EventStore == nil {
		// (With an event store, the go-sdk's answers on a session carry
		// event IDs the lane cannot reproduce.)
		ls = &sessions{timeout: o.SessionTimeout}
	}
	max := int64(fastLaneMaxBody)
	if o.MaxRequestBodyBytes > 0 {
		max = min(max, o.MaxRequestBodyBytes)
	}
	if o.MaxRequestBodyBytes == 0 {
		max = min(max, mcp.DefaultMaxRequestBodyBytes)
	}
	return &fastLane{
		tasks:               tasks,
		v2026:               v2026,
		v25:                 v25,
		slow:                slow,
		sessions:            ls,
		jsonResponse:        o.JSONResponse,
		localhostProtection: !o.DisableLocalhostProtection,
		maxBody:             max,
	}
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

// headersOK reports whether r's headers are those of a POST the lane may
// answer for the protocol version: no Last-Event-ID, a JSON body, an
// Accept of both JSON and an event stream, and a Host the go-sdk's DNS
// rebinding protection, when on, lets through.
func (f *fastLane) headersOK(r *http.Request, version string) bool {
	h := r.Header
	return h.Get("Mcp-Protocol-Version") == version &&
		len(h.Values("Last-Event-ID")) == 0 &&
		baseMediaType(h.Get("Content-Type")) == "application/json" &&
		acceptsBoth(h.Values("Accept")) &&
		f.rebindingOK(r)
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
