package authn

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MinHMACSecretLen is the shortest HMAC secret accepted, in bytes.
const MinHMACSecretLen = 32

// MinRSABits is the smallest RSA modulus accepted.
const MinRSABits = 2048

// DefaultTenantClaim is the JWT claim holding the tenant when
// [Options.TenantClaim] is empty.
const DefaultTenantClaim = "tenant"

// jwtKey is one verification key and the JWS algorithms it may verify.
type jwtKey struct {
	kid  string // "" unless from a JWKS
	key  any    // []byte, *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	algs []string
}

// jwtVerifier verifies JWTs against a fixed set of keys.
type jwtVerifier struct {
	keys        []jwtKey
	parser      *jwt.Parser
	tenantClaim string
}

// loadKeyFile reads a JWT verification key: a PEM file holding an RSA,
// ECDSA or Ed25519 public key ("PUBLIC KEY", "RSA PUBLIC KEY" or a
// "CERTIFICATE"), or else an HMAC secret (the file's bytes, less one
// trailing newline, at least [MinHMACSecretLen] bytes). A private key is
// refused: give the server only the public half. It returns a
// description of the key for logs.
func loadKeyFile(path string) (jwtKey, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return jwtKey{}, "", fmt.Errorf("JWT key file: %w", err)
	}
	k, desc, err := parseKey(data)
	if err != nil {
		return jwtKey{}, "", fmt.Errorf("JWT key file %s: %w", path, err)
	}
	return k, desc, nil
}

// parseKey parses the content of a JWT key file (see loadKeyFile).
func parseKey(data []byte) (jwtKey, string, error) {
	if !bytes.Contains(data, []byte("-----BEGIN")) {
		secret := bytes.TrimSuffix(bytes.TrimSuffix(data, []byte("\n")), []byte("\r"))
		if len(secret) < MinHMACSecretLen {
			return jwtKey{}, "", fmt.Errorf("an HMAC secret must be at least %d bytes, got %d (or give a PEM public key)", MinHMACSecretLen, len(secret))
		}
		return jwtKey{key: bytes.Clone(secret), algs: []string{"HS256", "HS384", "HS512"}}, "HMAC secret", nil
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return jwtKey{}, "", errors.New("malformed PEM")
	}
	var pub any
	var err error
	switch {
	case strings.Contains(block.Type, "PRIVATE KEY"):
		return jwtKey{}, "", fmt.Errorf("holds a %s: give the server the public key only", block.Type)
	case block.Type == "PUBLIC KEY":
		pub, err = x509.ParsePKIXPublicKey(block.Bytes)
	case block.Type == "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case block.Type == "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			pub = cert.PublicKey
		}
	default:
		return jwtKey{}, "", fmt.Errorf("unsupported PEM block %q: want PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE", block.Type)
	}
	if err != nil {
		return jwtKey{}, "", fmt.Errorf("parsing the %s: %w", block.Type, err)
	}
	return publicKey(pub, "")
}

// publicKey checks a public key and lists the algorithms it may verify;
// alg, if set, restricts them to that one.
func publicKey(pub any, alg string) (jwtKey, string, error) {
	var k jwtKey
	var desc string
	switch p := pub.(type) {
	case *rsa.PublicKey:
		if p.N.BitLen() < MinRSABits {
			return k, "", fmt.Errorf("RSA key of %d bits: at least %d needed", p.N.BitLen(), MinRSABits)
		}
		k = jwtKey{key: p, algs: []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}}
		desc = fmt.Sprintf("RSA-%d public key", p.N.BitLen())
	case *ecdsa.PublicKey:
		var a string
		switch p.Curve {
		case elliptic.P256():
			a = "ES256"
		case elliptic.P384():
			a = "ES384"
		case elliptic.P521():
			a = "ES512"
		default:
			return k, "", errors.New("unsupported elliptic curve: want P-256, P-384 or P-521")
		}
		k = jwtKey{key: p, algs: []string{a}}
		desc = "ECDSA " + p.Curve.Params().Name + " public key"
	case ed25519.PublicKey:
		k = jwtKey{key: p, algs: []string{"EdDSA"}}
		desc = "Ed25519 public key"
	default:
		return k, "", fmt.Errorf("unsupported public key type %T", pub)
	}
	if alg != "" {
		if !slices.Contains(k.algs, alg) {
			return k, "", fmt.Errorf("\"alg\" %q does not fit a %s", alg, desc)
		}
		k.algs = []string{alg}
	}
	return k, desc, nil
}

