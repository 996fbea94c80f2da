package wire

import (
	"bytes"
	"encoding/json"
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
	if !eachMember(result, func(key, value []byte) bool {
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

// eachMember calls fn with the quoted name and the raw value of each
// top-level member of the JSON object b, in order, until fn returns false.
// It reports whether b is a valid JSON object; the values are scanned
// over, never decoded.
func eachMember(b []byte, fn func(key, value []byte) bool) bool {
	if !json.Valid(b) {
		return false
	}
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		keyEnd := valueEnd(b, i)
		key := b[i:keyEnd]
		i = skipSpace(b, keyEnd)
		i = skipSpace(b, i+1) // the colon
		end := valueEnd(b, i)
		if !fn(key, b[i:end]) {
			return true
		}
		i = skipSpace(b, end)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return true
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

// skipSpace returns the index of the first byte of b at or after i that
// is not JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the index just after the JSON value that starts at i
// in b, which is valid JSON.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	default: // a number or a literal
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// stringEnd returns the index just after the JSON string that starts
// (with its quote) at i in b.
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}
