// Package httpguard holds generic HTTP guards of mcptask's servers, kept
// out of the public API: DNS-rebinding protection for servers that listen
// on loopback, and a redirect guard for clients that send credentials.
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

// SameOrigin reports whether a and b have the same origin: scheme, host
// and port (a missing port is the scheme's default).
func SameOrigin(a, b *url.URL) bool {
	return Origin(a) == Origin(b)
}

// Origin is u's origin as scheme://host:port, lower case, with the
// scheme's default port made explicit (80 for http, 443 for https).
func Origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// CrossOriginRedirect is the error of a redirect refused by
// [SameOriginRedirects]: From's origin sent the client to To's.
type CrossOriginRedirect struct {
	From, To *url.URL
}

// Error says which origin redirected to which.
func (e *CrossOriginRedirect) Error() string {
	return fmt.Sprintf("%s redirected to another origin (%s://%s); redirects to another origin are not followed, so that the request's headers (credentials) never reach it",
		Origin(e.From), e.To.Scheme, e.To.Host)
}

// SameOriginRedirects returns an http.Client CheckRedirect that refuses,
// with a *CrossOriginRedirect, a redirect to an origin other than the
// first request's, and otherwise asks next (nil: at most 10 redirects, as
// the http package does).
func SameOriginRedirects(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) > 0 && !SameOrigin(via[0].URL, req.URL) {
			return &CrossOriginRedirect{From: via[0].URL, To: req.URL}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return fmt.Errorf("stopped after %d redirects", len(via))
		}
		return nil
	}
}

// SourceIP is the IP of a peer's address (a request's RemoteAddr, a
// connection's), the key of the limits kept per source.
func SourceIP(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	return host
}
