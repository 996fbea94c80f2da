package store_test

import (
	"testing"

	"github.com/mcptask/mcptask/store"
)

// FuzzParseEventPos: a cursor from a client parses or is refused, never
// panics, and a parsed one prints back to itself.
func FuzzParseEventPos(f *testing.F) {
	for _, s := range []string{"e1.0.0", "e1.zz.1", "e1.-1.0", "e1..", "e2.1.1", "", "e1.1.1.1", "e1.9999999999999999999.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := store.ParseEventPos(s)
		if err != nil {
			return
		}
		q, err := store.ParseEventPos(p.String())
		if err != nil || q != p {
			t.Fatalf("%q parsed to %+v, which prints as %q and parses to %+v (%v)", s, p, p.String(), q, err)
		}
	})
}
