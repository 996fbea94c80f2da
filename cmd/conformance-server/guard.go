package main

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// loopbackOnly protects h against DNS rebinding: a request is served only
// when its Host, and its Origin if it has one, name a loopback host
// (localhost, 127.0.0.0/8 or [::1], with any port). Anything else gets 403.
//
// The SDK's own check covers Host only, and only when the listener is on a
// loopback address; this one also covers Origin and does not depend on the
// listener.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isLoopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("Forbidden: Host %q is not a loopback host", r.Host), http.StatusForbidden)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			u, err := url.Parse(origin)
			if err != nil || u.Host == "" || !isLoopbackHost(u.Host) {
				http.Error(w, fmt.Sprintf("Forbidden: Origin %q is not a loopback origin", origin), http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// isLoopbackHost reports whether hostport (a Host header value, with or
// without a port) names a loopback host.
func isLoopbackHost(hostport string) bool {
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

// checkLoopback refuses listen addresses that are not loopback, so that the
// conformance server is never reachable from the network.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad -addr %q: %v", addr, err)
	}
	if !isLoopbackHost(host) {
		return fmt.Errorf("-addr %q is not a loopback address (use 127.0.0.1, [::1] or localhost)", addr)
	}
	return nil
}
