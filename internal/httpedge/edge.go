// Package httpedge is the Streamable HTTP edge of an mcptask server: one
// endpoint for both wire revisions in front of the go-sdk's two handlers.
// The go-sdk serves the 2026-07-28 wire only on a stateless handler and
// the 2025-11-25 wire (sessions, server-to-client requests) only on a
// stateful one, so each request goes to the handler of its wire:
//
//   - a request with Mcp-Session-Id belongs to a 2025-11-25 session;
//   - otherwise an MCP-Protocol-Version header of 2026-07-28 or later (or an
//     unknown version sorting after it) is stateless;
//   - without that header, a POST whose params._meta names a protocol
//     version is stateless;
//   - everything else, notably initialize, is stateful.
//
// On the way, the 2026-07-28 tasks methods pass the routing check
// ([ext2026.RoutingGuard]), a subscriptions/listen naming taskIds gets
// its stream from the wire (ServeListen), the 2025-11-25 `task`
// parameter of tools/call is lifted past the go-sdk, and a session's GET
// stream and waiting tasks/result carry its tasks' status notifications
// (ServeStream, ServeResultStream). With Config.FastLane, the requests
// the fast lane takes (lane.go) are answered without the go-sdk.
//
// The edge knows the server behind it only through [Config]: the go-sdk
// server, the two wires and [Tasks]; the server's middleware calls
// [Register] for the fast lane's session record.
package httpedge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Wire2026 is the 2026-07-28 wire as the edge uses it.
type Wire2026 interface {
	adapter.Wire
	// ServeListen serves a subscriptions/listen POST whose body (read
	// whole) names taskIds with sdk, the stateless handler, and reports
	// whether it did.
	ServeListen(rw http.ResponseWriter, r *http.Request, body []byte, sdk http.Handler) bool
}

// Wire2025 is the 2025-11-25 wire as the edge uses it.
type Wire2025 interface {
	adapter.Wire
	// ServeStream serves a session's standalone GET stream with sdk, the
	// stateful handler, with its tasks' status notifications.
	ServeStream(rw http.ResponseWriter, r *http.Request, sdk http.Handler)
	// ServeResultStream serves a session's tasks/result POST for the
	// task id with sdk, with the task's status notifications.
	ServeResultStream(rw http.ResponseWriter, r *http.Request, sdk http.Handler, id task.ID)
}

// Config is what the edge is built from.
type Config struct {
	// Server is the go-sdk server both of the go-sdk's handlers serve.
	Server *mcp.Server
	// V2026 and V2025 are the server's two wires.
	V2026 Wire2026
	V2025 Wire2025
	// FastLane turns the fast lane on; Tasks then runs what it answers.
	FastLane bool
	Tasks    Tasks
	// Options configures both go-sdk handlers (nil means defaults);
	// Stateless is set per handler.
	Options *mcp.StreamableHTTPOptions
	// Events, if set, serves an events/stream POST (its body read
	// whole) of either wire as a server-sent event stream, and reports
	// whether it did.
	Events func(w http.ResponseWriter, r *http.Request, body []byte) bool
}

// Handler is the edge: an http.Handler that sends each request to the
// handler of its wire (see the package doc).
type Handler struct {
	v2026               Wire2026
	v25                 Wire2025
	stateful, stateless http.Handler
	// fast answers tasks requests without the go-sdk (lane.go); nil when
	// off.
	fast *fastLane
	// events serves events/stream POSTs (Config.Events).
	events func(w http.ResponseWriter, r *http.Request, body []byte) bool
}

// New returns the edge of c.
func New(c Config) *Handler {
	var base mcp.StreamableHTTPOptions
	if c.Options != nil {
		base = *c.Options
	}
	get := func(*http.Request) *mcp.Server { return c.Server }
	stateful := base
	stateful.Stateless = false
	stateless := base
	stateless.Stateless = true
	stateless.PropagateRequestCancellation = true
	stateless.EventStore = nil
	slow := ext2026.RoutingGuard(mcp.NewStreamableHTTPHandler(get, &stateless))
	h := &Handler{
		v2026:     c.V2026,
		v25:       c.V2025,
		stateful:  mcp.NewStreamableHTTPHandler(get, &stateful),
		stateless: slow,
		events:    c.Events,
	}
	if c.FastLane {
		h.fast = newFastLane(c.Tasks, c.V2026, c.V2025, stateless, slow)
	}
	return h
}

// CallInFlight notes a call with the ID id in flight on the fast lane for
// the 2025-11-25 session sid, as while the lane answers it (for the
// tests of the duplicate answer); the returned function ends it. It does
// nothing when h has no 2025-11-25 fast lane.
func (h *Handler) CallInFlight(sid string, id jsonrpc.ID) (end func()) {
	if h.fast == nil || h.fast.sessions == nil {
		return func() {}
	}
	ls, key := h.fast.sessions, []string{idKey(id)}
	ls.count(sid, key, true, 1)
	return func() { ls.count(sid, key, true, -1) }
}

