// Package jsonscan walks the top-level members of a JSON object without
// decoding them: the values, however large, are only scanned over.
package jsonscan

import "encoding/json"

// EachMember calls fn with the quoted name and the raw value of each
// top-level member of the JSON object b, in order, until fn returns false.
// It reports whether b is a valid JSON object; the values are scanned
// over, never decoded.
func EachMember(b []byte, fn func(key, value []byte) bool) bool {
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
