package task

import "strings"

// AnonymousPrefix starts the owner of a task created without an
// authenticated requester. What follows it (e.g. a session ID) scopes
// listing only: any anonymous requester who knows a task's unguessable ID
// may use it, as the spec allows when no authorization context exists.
const AnonymousPrefix = "anon:"

// MayAccess reports whether requester may see and act on a task owned by
// owner: the same authenticated requester, or two anonymous ones.
func MayAccess(owner, requester string) bool {
	if owner == requester {
		return true
	}
	return strings.HasPrefix(owner, AnonymousPrefix) && strings.HasPrefix(requester, AnonymousPrefix)
}
