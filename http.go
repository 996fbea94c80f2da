package mcptask

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
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
// The 2026-07-28 tasks/get, tasks/update, tasks/cancel and tasks/delete are
// answered on the fast lane, without the go-sdk's per-request machinery,
// with Options.FastLane (see fastlane.go).
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
	switch r.Method {
	case http.MethodPost:
		if r.Body != nil {
			body := liftTaskParam(w, r)
			if id, ok := v1.ResultRequest(body); ok && r.Header.Get("Mcp-Session-Id") != "" {
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
	}
	rt.stateful.ServeHTTP(w, r)
}

// liftTaskParam carries the 2025-11-25 `task` parameter of a tools/call
// across the go-sdk (see v20251125.LiftTaskMessage).
// It returns the body as handed on (nil if it could not be read whole).
func liftTaskParam(w http.ResponseWriter, r *http.Request) []byte {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcp.DefaultMaxRequestBodyBytes))
	if err != nil {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		return nil
	}
	body, _ = v1.LiftTaskMessage(body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return body
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
