// Package secrets replaces the values a tool source holds as secrets (a
// job API's credentials, the values of a command's secret files) in what
// the source stores or sends: results, status messages, log lines and
// errors. The HTTP job tools (source/httpjob) and the command tools (source/command) share
// it.
package secrets

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Redacted replaces a secret.
const Redacted = "[redacted]"

// MinLen is the least length (spaces aside) of a value taken as a secret:
// a shorter one would be replaced wherever its letters happen to occur.
const MinLen = 4

// Set is a set of secrets. The zero value holds none and replaces
// nothing.
type Set struct {
	vals []string // longest first: a secret holding another is replaced whole
}

// Add adds v, unless it is shorter than MinLen or held already.
func (s *Set) Add(v string) {
	if len(strings.TrimSpace(v)) < MinLen || slices.Contains(s.vals, v) {
		return
	}
	i, _ := slices.BinarySearchFunc(s.vals, v, func(e, v string) int { return len(v) - len(e) })
	s.vals = slices.Insert(s.vals, i, v)
}

// Len returns how many secrets s holds.
func (s *Set) Len() int { return len(s.vals) }

// String returns v with every secret replaced by Redacted.
func (s *Set) String(v string) string {
	for _, sec := range s.vals {
		v = strings.ReplaceAll(v, sec, Redacted)
	}
	return v
}

// Bytes returns b with every secret replaced by Redacted: b itself when
// it holds none, else a copy.
func (s *Set) Bytes(b []byte) []byte {
	for _, sec := range s.vals {
		if bytes.Contains(b, []byte(sec)) {
			b = bytes.ReplaceAll(b, []byte(sec), []byte(Redacted))
		}
	}
	return b
}

// Value returns v, a decoded JSON value, with the secrets replaced in its
// strings and object keys.
func (s *Set) Value(v any) any {
	switch v := v.(type) {
	case string:
		return s.String(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[s.String(k)] = s.Value(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = s.Value(e)
		}
		return out
	}
	return v
}

// Result replaces the secrets in res, in place: in its text contents and
// in its structured content. Structured content other than a decoded
// JSON value (json.RawMessage, a struct) is decoded first, and dropped if
// it does not encode.
func (s *Set) Result(res *mcp.CallToolResult) {
	if res == nil || len(s.vals) == 0 {
		return
	}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			tc.Text = s.String(tc.Text)
		}
	}
	switch sc := res.StructuredContent.(type) {
	case nil:
	case map[string]any, []any, string:
		res.StructuredContent = s.Value(sc)
	default:
		b, err := json.Marshal(sc)
		var v any
		if err != nil || json.Unmarshal(b, &v) != nil {
			res.StructuredContent = nil
			return
		}
		res.StructuredContent = s.Value(v)
	}
}
