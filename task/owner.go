package task

import "strings"

// Owner is the requester a task is bound to, in the form stores keep. It is
// built only by [UserOwner], [TokenOwner] and [AnonymousOwner] (or taken
// as it is from a custom owner function) and read only through its
// methods: no other package formats or parses owner strings.
//
//   - "user:TENANT/PRINCIPAL": an authenticated principal of a tenant
//     ("user:/PRINCIPAL" without tenant, "user:ID" for a user ID that names
//     no tenant);
//   - "anon:SCOPE": an unauthenticated requester; SCOPE (e.g. a 2025-11-25
//     session ID, or empty) scopes listing only.
//
// Anything else is an owner made by a custom function, compared as it is.
type Owner string

const (
	userPrefix = "user:"
	anonPrefix = "anon:"
)

// AnonymousPrefix starts the owner of a task created without an
// authenticated requester. What follows it (e.g. a session ID) scopes
// listing only: any anonymous requester who knows a task's unguessable ID
// may use it, as the spec allows when no authorization context exists.
const AnonymousPrefix = anonPrefix

// UserOwner returns the owner of an authenticated principal of tenant
// (empty for a single-tenant deployment). Neither may contain "/".
func UserOwner(tenant, principal string) Owner {
	return TokenOwner(UserID(tenant, principal))
}

// UserID is the user ID of a principal of tenant, "TENANT/PRINCIPAL", as
// bearer tokens carry it (the go-sdk's TokenInfo.UserID); [SplitUserID]
// undoes it. Neither part may contain "/".
func UserID(tenant, principal string) string { return tenant + "/" + principal }

// SplitUserID returns the tenant and principal of a user ID made by
// [UserID]; ok is false if id names no tenant.
func SplitUserID(id string) (tenant, principal string, ok bool) {
	return strings.Cut(id, "/")
}

// TokenOwner returns the owner of the user a verified bearer token names:
// the go-sdk's TokenInfo.UserID, "TENANT/PRINCIPAL" as package authn makes
// it, or any other user ID taken as it is.
func TokenOwner(userID string) Owner { return Owner(userPrefix + userID) }

// AnonymousOwner returns the owner of an unauthenticated requester whose
// tasks are listed under scope ("" for none).
func AnonymousOwner(scope string) Owner { return Owner(anonPrefix + scope) }

// Anonymous reports whether o is an unauthenticated requester.
func (o Owner) Anonymous() bool { return strings.HasPrefix(string(o), anonPrefix) }

// Identity splits o into the attributes an audit record names:
// "user:TENANT/PRINCIPAL" gives principal and tenant; "user:ID" the
// principal ID; an anonymous owner the principal "anonymous" and its scope
// as session; any other owner is the principal as it is.
func (o Owner) Identity() (principal, tenant, session string) {
	s := string(o)
	switch {
	case strings.HasPrefix(s, userPrefix):
		id := s[len(userPrefix):]
		if t, p, ok := SplitUserID(id); ok {
			return p, t, ""
		}
		return id, "", ""
	case strings.HasPrefix(s, anonPrefix):
		return "anonymous", "", s[len(anonPrefix):]
	}
	return s, "", ""
}

// RateKey is the requester whose rate bucket o draws on: o itself, or for
// every anonymous owner the one anonymous bucket, so that opening more
// sessions buys no more throughput.
func (o Owner) RateKey() Owner {
	if o.Anonymous() {
		return AnonymousOwner("")
	}
	return o
}

// KeyScope is the owner an idempotency key of o belongs to: o itself, or
// for every anonymous owner the one anonymous scope. Any anonymous
// requester may use any anonymous task, so a key names one call for all
// of them: a retry from another session (a client that restarted) finds
// the task instead of starting the work again.
func (o Owner) KeyScope() Owner { return o.RateKey() }

// MayAccess reports whether requester may see and act on a task owned by
// owner: the same requester, or two anonymous ones.
func MayAccess(owner, requester Owner) bool {
	return owner == requester || (owner.Anonymous() && requester.Anonymous())
}
