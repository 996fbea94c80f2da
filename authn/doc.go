// Package authn authenticates the bearer tokens of MCP requests for
// mcptaskd and other servers built on the go-sdk.
//
// A [Verifier] is an [auth.TokenVerifier] for the go-sdk's
// [auth.RequireBearerToken] middleware. It accepts two kinds of token:
//
//   - static tokens listed in a tokens file (see [LoadTokensFile]): each
//     entry names the SHA-256 of a token (or, for development, the token in
//     clear), its principal, its tenant, its scopes and an optional expiry;
//   - JSON Web Tokens (see [Options]) signed with an HMAC secret, an
//     RSA, ECDSA or Ed25519 public key, or one of the keys of a local JWKS
//     file, with a required "exp", optional issuer and audience checks,
//     the principal in "sub" and the tenant in a configurable claim.
//
// Every accepted token yields an [auth.TokenInfo] whose UserID is
// [UserID](tenant, principal): "tenant/principal", where neither part may
// contain "/", so that two different identities never share a UserID.
// mcptask binds each task to its [task.TokenOwner], so a task created with one
// identity is invisible to every other.
//
// Every rejection wraps [auth.ErrInvalidToken], so the go-sdk answers
// 401; [RequireBearerToken] adds the RFC 6750 WWW-Authenticate challenge
// the go-sdk omits when no resource metadata URL or scope is configured.
package authn

import "github.com/modelcontextprotocol/go-sdk/auth"

// Compile-time check that a Verifier's Verify method is a TokenVerifier.
var _ auth.TokenVerifier = (*Verifier)(nil).Verify
