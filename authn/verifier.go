package authn

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// DefaultLeeway is the clock skew tolerated on a JWT's time claims when
// [Options.Leeway] is zero.
const DefaultLeeway = 30 * time.Second

// Options configure a [Verifier]. At least one of TokensFile, JWTKeyFile
// and JWKSFile must be set; JWTKeyFile and JWKSFile exclude each other.
type Options struct {
	// TokensFile is a JSON file of static tokens (see [TokenEntry]).
	TokensFile string
	// JWTKeyFile verifies JWTs: an HMAC secret, or a PEM RSA, ECDSA or
	// Ed25519 public key (or certificate).
	JWTKeyFile string
	// JWKSFile verifies JWTs with the keys of a local JWKS file, chosen
	// by the token's "kid". It is read once; nothing is fetched.
	JWKSFile string
	// Issuer, if set, must equal a JWT's "iss".
	Issuer string
	// Audience, if set, must be one of a JWT's "aud".
	Audience string
	// TenantClaim is the JWT claim holding the tenant; empty means
	// [DefaultTenantClaim]. A JWT without it has the empty tenant.
	TenantClaim string
	// Leeway is the clock skew tolerated on a JWT's "exp", "nbf" and
	// "iat"; zero means [DefaultLeeway], negative means none. The expiry
	// of a static token, set by this server's operator, is exact.
	Leeway time.Duration
	// Now returns the current time; nil means time.Now. For tests.
	Now func() time.Time
}

// Verifier authenticates bearer tokens: static tokens of a tokens file
// and JWTs. Its Verify method is an [auth.TokenVerifier]. It is safe for
// concurrent use; its keys and tokens are read once, by [New].
type Verifier struct {
	tokens *Tokens
	jwt    *jwtVerifier
	leeway time.Duration
	now    func() time.Time
	desc   []string
}

// New loads the files named by o and returns a verifier.
func New(o Options) (*Verifier, error) {
	if o.TokensFile == "" && o.JWTKeyFile == "" && o.JWKSFile == "" {
		return nil, errors.New("authn: no tokens file, JWT key or JWKS file")
	}
	if o.JWTKeyFile != "" && o.JWKSFile != "" {
		return nil, errors.New("authn: give a JWT key file or a JWKS file, not both")
	}
	if o.TenantClaim != "" && strings.TrimSpace(o.TenantClaim) != o.TenantClaim {
		return nil, fmt.Errorf("authn: tenant claim %q has surrounding white space", o.TenantClaim)
	}
	v := &Verifier{leeway: o.Leeway, now: o.Now}
	switch {
	case v.leeway == 0:
		v.leeway = DefaultLeeway
	case v.leeway < 0:
		v.leeway = 0
	}
	if v.now == nil {
		v.now = time.Now
	}
	if o.TokensFile != "" {
		t, err := LoadTokensFile(o.TokensFile)
		if err != nil {
			return nil, fmt.Errorf("authn: %w", err)
		}
		v.tokens = t
		v.desc = append(v.desc, fmt.Sprintf("%d static tokens", t.Len()))
	}
	var keys []jwtKey
	switch {
	case o.JWTKeyFile != "":
		k, desc, err := loadKeyFile(o.JWTKeyFile)
		if err != nil {
			return nil, fmt.Errorf("authn: %w", err)
		}
		keys = []jwtKey{k}
		v.desc = append(v.desc, "JWTs signed with an "+desc)
	case o.JWKSFile != "":
		ks, err := loadJWKSFile(o.JWKSFile)
		if err != nil {
			return nil, fmt.Errorf("authn: %w", err)
		}
		keys = ks
		v.desc = append(v.desc, fmt.Sprintf("JWTs signed with one of %d JWKS keys", len(ks)))
	}
	if keys != nil {
		v.jwt = newJWTVerifier(keys, o, v.leeway, v.now)
	}
	return v, nil
}

// Leeway returns the clock skew tolerated on JWT expiry, for
// [auth.RequireBearerTokenOptions.ClockSkew].
func (v *Verifier) Leeway() time.Duration { return v.leeway }

// String describes what the verifier accepts, for logs, e.g. "2 static
// tokens, JWTs signed with an RSA-2048 public key".
func (v *Verifier) String() string { return strings.Join(v.desc, ", ") }

// Verify authenticates token: a static token of the tokens file, else,
// if JWTs are configured and token has the shape of one, a JWT. The
// TokenInfo's UserID is [UserID](tenant, principal); its Scopes are the
// token's; its Expiration is the token's expiry (zero for a static token
// without one); Extra holds "tenant", "principal" and "kind" ("static" or
// "jwt"). Every error wraps [auth.ErrInvalidToken]. req is unused.
func (v *Verifier) Verify(ctx context.Context, token string, req *http.Request) (*auth.TokenInfo, error) {
	if v.tokens != nil {
		if st, ok := v.tokens.lookup(token); ok {
			if !st.expires.IsZero() && !v.now().Before(st.expires) {
				return nil, invalid("token expired")
			}
			return tokenInfo("static", identity{principal: st.principal, tenant: st.tenant, scopes: st.scopes, expires: st.expires}), nil
		}
	}
	if v.jwt != nil && strings.Count(token, ".") == 2 {
		id, err := v.jwt.verify(token)
		if err != nil {
			return nil, invalid(err.Error())
		}
		return tokenInfo("jwt", id), nil
	}
	return nil, invalid("unknown token")
}

// invalid returns an error wrapping auth.ErrInvalidToken.
func invalid(msg string) error {
	return fmt.Errorf("%w: %s", auth.ErrInvalidToken, msg)
}

// tokenInfo builds the go-sdk TokenInfo of an identity.
func tokenInfo(kind string, id identity) *auth.TokenInfo {
	scopes := make([]string, len(id.scopes)) // never nil
	copy(scopes, id.scopes)
	return &auth.TokenInfo{
		UserID:     UserID(id.tenant, id.principal),
		Scopes:     scopes,
		Expiration: id.expires,
		Extra:      map[string]any{"tenant": id.tenant, "principal": id.principal, "kind": kind},
	}
}
