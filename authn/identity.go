package authn

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcptask/mcptask/task"
)

// MaxNameLen is the longest principal or tenant accepted, in bytes.
const MaxNameLen = 256

// UserID returns the go-sdk UserID of an identity: tenant + "/" +
// principal. Both must satisfy [ValidateName] (the tenant may be empty),
// so the result is unambiguous: [SplitUserID] recovers both parts.
func UserID(tenant, principal string) string {
	return task.UserID(tenant, principal)
}

// SplitUserID returns the tenant and principal of a UserID made by
// [UserID]; ok is false if id has no "/".
func SplitUserID(id string) (tenant, principal string, ok bool) {
	return task.SplitUserID(id)
}

// ValidateName checks a principal or tenant: at most [MaxNameLen] bytes
// of valid UTF-8, with no "/", no white space and no control character.
// A principal must not be empty; a tenant may be (a single-tenant
// deployment), which the caller decides.
func ValidateName(kind, s string) error {
	switch {
	case len(s) > MaxNameLen:
		return fmt.Errorf("%s is longer than %d bytes", kind, MaxNameLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s %q is not valid UTF-8", kind, s)
	case strings.Contains(s, "/"):
		return fmt.Errorf("%s %q contains \"/\"", kind, s)
	case strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return fmt.Errorf("%s %q contains white space or a control character", kind, s)
	}
	return nil
}

// validateIdentity checks a principal (required) and a tenant (optional).
func validateIdentity(principal, tenant string) error {
	if principal == "" {
		return fmt.Errorf("principal is empty")
	}
	if err := ValidateName("principal", principal); err != nil {
		return err
	}
	return ValidateName("tenant", tenant)
}

// validateScope checks one scope token (RFC 6749 §3.3: no space, not
// empty).
func validateScope(s string) error {
	if s == "" {
		return fmt.Errorf("empty scope")
	}
	for _, r := range s {
		if r <= ' ' || r == '"' || r == '\\' || r == 0x7f {
			return fmt.Errorf("scope %q contains a character outside RFC 6749's scope-token", s)
		}
	}
	return nil
}
