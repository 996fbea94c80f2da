// Package httpguard holds generic HTTP guards of mcptask's servers, kept
// out of the public API: DNS-rebinding protection for servers that listen
// on loopback.
package httpguard

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// LoopbackOnly protects h against DNS rebinding: a request is served only
// when its Host, and its Origin if it has one, name a loopback host
// (localhost, 127.0.0.0/8 or [::1], with any port). Anything else gets 403.
// Use it in front of a server that listens on loopback.
func LoopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !IsLoopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("Forbidden: Host %q is not a loopback host", r.Host), http.StatusForbidden)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			u, err := url.Parse(origin)
			if err != nil || u.Host == "" || !IsLoopbackHost(u.Host) {
				http.Error(w, fmt.Sprintf("Forbidden: Origin %q is not a loopback origin", origin), http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// IsLoopbackHost reports whether hostport (a host with or without a port)
// names a loopback host.
func IsLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
