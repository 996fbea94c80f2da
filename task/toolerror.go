package task

import (
	"bytes"
	"encoding/json"

	"github.com/mcptask/mcptask/internal/jsonscan"
)

// ToolError reports whether result, a stored tools/call result (a
// CallToolResult as JSON), says isError: true at its top level. It
// answers exactly as decoding result with encoding/json into a struct
// with one bool field tagged "isError" and requiring no error would (the
// member's name matched case-insensitively, the last match winning, null
// leaving it false, a value of another type or invalid JSON making it
// false), without decoding anything else: the other members, however
// large, are only scanned over.
func ToolError(result []byte) bool {
	isError := false
	typeError := false
	if !jsonscan.EachMember(result, func(key, value []byte) bool {
		if isErrorKey(key) {
			switch string(value) {
			case "true":
				isError = true
			case "false":
				isError = false
			case "null":
			default:
				typeError = true // the decoding fails
				return false
			}
		}
		return true
	}) || typeError {
		return false // null, another type than an object, or invalid JSON
	}
	return isError
}

// isErrorKey reports whether the quoted member name key is "isError" as
// encoding/json matches names: unescaped, case-insensitively.
func isErrorKey(key []byte) bool {
	name := key[1 : len(key)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		var s string
		if json.Unmarshal(key, &s) != nil {
			return false
		}
		name = []byte(s)
	}
	return bytes.EqualFold(name, []byte("isError"))
}
