package dashboard

import "testing"

// TestCompactJSON: arguments are shown on one line, their keys in order,
// Go's HTML escapes undone, and every other escape kept.
func TestCompactJSON(t *testing.T) {
	for in, want := range map[string]string{
		"":     "",
		"null": "",
		`{ "b": 1,
		   "a": "\u003cb\u003e \u0026 \u003E" }`: `{"b":1,"a":"<b> & >"}`,
		`["\\u003c", "\"\u003c\"", "\u00e9\n"]`: `["\\u003c","\"<\"","\u00e9\n"]`,
		`not json`:                              `not json`,
	} {
		if got := compactJSON([]byte(in)); got != want {
			t.Errorf("compactJSON(%q) = %q, want %q", in, got, want)
		}
	}
}
