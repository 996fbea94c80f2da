package ext2026

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// UsesWire reports whether a request's _meta selects the 2026-07-28 (or a
// later) stateless wire.
func UsesWire(meta map[string]any) bool {
	v, _ := meta[MetaProtocolVersion].(string)
	return v >= Version
}

// Declares reports whether a request's _meta declares the tasks extension in
// its per-request client capabilities. It is decided for every request
// anew; nothing is remembered between requests.
func Declares(meta map[string]any) bool {
	caps, _ := meta[MetaClientCapabilities].(map[string]any)
	exts, _ := caps["extensions"].(map[string]any)
	_, ok := exts[ExtensionID]
	return ok
}

// MissingCapability returns the -32021 error for a request that needs the
// tasks extension but did not declare it. data.requiredCapabilities names
// exactly the extension (written by hand: the go-sdk's ClientCapabilities
// always encodes a roots member).
func MissingCapability(what string) error {
	return &jsonrpc.Error{
		Code:    mcp.CodeMissingRequiredClientCapabilities,
		Message: what + " requires the client capability extensions[\"" + ExtensionID + "\"] on the request",
		Data:    json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + ExtensionID + `":{}}}}`),
	}
}