// newJWTVerifier returns a verifier of JWTs signed with one of keys.
func newJWTVerifier(keys []jwtKey, o Options, leeway time.Duration, now func() time.Time) *jwtVerifier {
	var algs []string
	for _, k := range keys {
		for _, a := range k.algs {
			if !slices.Contains(algs, a) {
				algs = append(algs, a)
			}
		}
	}
	popts := []jwt.ParserOption{
		jwt.WithValidMethods(algs), // never "none", never an algorithm the keys do not fit
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(now),
	}
	if o.Issuer != "" {
		popts = append(popts, jwt.WithIssuer(o.Issuer))
	}
	if o.Audience != "" {
		popts = append(popts, jwt.WithAudience(o.Audience))
	}
	tc := o.TenantClaim
	if tc == "" {
		tc = DefaultTenantClaim
	}
	return &jwtVerifier{keys: keys, parser: jwt.NewParser(popts...), tenantClaim: tc}
}

// keyfunc picks the keys that may verify t: those with t's "kid" (all,
// when t has none) that fit t's algorithm.
func (j *jwtVerifier) keyfunc(t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	kid, hasKid := t.Header["kid"].(string)
	var set jwt.VerificationKeySet
	kidKnown := false
	for _, k := range j.keys {
		if hasKid && k.kid != "" && k.kid != kid {
			continue
		}
		kidKnown = true
		if slices.Contains(k.algs, alg) {
			set.Keys = append(set.Keys, k.key)
		}
	}
	switch {
	case !kidKnown:
		return nil, fmt.Errorf("unknown key id %q", kid)
	case len(set.Keys) == 0:
		return nil, fmt.Errorf("no key for algorithm %s", alg)
	case len(set.Keys) == 1:
		return set.Keys[0], nil
	}
	return set, nil
}

// identity is what a verified token says about its holder.
type identity struct {
	principal, tenant string
	scopes            []string
	expires           time.Time
}

// verify checks a JWT and extracts its identity.
func (j *jwtVerifier) verify(token string) (identity, error) {
	claims := jwt.MapClaims{}
	if _, err := j.parser.ParseWithClaims(token, claims, j.keyfunc); err != nil {
		return identity{}, err
	}
	var id identity
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return identity{}, errors.New("missing or malformed \"exp\"")
	}
	id.expires = exp.Time
	sub, ok := claims["sub"].(string)
	if !ok || sub == "" {
		return identity{}, errors.New("missing \"sub\"")
	}
	id.principal = sub
	if v, present := claims[j.tenantClaim]; present {
		s, ok := v.(string)
		if !ok {
			return identity{}, fmt.Errorf("claim %q is not a string", j.tenantClaim)
		}
		id.tenant = s
	}
	if err := validateIdentity(id.principal, id.tenant); err != nil {
		return identity{}, err
	}
	if id.scopes, err = scopesOf(claims); err != nil {
		return identity{}, err
	}
	return id, nil
}

// scopesOf returns the scopes of "scope" (space-separated, RFC 8693) and
// "scp" (a string or an array of strings, as some providers issue).
func scopesOf(claims jwt.MapClaims) ([]string, error) {
	var scopes []string
	add := func(s string) {
		if !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	for _, name := range []string{"scope", "scp"} {
		switch v := claims[name].(type) {
		case nil:
		case string:
			for _, s := range strings.Fields(v) {
				add(s)
			}
		case []any:
			for _, e := range v {
				s, ok := e.(string)
				if !ok || validateScope(s) != nil {
					return nil, fmt.Errorf("claim %q holds an invalid scope", name)
				}
				add(s)
			}
		default:
			return nil, fmt.Errorf("claim %q is neither a string nor an array", name)
		}
	}
	return scopes, nil
}
