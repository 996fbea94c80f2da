package authn

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
)

// jwk is one JSON Web Key (RFC 7517) of the kinds accepted: public RSA,
// EC (P-256, P-384, P-521) and OKP (Ed25519) signature keys.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	D   string `json:"d"`
	K   string `json:"k"`
}

// loadJWKSFile reads a local JWKS file ({"keys": [...]}, RFC 7517 §5).
// Keys whose "use" is not "sig" are skipped; private or symmetric keys,
// unsupported key types and two keys with the same "kid" are errors.
func loadJWKSFile(path string) ([]jwtKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("JWKS file: %w", err)
	}
	keys, err := parseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("JWKS file %s: %w", path, err)
	}
	return keys, nil
}

// parseJWKS parses the content of a JWKS file (see loadJWKSFile).
func parseJWKS(data []byte) ([]jwtKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JSON Web Key Set: %w", err)
	}
	var keys []jwtKey
	kids := map[string]bool{}
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		jk, err := k.load()
		if err != nil {
			return nil, fmt.Errorf("key %d (kid %q): %w", i, k.Kid, err)
		}
		if kids[k.Kid] {
			return nil, fmt.Errorf("key %d: kid %q appears twice", i, k.Kid)
		}
		kids[k.Kid] = true
		jk.kid = k.Kid
		keys = append(keys, jk)
	}
	if len(keys) == 0 {
		return nil, errors.New("no signature keys")
	}
	if len(keys) > 1 {
		for _, k := range keys {
			if k.kid == "" {
				return nil, errors.New("with several keys, every key needs a \"kid\"")
			}
		}
	}
	return keys, nil
}

// load converts a JWK into a verification key.
func (k jwk) load() (jwtKey, error) {
	if k.D != "" || k.K != "" {
		return jwtKey{}, errors.New("a private or symmetric key: a JWKS file must hold public keys only")
	}
	var pub any
	switch k.Kty {
	case "RSA":
		n, err1 := b64(k.N)
		e, err2 := b64(k.E)
		if err := errors.Join(err1, err2); err != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
			return jwtKey{}, errors.New("malformed RSA \"n\" or \"e\"")
		}
		pub = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	case "EC":
		var c elliptic.Curve
		switch k.Crv {
		case "P-256":
			c = elliptic.P256()
		case "P-384":
			c = elliptic.P384()
		case "P-521":
			c = elliptic.P521()
		default:
			return jwtKey{}, fmt.Errorf("unsupported curve %q", k.Crv)
		}
		x, err1 := b64(k.X)
		y, err2 := b64(k.Y)
		size := (c.Params().BitSize + 7) / 8
		if errors.Join(err1, err2) != nil || len(x) != size || len(y) != size {
			return jwtKey{}, errors.New("malformed EC \"x\" or \"y\"")
		}
		p, err := ecdsa.ParseUncompressedPublicKey(c, append(append([]byte{4}, x...), y...))
		if err != nil {
			return jwtKey{}, fmt.Errorf("invalid EC point: %w", err)
		}
		pub = p
	case "OKP":
		x, err := b64(k.X)
		if k.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
			return jwtKey{}, errors.New("only Ed25519 OKP keys with a 32-byte \"x\" are supported")
		}
		pub = ed25519.PublicKey(x)
	default:
		return jwtKey{}, fmt.Errorf("unsupported key type %q: want RSA, EC or OKP", k.Kty)
	}
	jk, _, err := publicKey(pub, k.Alg)
	return jk, err
}

// b64 decodes base64url, with or without padding.
func b64(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