// ServeHTTP sends r to the handler of its wire.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isStateless(w, r) {
		h.serveStateless(w, r)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	var ls *sessions
	if h.fast != nil {
		ls = h.fast.sessions
	}
	switch r.Method {
	case http.MethodPost:
		if sid == "" && ls != nil {
			// It may create a session: the session's handlers find the
			// fast lane's record in its context (Register).
			r = r.WithContext(context.WithValue(r.Context(), sessionsKey{}, ls))
		}
		if r.Body != nil {
			body := readBody(w, r)
			if refuseMetaVersion(w, r, body) {
				return
			}
			if h.events != nil && body != nil && bytes.Contains(body, []byte(`"events/stream"`)) && h.events(w, r, body) {
				return
			}
			if ls != nil && sid != "" && body != nil && h.fast.serve25(w, r, sid, body) {
				return
			}
			body = liftTaskParam(r, body)
			if sid != "" && ls != nil {
				defer ls.slowPOST(sid, body)()
			}
			if id, ok := v1.ResultRequest(body); ok && sid != "" {
				// Its task's status notifications go on its stream.
				h.v25.ServeResultStream(w, r, h.stateful, id)
				return
			}
		}
	case http.MethodGet:
		// The session's standalone stream also carries its tasks' status
		// notifications.
		h.v25.ServeStream(w, r, h.stateful)
		return
	case http.MethodDelete:
		if sid != "" && ls != nil {
			// The lane answers the session no more, whatever the go-sdk
			// answers.
			ls.forget(sid)
		}
	}
	h.stateful.ServeHTTP(w, r)
}

// serveStateless serves a 2026-07-28 request: on the fast lane, as a
// listen with taskIds, or with the go-sdk's stateless handler.
func (h *Handler) serveStateless(w http.ResponseWriter, r *http.Request) {
	if h.fast != nil && h.fast.serve(w, r) {
		return
	}
	if m := r.Header.Get("Mcp-Method"); r.Method == http.MethodPost && r.Body != nil && (m == "" || m == wire.MethodSubscriptionsListen || m == "events/stream") {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcp.DefaultMaxRequestBodyBytes))
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		if err == nil && bytes.Contains(body, []byte(`"taskIds"`)) && h.v2026.ServeListen(w, r, body, h.stateless) {
			return
		}
		if err == nil && h.events != nil && bytes.Contains(body, []byte(`"events/stream"`)) && h.events(w, r, body) {
			return
		}
	}
	h.stateless.ServeHTTP(w, r)
}

// readBody reads r's body whole, and leaves in its place what it read
// (and the rest, if it could not read it whole: the go-sdk then refuses
// it). It returns the body, nil if it could not be read whole.
func readBody(w http.ResponseWriter, r *http.Request) []byte {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcp.DefaultMaxRequestBodyBytes))
	if err != nil {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return body
}

// liftTaskParam carries the 2025-11-25 `task` parameter of a tools/call
// across the go-sdk (see v20251125.LiftTaskMessage): r's body, read
// whole as body (nil if it could not be), is replaced by the lifted one,
// which it returns.
func liftTaskParam(r *http.Request, body []byte) []byte {
	if body == nil {
		return nil
	}
	lifted, ok := v1.LiftTaskMessage(body)
	if ok {
		r.Body = io.NopCloser(bytes.NewReader(lifted))
		r.ContentLength = int64(len(lifted))
	}
	return lifted
}

// refuseMetaVersion answers a request bound for the stateful handler
// whose params._meta names a protocol version: its Mcp-Protocol-Version
// header (or its session) says otherwise, and the go-sdk would answer
// that the header's version "is not supported" while listing it as
// supported (issue 25, L12). It says instead that the two disagree,
// naming both, with -32020 (header mismatch; -32602 for a 2025-11-25
// version in _meta, which has none), and reports whether it
// answered. body is r's body read whole (nil: not read; the go-sdk
// answers); notifications and batches are left to the go-sdk.
func refuseMetaVersion(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if body == nil || !bytes.Contains(body, []byte(mcp.MetaKeyProtocolVersion)) {
		return false
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || len(msg.ID) == 0 || bytes.Equal(msg.ID, []byte("null")) {
		return false
	}
	var metaVersion string
	if json.Unmarshal(msg.Params.Meta[mcp.MetaKeyProtocolVersion], &metaVersion) != nil || metaVersion == "" {
		return false
	}
	header := r.Header.Get("Mcp-Protocol-Version")
	code, text := mcp.CodeHeaderMismatch, ""
	switch {
	case header != "" && header != metaVersion:
		text = fmt.Sprintf("the Mcp-Protocol-Version header %q and the request's _meta %q %q disagree: send the same version in both "+
			"(%s and later: no Mcp-Session-Id, the version in both; %s: no %q in _meta)",
			header, mcp.MetaKeyProtocolVersion, metaVersion, ext2026.Version, v1.Version, mcp.MetaKeyProtocolVersion)
	case metaVersion >= ext2026.Version:
		text = fmt.Sprintf("the request's _meta %q is %q, which is stateless, but it was sent on a session (Mcp-Session-Id): "+
			"send it without Mcp-Session-Id and with Mcp-Protocol-Version %q", mcp.MetaKeyProtocolVersion, metaVersion, metaVersion)
	default:
		code = jsonrpc.CodeInvalidParams
		text = fmt.Sprintf("the request's _meta %q names %q, but a per-request protocol version is of %s and later: "+
			"a %s request carries none (its version is the session's)", mcp.MetaKeyProtocolVersion, metaVersion, ext2026.Version, metaVersion)
	}
	data, _ := json.Marshal(map[string]string{"header": header, "meta": metaVersion})
	out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID,
		"error": map[string]any{"code": code, "message": text, "data": json.RawMessage(data)}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(out)
	return true
}

// isStateless reports whether r is of the stateless 2026-07-28 wire (see
// the package doc); a POST body it reads to tell is left in place.
func isStateless(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Mcp-Session-Id") != "" {
		return false
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		return v >= ext2026.Version
	}
	if r.Method != http.MethodPost || r.Body == nil {
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcp.DefaultMaxRequestBodyBytes))
	// Whatever was read is handed on; an oversized or broken body is then
	// rejected by the SDK handler.
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	if err != nil {
		return false
	}
	var msg struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return false
	}
	_, ok := msg.Params.Meta[mcp.MetaKeyProtocolVersion]
	return ok
}
