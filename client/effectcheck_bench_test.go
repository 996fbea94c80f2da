package client_test

import (
	"testing"

	"github.com/mcptask/mcptask/client"
)

// BenchmarkCallToolEffectCheck measures CallTool (a task created, SQLite
// FULL, loopback HTTP, 2026-07-28) with the unknown-effect check made in
// the call (mcptask's effectCheck) against the listing a client makes of
// a server that does not check (listingOnly): one request less per call.
// Compare the variants of one run.
func BenchmarkCallToolEffectCheck(b *testing.B) {
	for _, v := range []struct {
		name   string
		listed bool
	}{{"in-call", false}, {"listing-first", true}} {
		b.Run(v.name, func(b *testing.B) {
			o := serverOpts{}
			if v.listed {
				o.wrap = listingOnly
			}
			s := newServer(b, o)
			s.Release()
			c := dial(b, s.URL, &client.Options{ProtocolVersion: "2026-07-28"})
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.CallTool(ctx, "rollout", nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
