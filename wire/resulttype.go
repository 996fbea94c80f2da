package wire

import (
	"bytes"
	"encoding/json"

	"github.com/mcptask/mcptask/internal/jsonscan"
)

// WithResultType returns result, a stored tools/call result (a JSON
// object), as a 2026-07-28 result: with a top-level "resultType" member
// of value resultType added first when it has none. A result that already
// names one (an upstream's own 2026 result, relayed), or that is not a
// valid JSON object, is returned as it is. The other members are scanned
// over, never decoded; the answer is a new slice when a member is added.
//
// The stored result is the plain CallToolResult of every wire; the
// 2026-07-28 revision requires resultType on every result, including one
// embedded in a task ("the structure matches the result type of the
// original request").
func WithResultType(result json.RawMessage, resultType string) json.RawMessage {
	has := false
	if !jsonscan.EachMember(result, func(key, _ []byte) bool {
		has = isMember(key, "resultType")
		return !has
	}) || has {
		return result
	}
	open := bytes.IndexByte(result, '{')
	empty := len(bytes.TrimSpace(result[open+1:])) == 1 // only the closing brace
	member, _ := json.Marshal(resultType)
	out := make([]byte, 0, len(result)+len(member)+16)
	out = append(out, result[:open+1]...)
	out = append(out, `"resultType":`...)
	out = append(out, member...)
	if !empty {
		out = append(out, ',')
	}
	return append(out, result[open+1:]...)
}

// isMember reports whether the quoted member name key is name, as a
// JSON decoder that matches names exactly reads it (escapes resolved).
func isMember(key []byte, name string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key[1:len(key)-1]) == name
	}
	var s string
	return json.Unmarshal(key, &s) == nil && s == name
}
