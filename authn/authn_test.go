package authn

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// writeFile writes content to a new file in t's temporary directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// wantInvalid checks err wraps auth.ErrInvalidToken and mentions want.
func wantInvalid(t *testing.T, err error, want string) {
	t.Helper()
	if !errors.Is(err, auth.ErrInvalidToken) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v: want one wrapping auth.ErrInvalidToken and containing %q", err, want)
	}
}

var ctx = context.Background()

func TestTokensFile(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	path := writeFile(t, "tokens.json", `[
		{"token_sha256": "`+sha("alice-secret-token-0001")+`", "principal": "alice", "tenant": "acme", "scopes": ["tasks", "admin"]},
		{"token_sha256": "`+strings.ToUpper(sha("bob-secret-token-00002"))+`", "principal": "bob", "tenant": "globex", "expires": "2026-05-01T13:00:00Z"},
		{"token": "dev-token-in-clear-0003", "principal": "dev"},
		{"token": "old-token-long-enough-4", "principal": "carol", "tenant": "acme", "expires": "2026-05-01T11:59:59Z"}
	]`)
	v, err := New(Options{TokensFile: path, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if got := v.String(); got != "4 static tokens" {
		t.Errorf("String() = %q", got)
	}

	ti, err := v.Verify(ctx, "alice-secret-token-0001", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ti.UserID != "acme/alice" || !slices.Equal(ti.Scopes, []string{"tasks", "admin"}) || !ti.Expiration.IsZero() ||
		ti.Extra["tenant"] != "acme" || ti.Extra["principal"] != "alice" || ti.Extra["kind"] != "static" {
		t.Fatalf("alice: %+v", ti)
	}
	ti, err = v.Verify(ctx, "bob-secret-token-00002", nil)
	if err != nil || ti.UserID != "globex/bob" || !ti.Expiration.Equal(now.Add(time.Hour)) || ti.Scopes == nil {
		t.Fatalf("bob: %+v %v", ti, err)
	}
	ti, err = v.Verify(ctx, "dev-token-in-clear-0003", nil)
	if err != nil || ti.UserID != "/dev" {
		t.Fatalf("dev: %+v %v", ti, err)
	}

	_, err = v.Verify(ctx, "old-token-long-enough-4", nil)
	wantInvalid(t, err, "expired")
	_, err = v.Verify(ctx, "nobody-knows-this-token", nil)
	wantInvalid(t, err, "unknown token")
	_, err = v.Verify(ctx, "alice-secret-token-000", nil) // a prefix
	wantInvalid(t, err, "unknown token")

	// Expiry is exact: valid until the instant it expires.
	now = time.Date(2026, 5, 1, 12, 59, 59, 999, time.UTC)
	if _, err := v.Verify(ctx, "bob-secret-token-00002", nil); err != nil {
		t.Fatal(err)
	}
	now = time.Date(2026, 5, 1, 13, 0, 0, 0, time.UTC)
	_, err = v.Verify(ctx, "bob-secret-token-00002", nil)
	wantInvalid(t, err, "expired")
}

func TestTokensFileErrors(t *testing.T) {
	good := `"principal": "p", "tenant": "t"`
	for _, tc := range []struct{ name, content, want string }{
		{"not JSON", `{{`, "not a JSON array"},
		{"object", `{"token": "x"}`, "not a JSON array"},
		{"empty", `[]`, "no tokens"},
		{"trailing", `[{"token": "0123456789abcdef", ` + good + `}] []`, "trailing data"},
		{"unknown field", `[{"token": "0123456789abcdef", "principle": "p"}]`, `unknown field "principle"`},
		{"no token", `[{` + good + `}]`, `missing "token_sha256"`},
		{"both", `[{"token": "0123456789abcdef", "token_sha256": "` + sha("x") + `", ` + good + `}]`, "not both"},
		{"bad hash", `[{"token_sha256": "abc", ` + good + `}]`, "64 hexadecimal digits"},
		{"non-hex hash", `[{"token_sha256": "` + strings.Repeat("zz", 32) + `", ` + good + `}]`, "64 hexadecimal digits"},
		{"short clear token", `[{"token": "short", ` + good + `}]`, "at least 16 bytes"},
		{"no principal", `[{"token": "0123456789abcdef", "tenant": "t"}]`, "principal is empty"},
		{"slash in principal", `[{"token": "0123456789abcdef", "principal": "a/b"}]`, `contains "/"`},
		{"slash in tenant", `[{"token": "0123456789abcdef", "principal": "a", "tenant": "x/y"}]`, `contains "/"`},
		{"space in principal", `[{"token": "0123456789abcdef", "principal": "a b"}]`, "white space"},
		{"bad scope", `[{"token": "0123456789abcdef", ` + good + `, "scopes": ["a b"]}]`, "scope"},
		{"bad expires", `[{"token": "0123456789abcdef", ` + good + `, "expires": "tomorrow"}]`, "RFC 3339"},
		{"duplicate", `[{"token": "0123456789abcdef", ` + good + `}, {"token_sha256": "` + sha("0123456789abcdef") + `", "principal": "q"}]`,
			"entry 1: the same token as entry 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "tokens.json", tc.content)
			_, err := New(Options{TokensFile: path})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v: want one naming the file and containing %q", err, tc.want)
			}
		})
	}
	if _, err := New(Options{TokensFile: filepath.Join(t.TempDir(), "missing.json")}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := New(Options{}); err == nil {
		t.Fatal("no source accepted")
	}
	if _, err := New(Options{JWTKeyFile: "a", JWKSFile: "b"}); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("key and JWKS: %v", err)
	}
}

// pubPEM returns the PEM "PUBLIC KEY" of a private key.
func pubPEM(t *testing.T, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

var (
	keysOnce sync.Once
	rsaKey   *rsa.PrivateKey
	ecKey    *ecdsa.PrivateKey
	edKey    ed25519.PrivateKey
)

func genKeys(t *testing.T) {
	keysOnce.Do(func() {
		var err error
		if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if ecKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
		if _, edKey, err = ed25519.GenerateKey(rand.Reader); err != nil {
			panic(err)
		}
	})
}

// sign returns a JWT of claims signed with key by method, with header
// fields hdr.
func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims, hdr map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	for k, v := range hdr {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJWT(t *testing.T) {
	genKeys(t)
	now := time.Now()
	secret := strings.Repeat("s3cr3t-", 6)
	claims := func(extra jwt.MapClaims) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "alice", "tenant": "acme", "exp": now.Add(time.Hour).Unix(), "iss": "https://idp.example", "aud": "mcptaskd"}
		for k, v := range extra {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return c
	}
	hmacV, err := New(Options{JWTKeyFile: writeFile(t, "secret", secret+"\n"), Issuer: "https://idp.example", Audience: "mcptaskd"})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("HS256", func(t *testing.T) {
		ti, err := hmacV.Verify(ctx, sign(t, jwt.SigningMethodHS256, []byte(secret), claims(jwt.MapClaims{"scope": "tasks read"}), nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		if ti.UserID != "acme/alice" || !slices.Equal(ti.Scopes, []string{"tasks", "read"}) ||
			!ti.Expiration.Equal(time.Unix(now.Add(time.Hour).Unix(), 0)) || ti.Extra["kind"] != "jwt" {
			t.Fatalf("%+v", ti)
		}
	})

	for _, tc := range []struct {
		name   string
		claims jwt.MapClaims
		want   string
	}{
		{"expired", claims(jwt.MapClaims{"exp": now.Add(-time.Minute).Unix()}), "expired"},
		{"no exp", claims(jwt.MapClaims{"exp": nil}), "exp"},
		{"not yet valid", claims(jwt.MapClaims{"nbf": now.Add(time.Hour).Unix()}), "not valid yet"},
		{"wrong issuer", claims(jwt.MapClaims{"iss": "https://evil.example"}), "issuer"},
		{"no issuer", claims(jwt.MapClaims{"iss": nil}), "iss"},
		{"wrong audience", claims(jwt.MapClaims{"aud": []string{"other"}}), "audience"},
		{"no sub", claims(jwt.MapClaims{"sub": nil}), `"sub"`},
		{"slash in sub", claims(jwt.MapClaims{"sub": "a/b"}), `contains "/"`},
		{"slash in tenant", claims(jwt.MapClaims{"tenant": "x/y"}), `contains "/"`},
		{"tenant not a string", claims(jwt.MapClaims{"tenant": 7}), "not a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := hmacV.Verify(ctx, sign(t, jwt.SigningMethodHS256, []byte(secret), tc.claims, nil), nil)
			wantInvalid(t, err, tc.want)
		})
	}

	t.Run("leeway", func(t *testing.T) {
		// Expired 10s ago: within the default 30s leeway.
		if _, err := hmacV.Verify(ctx, sign(t, jwt.SigningMethodHS256, []byte(secret), claims(jwt.MapClaims{"exp": now.Add(-10 * time.Second).Unix()}), nil), nil); err != nil {
			t.Fatal(err)
		}
		strict, err := New(Options{JWTKeyFile: writeFile(t, "secret", secret), Leeway: -1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = strict.Verify(ctx, sign(t, jwt.SigningMethodHS256, []byte(secret), claims(jwt.MapClaims{"exp": now.Add(-10 * time.Second).Unix()}), nil), nil)
		wantInvalid(t, err, "expired")
	})

	t.Run("wrong HMAC key", func(t *testing.T) {
		_, err := hmacV.Verify(ctx, sign(t, jwt.SigningMethodHS256, []byte(strings.Repeat("x", 40)), claims(nil), nil), nil)
		wantInvalid(t, err, "signature")
	})

	t.Run("alg none", func(t *testing.T) {
		tok := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(nil), nil)
		_, err := hmacV.Verify(ctx, tok, nil)
		wantInvalid(t, err, "signing method")
		// Hand-made, with an empty signature.
		enc := base64.RawURLEncoding.EncodeToString
		body, _ := json.Marshal(claims(nil))
		_, err = hmacV.Verify(ctx, enc([]byte(`{"alg":"none","typ":"JWT"}`))+"."+enc(body)+".", nil)
		wantInvalid(t, err, "")
	})

	t.Run("scp claim", func(t *testing.T) {
		ti, err := hmacV.Verify(ctx, sign(t, jwt.SigningMethodHS256, []byte(secret), claims(jwt.MapClaims{"scp": []any{"a", "b"}, "scope": "b c"}), nil), nil)
		if err != nil || !slices.Equal(ti.Scopes, []string{"b", "c", "a"}) {
			t.Fatalf("%+v %v", ti, err)
		}
	})

	t.Run("tenant claim", func(t *testing.T) {
		v, err := New(Options{JWTKeyFile: writeFile(t, "secret", secret), TenantClaim: "org"})
		if err != nil {
			t.Fatal(err)
		}
		ti, err := v.Verify(ctx, sign(t, jwt.SigningMethodHS256, []byte(secret), claims(jwt.MapClaims{"org": "initech"}), nil), nil)
		if err != nil || ti.UserID != "initech/alice" {
			t.Fatalf("%+v %v", ti, err)
		}
		ti, err = v.Verify(ctx, sign(t, jwt.SigningMethodHS256, []byte(secret), claims(jwt.MapClaims{"tenant": nil}), nil), nil)
		if err != nil || ti.UserID != "/alice" {
			t.Fatalf("no tenant claim: %+v %v", ti, err)
		}
	})

	for _, tc := range []struct {
		name   string
		method jwt.SigningMethod
		priv   any
		pub    any
	}{
		{"RS256", jwt.SigningMethodRS256, rsaKey, &rsaKey.PublicKey},
		{"PS256", jwt.SigningMethodPS256, rsaKey, &rsaKey.PublicKey},
		{"ES256", jwt.SigningMethodES256, ecKey, &ecKey.PublicKey},
		{"EdDSA", jwt.SigningMethodEdDSA, edKey, edKey.Public()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pemText := pubPEM(t, tc.pub)
			v, err := New(Options{JWTKeyFile: writeFile(t, "key.pem", pemText), Audience: "mcptaskd"})
			if err != nil {
				t.Fatal(err)
			}
			ti, err := v.Verify(ctx, sign(t, tc.method, tc.priv, claims(nil), nil), nil)
			if err != nil || ti.UserID != "acme/alice" {
				t.Fatalf("%+v %v", ti, err)
			}
			_, err = v.Verify(ctx, sign(t, tc.method, tc.priv, claims(jwt.MapClaims{"exp": now.Add(-time.Hour).Unix()}), nil), nil)
			wantInvalid(t, err, "expired")
			_, err = v.Verify(ctx, sign(t, tc.method, tc.priv, claims(jwt.MapClaims{"aud": "other"}), nil), nil)
			wantInvalid(t, err, "audience")
			// Algorithm confusion: an HS256 token whose secret is the
			// public key's PEM is refused.
			_, err = v.Verify(ctx, sign(t, jwt.SigningMethodHS256, []byte(pemText), claims(nil), nil), nil)
			wantInvalid(t, err, "signing method")
			// The HMAC verifier refuses an asymmetric token.
			_, err = hmacV.Verify(ctx, sign(t, tc.method, tc.priv, claims(nil), nil), nil)
			wantInvalid(t, err, "signing method")
		})
	}

	t.Run("wrong public key", func(t *testing.T) {
		other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		v, err := New(Options{JWTKeyFile: writeFile(t, "key.pem", pubPEM(t, &other.PublicKey))})
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Verify(ctx, sign(t, jwt.SigningMethodES256, ecKey, claims(nil), nil), nil)
		wantInvalid(t, err, "signature")
	})

	t.Run("not a JWT", func(t *testing.T) {
		_, err := hmacV.Verify(ctx, "plainly-not-a-jwt", nil)
		wantInvalid(t, err, "unknown token")
		_, err = hmacV.Verify(ctx, "a.b.c", nil)
		wantInvalid(t, err, "malformed")
	})
}

func TestStaticAndJWTTogether(t *testing.T) {
	secret := strings.Repeat("k", 32)
	v, err := New(Options{
		TokensFile: writeFile(t, "tokens.json", `[{"token": "static-token-abcdefg", "principal": "svc", "tenant": "ops"}]`),
		JWTKeyFile: writeFile(t, "secret", secret),
	})
	if err != nil {
		t.Fatal(err)
	}
	if ti, err := v.Verify(ctx, "static-token-abcdefg", nil); err != nil || ti.UserID != "ops/svc" {
		t.Fatalf("%+v %v", ti, err)
	}
	tok := sign(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"sub": "u", "tenant": "t", "exp": time.Now().Add(time.Minute).Unix()}, nil)
	if ti, err := v.Verify(ctx, tok, nil); err != nil || ti.UserID != "t/u" {
		t.Fatalf("%+v %v", ti, err)
	}
	if s := v.String(); s != "1 static tokens, JWTs signed with an HMAC secret" {
		t.Errorf("String() = %q", s)
	}
}

func TestKeyFileErrors(t *testing.T) {
	genKeys(t)
	privDER, _ := x509.MarshalPKCS8PrivateKey(ecKey)
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	for _, tc := range []struct{ name, content, want string }{
		{"short secret", "too-short\n", "at least 32 bytes"},
		{"private key", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER})), "public key only"},
		{"garbage PEM", "-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n", "PUBLIC KEY"},
		{"other block", string(pem.EncodeToMemory(&pem.Block{Type: "X", Bytes: []byte{1}})), "unsupported PEM block"},
		{"small RSA", pubPEM(t, &small.PublicKey), "at least 2048"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{JWTKeyFile: writeFile(t, "key", tc.content)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// b64u encodes a big-endian integer or bytes in base64url.
func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func jwkOf(t *testing.T, kid string, pub any) map[string]any {
	t.Helper()
	switch p := pub.(type) {
	case *rsa.PublicKey:
		return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": b64u(p.N.Bytes()), "e": b64u(big.NewInt(int64(p.E)).Bytes())}
	case *ecdsa.PublicKey:
		raw, _ := p.Bytes()
		return map[string]any{"kty": "EC", "kid": kid, "crv": "P-256", "x": b64u(raw[1:33]), "y": b64u(raw[33:])}
	case ed25519.PublicKey:
		return map[string]any{"kty": "OKP", "kid": kid, "crv": "Ed25519", "x": b64u(p)}
	}
	t.Fatalf("unsupported %T", pub)
	return nil
}

func TestJWKS(t *testing.T) {
	genKeys(t)
	rsa2, _ := rsa.GenerateKey(rand.Reader, 2048)
	set := map[string]any{"keys": []any{
		jwkOf(t, "rsa-1", &rsaKey.PublicKey),
		jwkOf(t, "rsa-2", &rsa2.PublicKey),
		jwkOf(t, "ec-1", &ecKey.PublicKey),
		jwkOf(t, "ed-1", edKey.Public()),
		map[string]any{"kty": "RSA", "kid": "enc-1", "use": "enc", "n": "AQAB", "e": "AQAB"}, // skipped
	}}
	data, _ := json.Marshal(set)
	v, err := New(Options{JWKSFile: writeFile(t, "jwks.json", string(data)), TenantClaim: "org"})
	if err != nil {
		t.Fatal(err)
	}
	if s := v.String(); s != "JWTs signed with one of 4 JWKS keys" {
		t.Errorf("String() = %q", s)
	}
	claims := jwt.MapClaims{"sub": "bob", "org": "globex", "exp": time.Now().Add(time.Hour).Unix()}
	for _, tc := range []struct {
		kid    string
		method jwt.SigningMethod
		key    any
	}{
		{"rsa-1", jwt.SigningMethodRS256, rsaKey},
		{"rsa-2", jwt.SigningMethodRS256, rsa2},
		{"ec-1", jwt.SigningMethodES256, ecKey},
		{"ed-1", jwt.SigningMethodEdDSA, edKey},
	} {
		ti, err := v.Verify(ctx, sign(t, tc.method, tc.key, claims, map[string]any{"kid": tc.kid}), nil)
		if err != nil || ti.UserID != "globex/bob" {
			t.Fatalf("kid %s: %+v %v", tc.kid, ti, err)
		}
	}
	// The kid selects the key: rsa-2's token under rsa-1's kid fails.
	_, err = v.Verify(ctx, sign(t, jwt.SigningMethodRS256, rsa2, claims, map[string]any{"kid": "rsa-1"}), nil)
	wantInvalid(t, err, "signature")
	_, err = v.Verify(ctx, sign(t, jwt.SigningMethodRS256, rsaKey, claims, map[string]any{"kid": "nope"}), nil)
	wantInvalid(t, err, `unknown key id "nope"`)
	_, err = v.Verify(ctx, sign(t, jwt.SigningMethodRS256, rsaKey, claims, map[string]any{"kid": "enc-1"}), nil)
	wantInvalid(t, err, "unknown key id")
	// The key's alg binds: RS256 key, PS256 token.
	_, err = v.Verify(ctx, sign(t, jwt.SigningMethodPS256, rsaKey, claims, map[string]any{"kid": "rsa-1"}), nil)
	wantInvalid(t, err, "PS256")
	// Without a kid, every key that fits the algorithm is tried.
	if _, err := v.Verify(ctx, sign(t, jwt.SigningMethodRS256, rsa2, claims, nil), nil); err != nil {
		t.Fatal(err)
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, err = v.Verify(ctx, sign(t, jwt.SigningMethodRS256, other, claims, nil), nil)
	wantInvalid(t, err, "")

	for _, tc := range []struct{ name, content, want string }{
		{"not JSON", `[`, "not a JSON Web Key Set"},
		{"empty", `{"keys": []}`, "no signature keys"},
		{"private", `{"keys": [{"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA", "d": "AA"}]}`, "public keys only"},
		{"oct", `{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}`, "public keys only"},
		{"kty", `{"keys": [{"kty": "XYZ"}]}`, "unsupported key type"},
		{"bad EC", `{"keys": [{"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"}]}`, "malformed EC"},
		{"bad curve", `{"keys": [{"kty": "EC", "crv": "secp256k1", "x": "AA", "y": "AA"}]}`, "unsupported curve"},
		{"dup kid", `{"keys": [` + mustJSON(jwkOf(t, "a", edKey.Public())) + `,` + mustJSON(jwkOf(t, "a", &ecKey.PublicKey)) + `]}`, "appears twice"},
		{"missing kid", `{"keys": [` + mustJSON(jwkOf(t, "", edKey.Public())) + `,` + mustJSON(jwkOf(t, "b", &ecKey.PublicKey)) + `]}`, "needs a \"kid\""},
		{"alg mismatch", `{"keys": [{"kty": "OKP", "crv": "Ed25519", "alg": "RS256", "x": "` + b64u(edKey.Public().(ed25519.PublicKey)) + `"}]}`, "does not fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{JWKSFile: writeFile(t, "jwks.json", tc.content)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestUserID(t *testing.T) {
	if id := UserID("acme", "alice"); id != "acme/alice" {
		t.Fatal(id)
	}
	tenant, principal, ok := SplitUserID(UserID("", "alice"))
	if !ok || tenant != "" || principal != "alice" {
		t.Fatal(tenant, principal, ok)
	}
	for _, bad := range []string{"a/b", "a b", "a\x00", strings.Repeat("x", MaxNameLen+1), "\xff"} {
		if ValidateName("principal", bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestRequireBearerToken(t *testing.T) {
	v, err := New(Options{TokensFile: writeFile(t, "tokens.json", `[{"token": "good-token-0123456789", "principal": "alice", "tenant": "acme"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	var flusher bool
	h := RequireBearerToken(v, "mcptaskd")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, flusher = w.(http.Flusher)
		ti := auth.TokenInfoFromContext(r.Context())
		w.Write([]byte(ti.UserID))
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	do := func(authz string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", srv.URL, nil)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 512)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp, b.String()
	}
	for _, tc := range []struct{ authz, challenge string }{
		{"", `Bearer realm="mcptaskd"`},
		{"Basic dXNlcjpwYXNz", `Bearer realm="mcptaskd"`},
		{"Bearer wrong-token-0123456789", `Bearer realm="mcptaskd", error="invalid_token"`},
	} {
		resp, body := do(tc.authz)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != tc.challenge {
			t.Errorf("%q: %d %q %q, want 401 with %q", tc.authz, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body, tc.challenge)
		}
	}
	resp, body := do("Bearer good-token-0123456789")
	if resp.StatusCode != 200 || body != "acme/alice" || resp.Header.Get("WWW-Authenticate") != "" || !flusher {
		t.Fatalf("good token: %d %q %q flusher=%v", resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"), flusher)
	}
}
