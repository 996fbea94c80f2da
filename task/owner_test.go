package task

import "testing"

func TestOwnerIdentity(t *testing.T) {
	for owner, want := range map[Owner][3]string{
		UserOwner("acme", "alice"): {"alice", "acme", ""},
		UserOwner("", "alice"):     {"alice", "", ""},
		TokenOwner("solo"):         {"solo", "", ""},
		TokenOwner("acme/bob"):     {"bob", "acme", ""},
		AnonymousOwner(""):         {"anonymous", "", ""},
		AnonymousOwner("s-123"):    {"anonymous", "", "s-123"},
		"custom-owner":             {"custom-owner", "", ""},
	} {
		p, tn, s := owner.Identity()
		if [3]string{p, tn, s} != want {
			t.Errorf("%q.Identity() = %q %q %q, want %q", owner, p, tn, s, want)
		}
	}
}

func TestOwnerForms(t *testing.T) {
	if got := UserOwner("acme", "alice"); got != "user:acme/alice" {
		t.Errorf("UserOwner = %q", got)
	}
	if got := TokenOwner("acme/alice"); got != UserOwner("acme", "alice") {
		t.Errorf("TokenOwner(acme/alice) = %q, want UserOwner(acme, alice)", got)
	}
	if got := AnonymousOwner("s1"); got != "anon:s1" || !got.Anonymous() {
		t.Errorf("AnonymousOwner = %q, anonymous %v", got, got.Anonymous())
	}
	if UserOwner("a", "b").Anonymous() || Owner("custom").Anonymous() {
		t.Error("a user or custom owner is anonymous")
	}
	if AnonymousOwner("s1").RateKey() != AnonymousOwner("") || UserOwner("a", "b").RateKey() != UserOwner("a", "b") {
		t.Error("RateKey: anonymous owners share one bucket, others have their own")
	}
}

func TestMayAccess(t *testing.T) {
	alice, bob := UserOwner("acme", "alice"), UserOwner("acme", "bob")
	for _, c := range []struct {
		owner, requester Owner
		want             bool
	}{
		{alice, alice, true},
		{alice, bob, false},
		{alice, AnonymousOwner(""), false},
		{AnonymousOwner("s1"), alice, false},
		{AnonymousOwner("s1"), AnonymousOwner("s2"), true},
		{"custom", "custom", true},
		{"custom", "other", false},
	} {
		if got := MayAccess(c.owner, c.requester); got != c.want {
			t.Errorf("MayAccess(%q, %q) = %v, want %v", c.owner, c.requester, got, c.want)
		}
	}
}

// TestRateKey: anonymous requesters (every 2025-11-25 session is an
// owner scope of its own) share one rate bucket; authenticated ones have
// their own.
func TestRateKey(t *testing.T) {
	for owner, want := range map[Owner]Owner{
		"anon:":                 "anon:",
		"anon:session-1":        "anon:",
		"anon:session-2":        "anon:",
		"user:acme/alice":       "user:acme/alice",
		"user:globex/alice":     "user:globex/alice",
		"custom:owner-function": "custom:owner-function",
	} {
		if got := owner.RateKey(); got != want {
			t.Errorf("%q.RateKey() = %q, want %q", owner, got, want)
		}
	}
}
