package httpguard

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestIsLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost":        true,
		"LOCALHOST:8080":   true,
		"127.0.0.1":        true,
		"127.1.2.3:80":     true,
		"[::1]:8080":       true,
		"::1":              true,
		"example.com":      false,
		"10.0.0.1:8080":    false,
		"[::2]:80":         false,
		"localhost.evil":   false,
		"127.0.0.1.nip.io": false,
		"":                 false,
	} {
		if got := IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	h := LoopbackOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for _, c := range []struct {
		host, origin string
		want         int
	}{
		{"127.0.0.1:8080", "", http.StatusNoContent},
		{"localhost:8080", "http://localhost:3000", http.StatusNoContent},
		{"evil.example:8080", "", http.StatusForbidden},                 // DNS rebinding
		{"127.0.0.1:8080", "http://evil.example", http.StatusForbidden}, // a foreign page
		{"127.0.0.1:8080", "null", http.StatusForbidden},                // an opaque origin
	} {
		r := httptest.NewRequest(http.MethodPost, "http://"+c.host+"/mcp", nil)
		r.Host = c.host
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("Host %q Origin %q: %d, want %d", c.host, c.origin, w.Code, c.want)
		}
	}
}

// TestSameOriginRedirects: a redirect to another scheme, host or port is
// refused; within the origin (the default port written or not) it is
// followed, up to 10.
func TestSameOriginRedirects(t *testing.T) {
	check := SameOriginRedirects(nil)
	req := func(u string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := []*http.Request{req("http://127.0.0.1:8080/jobs")}
	for u, same := range map[string]bool{
		"http://127.0.0.1:8080/other?x=1": true,
		"HTTP://127.0.0.1:8080/":          true,
		"http://127.0.0.1:8081/jobs":      false,
		"https://127.0.0.1:8080/jobs":     false,
		"http://localhost:8080/jobs":      false,
	} {
		err := check(req(u), first)
		var co *CrossOriginRedirect
		if same != (err == nil) || (!same && !errors.As(err, &co)) {
			t.Errorf("redirect to %s: %v; same origin %v", u, err, same)
		}
	}
	if err := check(req("http://example.com/b"), []*http.Request{req("http://example.com:80/a")}); err != nil {
		t.Errorf("default port written or not: %v", err)
	}
	if err := check(req("https://example.com:443/b"), []*http.Request{req("https://example.com/a")}); err != nil {
		t.Errorf("default https port written or not: %v", err)
	}
	ten := []*http.Request{}
	for range 10 {
		ten = append(ten, first[0])
	}
	if err := check(req("http://127.0.0.1:8080/b"), ten); err == nil {
		t.Errorf("the 11th redirect was followed")
	}
}
