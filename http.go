package mcptask

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Handler returns the Streamable HTTP handler of the server: one endpoint
// for both wire revisions. The go-sdk serves the 2026-07-28 wire only on a
// stateless handler and the 2025-11-25 wire (sessions, server-to-client
// requests) only on a stateful one, so each request goes to the handler of
// its wire:
//
//   - a request with Mcp-Session-Id belongs to a 2025-11-25 session;
//   - otherwise an MCP-Protocol-Version header of 2026-07-28 or later (or an
//     unknown version sorting after it) is stateless;
//   - without that header, a POST whose params._meta names a protocol
//     version is stateless;
//   - everything else, notably initialize, is stateful.
//
// With Options.FastLane, the 2026-07-28 tasks/get, tasks/update,
// tasks/cancel and tasks/delete, and the 2025-11-25 tasks/get and
// tasks/result of a finished task, are answered on the fast lane, without
// the go-sdk's per-request machinery (see fastlane.go, fastlane2025.go).
//
// opts configures both go-sdk handlers (nil means defaults); Stateless is
// set per handler. The stateless handler also gets the routing check of the
// tasks methods ([ext2026.RoutingGuard]).
func (s *Server) Handler(opts *mcp.StreamableHTTPOptions) http.Handler {
	var base mcp.StreamableHTTPOptions
	if opts != nil {
		base = *opts
	}
	get := func(*http.Request) *mcp.Server { return s.mcp }
	stateful := base
	stateful.Stateless = false
	stateless := base
	stateless.Stateless = true
	stateless.PropagateRequestCancellation = true
	stateless.EventStore = nil
	slow := ext2026.RoutingGuard(mcp.NewStreamableHTTPHandler(get, &stateless))
	return &wireRouter{
		s:         s,
		fast:      newFastLane(s, stateless, slow),
		stateful:  mcp.NewStreamableHTTPHandler(get, &stateful),
		stateless: slow,
	}
}

// wireRouter sends each request to the handler of its wire (see Handler).
type wireRouter struct {
	s                   *Server
	stateful, stateless http.Handler
	// fast answers 2026-07-28 tasks requests without the go-sdk (fastlane.go);
	// nil when off.
	fast *fastLane
}

func (rt *wireRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isStateless(w, r) {
		if rt.fast != nil && rt.fast.serve(w, r) {
			return
		}
		if m := r.Header.Get("Mcp-Method"); r.Method == http.MethodPost && r.Body != nil && (m == "" || m == wire.MethodSubscriptionsListen) {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcp.DefaultMaxRequestBodyBytes))
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
			if err == nil && bytes.Contains(body, []byte(`"taskIds"`)) && rt.s.w26.ServeListen(w, r, body, rt.stateless) {
				return
			}
		}
		rt.stateless.ServeHTTP(w, r)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	var sessions *laneSessions
	if rt.fast != nil {
		sessions = rt.fast.sessions
	}
	switch r.Method {
	case http.MethodPost:
		if sid == "" && sessions != nil {
			// It may create a session: the session's handlers find the
			// fast lane's record in its context (registerSession).
			r = r.WithContext(context.WithValue(r.Context(), laneSessionsKey{}, sessions))
		}
		if r.Body != nil {
			body := readBody(w, r)
			if refuseMetaVersion(w, r, body) {
				return
			}
			if sessions != nil && sid != "" && body != nil && rt.fast.serve25(w, r, sid, body) {
				return
			}
			body = liftTaskParam(r, body)
			if sid != "" && sessions != nil {
				defer sessions.slowPOST(sid, body)()
			}
			if id, ok := v1.ResultRequest(body); ok && sid != "" {
				// Its task's status notifications go on its stream.
				rt.s.w25.ServeResultStream(w, r, rt.stateful, id)
				return
			}
		}
	case http.MethodGet:
		// The session's standalone stream also carries its tasks' status
		// notifications.
		rt.s.w25.ServeStream(w, r, rt.stateful)
		return
	case http.MethodDelete:
		if sid != "" && sessions != nil {
			// The lane answers the session no more, whatever the go-sdk
			// answers.
			sessions.forget(sid)
		}
	}
	rt.stateful.ServeHTTP(w, r)
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
