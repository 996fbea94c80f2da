package mcptask

import "testing"

// TestRateKey: anonymous requesters (every 2025-11-25 session is an
// owner scope of its own) share one rate bucket; authenticated ones have
// their own.
func TestRateKey(t *testing.T) {
	for owner, want := range map[string]string{
		"anon:":                 "anon:",
		"anon:session-1":        "anon:",
		"anon:session-2":        "anon:",
		"user:acme/alice":       "user:acme/alice",
		"user:globex/alice":     "user:globex/alice",
		"custom:owner-function": "custom:owner-function",
	} {
		if got := rateKey(owner); got != want {
			t.Errorf("rateKey(%q) = %q, want %q", owner, got, want)
		}
	}
}
