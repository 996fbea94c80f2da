package task

import (
	"errors"
	"strings"
	"testing"
)

// validIDChar is the task ID alphabet, written out independently of ParseID.
func validIDChar(c byte) bool {
	return strings.IndexByte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:", c) >= 0
}

func TestNewID(t *testing.T) {
	const n = 10000
	seen := make(map[ID]bool, n)
	for range n {
		id := NewID()
		if len(id) != 32 {
			t.Fatalf("NewID() = %q has %d characters, want 32", id, len(id))
		}
		for i := 0; i < len(id); i++ {
			if c := id[i]; !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
				t.Fatalf("NewID() = %q contains %q, outside [a-z2-7]", id, c)
			}
		}
		if seen[id] {
			t.Fatalf("NewID() returned %q twice", id)
		}
		seen[id] = true
		got, err := ParseID(string(id))
		if err != nil || got != id {
			t.Fatalf("ParseID(%q) = %q, %v", id, got, err)
		}
	}
}

func TestParseIDAccepts(t *testing.T) {
	for _, s := range []string{
		"a",
		"Z",
		"0",
		"task-123",
		"a.b:c_d-e",
		"550e8400-e29b-41d4-a716-446655440000",
		"urn:task:ABC.def",
		strings.Repeat("x", MaxIDLength),
	} {
		id, err := ParseID(s)
		if err != nil {
			t.Errorf("ParseID(%q) error = %v", s, err)
		}
		if string(id) != s {
			t.Errorf("ParseID(%q) = %q", s, id)
		}
	}
}

func TestParseIDRejects(t *testing.T) {
	for _, s := range []string{
		"",
		strings.Repeat("x", MaxIDLength+1),
		"has space",
		" lead",
		"trail ",
		"a/b",
		"a\\b",
		"a%2F",
		"a?b",
		"a#b",
		"a+b",
		"a=b",
		"quote\"",
		"new\nline",
		"tab\t",
		"nul\x00",
		"caf\u00e9",
		"\xff",
		"emoji\U0001F600",
	} {
		id, err := ParseID(s)
		if err == nil {
			t.Errorf("ParseID(%q) accepted %q", s, id)
			continue
		}
		if !errors.Is(err, ErrMalformedID) {
			t.Errorf("ParseID(%q) error %v does not wrap ErrMalformedID", s, err)
		}
		if id != "" {
			t.Errorf("ParseID(%q) returned %q with an error", s, id)
		}
	}
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{
		"", "a", string(NewID()), "task-1", "a.b:c_d-e", "has space", "caf\u00e9", "\x00",
		strings.Repeat("y", MaxIDLength), strings.Repeat("y", MaxIDLength+1),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		want := len(s) >= 1 && len(s) <= MaxIDLength
		for i := 0; want && i < len(s); i++ {
			want = validIDChar(s[i])
		}
		if err != nil {
			if want {
				t.Fatalf("ParseID(%q) rejected a valid ID: %v", s, err)
			}
			if !errors.Is(err, ErrMalformedID) {
				t.Fatalf("ParseID(%q) error %v does not wrap ErrMalformedID", s, err)
			}
			if id != "" {
				t.Fatalf("ParseID(%q) returned %q with an error", s, id)
			}
			return
		}
		if !want {
			t.Fatalf("ParseID(%q) accepted an invalid ID", s)
		}
		if string(id) != s {
			t.Fatalf("ParseID(%q) = %q, want the input unchanged", s, id)
		}
		if len(id) == 0 || len(id) > MaxIDLength {
			t.Fatalf("ParseID(%q) accepted length %d", s, len(id))
		}
		for i := 0; i < len(id); i++ {
			if !validIDChar(id[i]) {
				t.Fatalf("ParseID(%q) accepted the character %q", s, id[i])
			}
		}
	})
}
