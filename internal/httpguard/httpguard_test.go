package httpguard

import (
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
