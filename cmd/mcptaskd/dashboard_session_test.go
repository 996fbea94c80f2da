package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// jwtIssuer signs ES256 JWTs whose public key mcptaskd reads (-jwt-key).
type jwtIssuer struct {
	t       *testing.T
	key     *ecdsa.PrivateKey
	keyFile string
}

func newJWTIssuer(t *testing.T) *jwtIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "jwt.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &jwtIssuer{t: t, key: key, keyFile: path}
}

// token returns a JWT for sub@acme with scope, expiring at exp.
func (j *jwtIssuer) token(sub, scope string, exp time.Time) string {
	j.t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": sub, "tenant": "acme", "scope": scope, "exp": exp.Unix()}).SignedString(j.key)
	if err != nil {
		j.t.Fatal(err)
	}
	return s
}

// TestDashboardSessionBoundToCredential (issue 25, M4): a dashboard
// sign-in made with an admin JWT ends when the JWT does (not 12 hours
// later): once it has expired the list sends the operator to the sign-in
// page and a cancel with the page's form is refused, the task running on;
// and a signed-out session's cookie, replayed, is refused.
func TestDashboardSessionBoundToCredential(t *testing.T) {
	iss := newJWTIssuer(t)
	app, base := serveAppOf(t, nil, "-db", filepath.Join(t.TempDir(), "tasks.db"), "-jwt-key", iss.keyFile)
	t.Cleanup(app.dashboard.Close)
	alice := &wiretest.Client{URL: base + "/mcp", Tasks: true, Header: http.Header{"Authorization": {"Bearer " + iss.token("alice", "tasks", time.Now().Add(time.Hour))}}}
	id := startTask(t, alice, "long_computation", map[string]any{"n": 100000, "steps": 1000, "step_delay_ms": 50})

	t.Run("expiry", func(t *testing.T) {
		d := newDashClient(t, base)
		exp := time.Now().Add(2 * time.Second).Truncate(time.Second) // a JWT's exp is in whole seconds
		if resp, _ := d.do(http.MethodPost, "/dashboard/login", url.Values{"token": {iss.token("root", "mcptask:admin", exp)}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in with an admin JWT: %s", resp.Status)
		}
		resp, page := d.do(http.MethodGet, "/dashboard/tasks/"+id, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the task page, signed in: %s", resp.Status)
		}
		csrf := d.csrf(page)
		// The JWT expires (2 s); the session with it.
		waitUntil(t, 30*time.Second, "the session to end with its JWT", func() (bool, error) {
			resp, _ := d.do(http.MethodGet, "/dashboard/", nil)
			return resp.StatusCode == http.StatusSeeOther && strings.Contains(resp.Header.Get("Location"), "login"), nil
		})
		if time.Now().Before(exp) {
			t.Fatalf("the session ended before its JWT expired (%v)", exp)
		}
		if resp, _ := d.do(http.MethodPost, "/dashboard/tasks/"+id+"/cancel", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("cancel after the JWT expired: %s, want 401", resp.Status)
		}
		if tk, err := alice.Get(t.Context(), id); err != nil || tk.Status != "working" {
			t.Fatalf("the task after a refused cancel: %+v %v", tk, err)
		}
	})

	t.Run("logout revokes", func(t *testing.T) {
		d := newDashClient(t, base)
		if resp, _ := d.do(http.MethodPost, "/dashboard/login", url.Values{"token": {iss.token("root", "mcptask:admin", time.Now().Add(time.Hour))}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in: %s", resp.Status)
		}
		u, _ := url.Parse(base + "/dashboard/")
		cookies := d.c.Jar.Cookies(u)
		if len(cookies) == 0 {
			t.Fatal("no session cookie after sign-in")
		}
		_, page := d.do(http.MethodGet, "/dashboard/tasks/"+id, nil)
		csrf := d.csrf(page)
		if resp, _ := d.do(http.MethodPost, "/dashboard/logout", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-out: %s", resp.Status)
		}
		// The cookie the browser dropped, replayed by someone who kept it.
		replay := newDashClient(t, base)
		replay.c.Jar.SetCookies(u, cookies)
		if resp, _ := replay.do(http.MethodGet, "/dashboard/", nil); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the list with a signed-out session's cookie: %s, want the sign-in page", resp.Status)
		}
		if resp, _ := replay.do(http.MethodPost, "/dashboard/tasks/"+id+"/cancel", url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("cancel with a signed-out session's cookie: %s, want 401", resp.Status)
		}
		if tk, err := alice.Get(t.Context(), id); err != nil || tk.Status != "working" {
			t.Fatalf("the task after refused cancels: %+v %v", tk, err)
		}
	})
}
