package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// statelessVersion is the first protocol revision of the stateless wire.
const statelessVersion = "2026-07-28"

// maxPeekBytes bounds how much of a POST body the router reads to classify
// it; the SDK's own default body limit is the same.
const maxPeekBytes = mcp.DefaultMaxRequestBodyBytes

// wireRouter serves one endpoint for both wire revisions. The SDK accepts
// the 2026-07-28 wire only on a Stateless StreamableHTTPHandler, and
// server-to-client requests (sampling, elicitation) of the 2025-11-25 wire
// only on a stateful one, so each request goes to the handler of its wire:
//
//   - a request with Mcp-Session-Id belongs to a 2025-11-25 session;
//   - otherwise an MCP-Protocol-Version header decides: 2026-07-28 or later
//     (or any unknown version sorting after it, such as "v999.0.0") is
//     stateless, so that the SDK answers it with the stateless wire's errors;
//   - without the header, a POST whose params._meta carries
//     io.modelcontextprotocol/protocolVersion is stateless (the SDK then
//     reports the missing header);
//   - everything else, notably initialize, is stateful.
type wireRouter struct {
	stateful, stateless http.Handler
}

func (rt *wireRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rt.isStateless(w, r) {
		rt.stateless.ServeHTTP(w, r)
		return
	}
	rt.stateful.ServeHTTP(w, r)
}

func (rt *wireRouter) isStateless(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Mcp-Session-Id") != "" {
		return false
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
		return v >= statelessVersion
	}
	if r.Method != http.MethodPost || r.Body == nil {
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPeekBytes))
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
