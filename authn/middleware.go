package authn

import (
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// RequireBearerToken returns middleware that admits only requests with a
// bearer token v accepts: the go-sdk's [auth.RequireBearerToken] with v,
// v's leeway as clock skew, and static tokens without expiry allowed.
// The verified [auth.TokenInfo] reaches the MCP handlers (and mcptask's
// task ownership) through the request context.
//
// A refused request gets 401 with an RFC 6750 challenge:
// `WWW-Authenticate: Bearer realm="REALM"` when it carries no bearer
// token, plus `, error="invalid_token"` when its token was refused. (The
// go-sdk sends a challenge only when it has a resource metadata URL or
// required scopes, which a server without an OAuth authorization server
// has not.) realm must be printable ASCII without quotes or backslashes;
// empty means "mcp".
//
// scopes, if any, are required: a valid token that lacks one of them gets
// 403 with `error="insufficient_scope"` and the scopes it needs.
func RequireBearerToken(v *Verifier, realm string, scopes ...string) func(http.Handler) http.Handler {
	if realm == "" || strings.ContainsFunc(realm, func(r rune) bool { return r < ' ' || r > '~' || r == '"' || r == '\\' }) {
		realm = "mcp"
	}
	mw := auth.RequireBearerToken(v.Verify, &auth.RequireBearerTokenOptions{
		ClockSkew:              v.Leeway(),
		AllowMissingExpiration: true, // static tokens may have no expiry; JWTs must have "exp"
		Scopes:                 scopes,
	})
	return func(next http.Handler) http.Handler {
		inner := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Accepted: hand the original writer on, so the MCP handler
			// keeps its Flusher and the rest.
			if cw, ok := w.(*challengeWriter); ok {
				w = cw.ResponseWriter
			}
			next.ServeHTTP(w, r)
		}))
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner.ServeHTTP(&challengeWriter{ResponseWriter: w, realm: realm, hadToken: hasBearer(r)}, r)
		})
	}
}

// hasBearer reports whether r carries an Authorization: Bearer header.
func hasBearer(r *http.Request) bool {
	scheme, _, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	return ok && strings.EqualFold(scheme, "bearer")
}

// challengeWriter adds the WWW-Authenticate challenge to a 401 that has
// none.
type challengeWriter struct {
	http.ResponseWriter
	realm    string
	hadToken bool
}

// WriteHeader adds the challenge to a 401 without one.
func (c *challengeWriter) WriteHeader(code int) {
	if ch := c.Header().Get("WWW-Authenticate"); code == http.StatusForbidden && !strings.Contains(ch, "error=") {
		// The go-sdk names the scopes it wants but not the error (RFC 6750).
		if ch == "" {
			ch = "Bearer"
		}
		c.Header().Set("WWW-Authenticate", ch+`, realm="`+c.realm+`", error="insufficient_scope"`)
	}
	if code == http.StatusUnauthorized && c.Header().Get("WWW-Authenticate") == "" {
		ch := `Bearer realm="` + c.realm + `"`
		if c.hadToken {
			ch += `, error="invalid_token"`
		}
		c.Header().Set("WWW-Authenticate", ch)
	}
	c.ResponseWriter.WriteHeader(code)
}
