package authn

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// MinClearTokenLen is the shortest token accepted in clear in a tokens
// file, in bytes.
const MinClearTokenLen = 16

// TokenEntry is one entry of a tokens file. A tokens file is a JSON array
// of entries:
//
//	[
//	  {"token_sha256": "9f86d0…", "principal": "alice", "tenant": "acme",
//	   "scopes": ["tasks"], "expires": "2027-01-01T00:00:00Z"},
//	  {"token": "dev-token-not-for-production", "principal": "dev", "tenant": "local"}
//	]
//
// Exactly one of TokenSHA256 (the lower- or upper-case hex SHA-256 of the
// token, preferred: the file then holds no secret) and Token (the token in
// clear, for development; at least [MinClearTokenLen] bytes) must be set.
// Unknown fields are errors, so that a misspelt field is not silently
// ignored.
type TokenEntry struct {
	// TokenSHA256 is the hex SHA-256 of the token (`sha256sum` of the
	// token without a trailing newline).
	TokenSHA256 string `json:"token_sha256,omitempty"`
	// Token is the token in clear; prefer TokenSHA256.
	Token string `json:"token,omitempty"`
	// Principal names who holds the token; required, no "/".
	Principal string `json:"principal"`
	// Tenant names the principal's tenant; optional, no "/".
	Tenant string `json:"tenant,omitempty"`
	// Scopes are the token's OAuth scopes.
	Scopes []string `json:"scopes,omitempty"`
	// Expires, if set, is an RFC 3339 time after which the token is
	// refused.
	Expires string `json:"expires,omitempty"`
}

// staticToken is a loaded tokens-file entry.
type staticToken struct {
	hash      [sha256.Size]byte
	principal string
	tenant    string
	scopes    []string
	expires   time.Time // zero: never
}

// Tokens is a loaded tokens file: a set of static tokens.
type Tokens struct {
	list []staticToken
}

// Len returns the number of tokens.
func (t *Tokens) Len() int { return len(t.list) }

// LoadTokensFile reads and checks a tokens file (see [TokenEntry]).
func LoadTokensFile(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	defer f.Close()
	t, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return t, nil
}

// ParseTokens reads and checks a tokens file's content: a JSON array of
// [TokenEntry]. It rejects unknown fields, malformed hashes, invalid
// principals, tenants, scopes or expiry times, and the same token listed
// twice.
func ParseTokens(r io.Reader) (*Tokens, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var entries []TokenEntry
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("not a JSON array of token entries: %w", err)
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON array")
	}
	if len(entries) == 0 {
		return nil, errors.New("no tokens")
	}
	t := &Tokens{}
	seen := map[[sha256.Size]byte]int{}
	var errs []error
	for i, e := range entries {
		st, err := e.load()
		if err != nil {
			errs = append(errs, fmt.Errorf("entry %d: %w", i, err))
			continue
		}
		if j, dup := seen[st.hash]; dup {
			errs = append(errs, fmt.Errorf("entry %d: the same token as entry %d", i, j))
			continue
		}
		seen[st.hash] = i
		t.list = append(t.list, st)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

// load checks an entry and converts it.
func (e TokenEntry) load() (staticToken, error) {
	var st staticToken
	switch {
	case e.Token != "" && e.TokenSHA256 != "":
		return st, errors.New(`give "token_sha256" or "token", not both`)
	case e.TokenSHA256 != "":
		b, err := hex.DecodeString(e.TokenSHA256)
		if err != nil || len(b) != sha256.Size {
			return st, errors.New(`"token_sha256" must be 64 hexadecimal digits`)
		}
		copy(st.hash[:], b)
	case e.Token != "":
		if len(e.Token) < MinClearTokenLen {
			return st, fmt.Errorf(`"token" must be at least %d bytes`, MinClearTokenLen)
		}
		if strings.ContainsFunc(e.Token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return st, errors.New(`"token" contains white space or a control character`)
		}
		st.hash = sha256.Sum256([]byte(e.Token))
	default:
		return st, errors.New(`missing "token_sha256" (or "token")`)
	}
	if err := validateIdentity(e.Principal, e.Tenant); err != nil {
		return st, err
	}
	for _, s := range e.Scopes {
		if err := validateScope(s); err != nil {
			return st, err
		}
	}
	if e.Expires != "" {
		exp, err := time.Parse(time.RFC3339, e.Expires)
		if err != nil {
			return st, fmt.Errorf(`"expires" %q is not an RFC 3339 time`, e.Expires)
		}
		st.expires = exp
	}
	st.principal, st.tenant = e.Principal, e.Tenant
	st.scopes = append([]string(nil), e.Scopes...)
	return st, nil
}

// lookup returns the entry of token, comparing its SHA-256 with every
// entry's in constant time (the time taken does not depend on which
// entry, if any, matches, nor on how much of a hash matches).
func (t *Tokens) lookup(token string) (staticToken, bool) {
	h := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.list {
		if subtle.ConstantTimeCompare(h[:], t.list[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return staticToken{}, false
	}
	return t.list[found], true
}
