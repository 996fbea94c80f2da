package main

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/mcptask/mcptask/internal/httpguard"
	"github.com/mcptask/mcptask/internal/quota"
)

// Failed bearer-token guesses are limited per source IP (issue 25, L3):
// -auth-failures-per-source of them at once, then guessRefill a second;
// past that, the source's requests that carry a token are answered 429
// with Retry-After, without the token being checked. A request whose
// token is accepted costs nothing.
const (
	// defaultAuthFailures is -auth-failures-per-source's default.
	defaultAuthFailures = 20
	// guessRefill is how many failed guesses a second a source gets back.
	guessRefill = 1
)

// guessLimiter holds one bucket of failed guesses per source IP. A nil
// *guessLimiter limits nothing.
type guessLimiter struct {
	failures *quota.Limiters
}

func newGuessLimiter(burst int) *guessLimiter {
	if burst <= 0 {
		return nil
	}
	return &guessLimiter{failures: quota.NewLimiters(guessRefill, burst)}
}

// blocked reports whether the source of r has no failed guess left, and
// how long until it has one.
func (g *guessLimiter) blocked(r *http.Request) (bool, time.Duration) {
	if g == nil {
		return false, 0
	}
	return g.failures.Empty(httpguard.SourceIP(r.RemoteAddr), time.Now())
}

// failed counts a failed guess of r's source.
func (g *guessLimiter) failed(r *http.Request) {
	if g != nil {
		g.failures.Allow(httpguard.SourceIP(r.RemoteAddr), time.Now())
	}
}

// refuse answers a blocked source: 429, Retry-After, Connection: close.
func refuseGuesses(w http.ResponseWriter, retry time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
	w.Header().Set("Connection", "close")
	http.Error(w, "too many refused tokens from this address: retry later", http.StatusTooManyRequests)
}

// acceptedKey is the context key of the flag the authentication
// middleware's inner handler sets when it runs (the token was accepted).
type acceptedKey struct{}

// limitGuesses wraps auth, the bearer-token middleware of next: a source
// without failed guesses left is refused before its token is checked,
// and a request with a token that auth did not accept counts as one.
func (g *guessLimiter) limitGuesses(auth func(http.Handler) http.Handler, next http.Handler) http.Handler {
	if g == nil {
		return auth(next)
	}
	inner := auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := r.Context().Value(acceptedKey{}).(*bool); ok {
			*p = true
		}
		next.ServeHTTP(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, found := bearerToken(r); !found {
			inner.ServeHTTP(w, r)
			return
		}
		if blocked, retry := g.blocked(r); blocked {
			refuseGuesses(w, retry)
			return
		}
		accepted := false
		inner.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), acceptedKey{}, &accepted)))
		if !accepted {
			g.failed(r)
		}
	})
}
