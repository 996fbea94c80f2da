package wire_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/wire"
)

func TestWithResultType(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"content":[]}`, `{"resultType":"complete","content":[]}`},
		{` { "content" : [ ] } `, ` {"resultType":"complete", "content" : [ ] } `},
		{`{}`, `{"resultType":"complete"}`},
		{`{ }`, `{"resultType":"complete" }`},
		{`{"resultType":"complete","content":[]}`, `{"resultType":"complete","content":[]}`},
		{`{"content":[],"resultType":"task"}`, `{"content":[],"resultType":"task"}`},
		{`{"content":[],"result\u0054ype":"x"}`, `{"content":[],"result\u0054ype":"x"}`},
		// A nested resultType is not the result's own.
		{`{"structuredContent":{"resultType":"x"}}`, `{"resultType":"complete","structuredContent":{"resultType":"x"}}`},
		// A name that differs in case is another member to a 2026 client.
		{`{"ResultType":"x"}`, `{"resultType":"complete","ResultType":"x"}`},
		{`[1]`, `[1]`},
		{`null`, `null`},
		{`{"content":`, `{"content":`},
		{``, ``},
	}
	for _, c := range cases {
		if got := string(wire.WithResultType(json.RawMessage(c.in), "complete")); got != c.want {
			t.Errorf("WithResultType(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzWithResultType: the answer of a valid object is a valid object
// whose top-level resultType is the one it had, else the one added, and
// whose other members are unchanged.
func FuzzWithResultType(f *testing.F) {
	for _, s := range []string{`{"content":[]}`, `{}`, `{"resultType":"task"}`, `{"a":{"resultType":1},"b":"}"}`, `[]`, `"x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := wire.WithResultType(json.RawMessage(s), "complete")
		var before map[string]json.RawMessage
		if json.Unmarshal([]byte(s), &before) != nil || before == nil {
			if string(got) != s {
				t.Fatalf("WithResultType(%q) = %q, want it unchanged", s, got)
			}
			return
		}
		var after map[string]json.RawMessage
		if err := json.Unmarshal(got, &after); err != nil {
			t.Fatalf("WithResultType(%q) = %q: %v", s, got, err)
		}
		var rt any
		if v, ok := exactMember(t, s, "resultType"); ok {
			rt = v
		} else {
			rt = "complete"
		}
		if v, _ := exactMember(t, string(got), "resultType"); !reflect.DeepEqual(v, rt) {
			t.Fatalf("WithResultType(%q) = %q: resultType %v, want %v", s, got, v, rt)
		}
	})
}

// exactMember returns the last top-level member named exactly name of the
// JSON object s, decoded.
func exactMember(t *testing.T, s, name string) (any, bool) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var v any
	found := false
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var val any
		if err := dec.Decode(&val); err != nil {
			t.Fatal(err)
		}
		if k == name {
			v, found = val, true
		}
	}
	return v, found
}
