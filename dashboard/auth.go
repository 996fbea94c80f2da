package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcptask/mcptask/internal/httpguard"
	"github.com/mcptask/mcptask/task"
)

// cookieName names the session cookie.
const cookieName = "mcptask_dashboard"

// maxForm bounds the body of a form the dashboard reads.
const maxForm = 256 << 10

// Failed sign-ins are limited per source IP (issue 25, L3: a global limit
// let an attacker's guesses lock the operator out): signInBurst at once,
// then signInRate a second. A sign-in that succeeds costs nothing.
const (
	signInRate  = 1
	signInBurst = 10
)

// visitor is who makes a request, as authenticated.
type visitor struct {
	who     task.Owner
	csrf    string  // the anti-CSRF token the pages embed in their forms
	bearer  bool    // authenticated by an Authorization header: no cookie, no CSRF risk
	session session // the session cookie's, when signed in with one
}

// authed admits the requests of a signed-in visitor (or every request
// when Options.Authenticate is nil) and sends the others to the sign-in
// page (a page) or refuses them (anything else).
func (h *Handler) authed(fn func(http.ResponseWriter, *http.Request, *visitor)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, ok := h.visitorOf(r)
		if ok {
			fn(w, r, v)
			return
		}
		if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, "/live") {
			next := strings.TrimPrefix(r.URL.Path, "/")
			if r.URL.RawQuery != "" {
				next += "?" + r.URL.RawQuery
			}
			redirect(w, base(r)+"login?next="+url.QueryEscape(next))
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcptask-dashboard"`)
		http.Error(w, "sign in first", http.StatusUnauthorized)
	}
}

// visitorOf authenticates r: by bearer token, else by session cookie.
func (h *Handler) visitorOf(r *http.Request) (*visitor, bool) {
	if h.opts.Authenticate == nil {
		return &visitor{who: task.AnonymousOwner(""), csrf: h.sign("csrf|open")}, true
	}
	if tok, found := bearerToken(r); found {
		who, _, ok := h.opts.Authenticate(r, tok)
		if !ok {
			return nil, false
		}
		return &visitor{who: who, bearer: true}, true
	}
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil, false
	}
	s, ok := h.openSession(c.Value)
	if !ok {
		return nil, false
	}
	return &visitor{who: s.who, csrf: h.sign("csrf|" + c.Value), session: s}, true
}

// bearerToken returns the token of an Authorization: Bearer header.
func bearerToken(r *http.Request) (string, bool) {
	a := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(a, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// sign returns the MAC of s under the dashboard's key, base64url.
func (h *Handler) sign(s string) string {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(s))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// newSession returns a session cookie's value for who and when it
// expires: SessionTTL from now, or the token's expiry if that comes
// first (a session never outlives the credential that made it). The
// value is its payload (version, expiry in Unix milliseconds, a nonce
// and the owner) and the payload's MAC.
func (h *Handler) newSession(who task.Owner, tokenExpires time.Time) (string, time.Time) {
	nonce := make([]byte, 12)
	rand.Read(nonce)
	exp := h.now().Add(h.opts.SessionTTL)
	if !tokenExpires.IsZero() && tokenExpires.Before(exp) {
		exp = tokenExpires
	}
	payload := "v2|" + strconv.FormatInt(exp.UnixMilli(), 10) + "|" + base64.RawURLEncoding.EncodeToString(nonce) + "|" + string(who)
	p := base64.RawURLEncoding.EncodeToString([]byte(payload))
	return p + "." + h.sign("session|"+p), exp
}

// session is an open session cookie.
type session struct {
	who   task.Owner
	nonce string
	exp   time.Time
}

// openSession checks a session cookie's value: its MAC, its expiry, and
// that it was not signed out.
func (h *Handler) openSession(v string) (session, bool) {
	p, mac, ok := strings.Cut(v, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(h.sign("session|"+p))) {
		return session{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return session{}, false
	}
	parts := strings.SplitN(string(raw), "|", 4)
	if len(parts) != 4 || parts[0] != "v2" {
		return session{}, false
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return session{}, false
	}
	s := session{who: task.Owner(parts[3]), nonce: parts[2], exp: time.UnixMilli(ms)}
	if !h.now().Before(s.exp) || h.revoked.has(s.nonce) {
		return session{}, false
	}
	return s, true
}

// revocations are the sessions signed out before their expiry, each kept
// until it would have expired.
type revocations struct {
	mu  sync.Mutex
	set map[string]time.Time // nonce -> the session's expiry
}

func (rv *revocations) add(s session, now time.Time) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if rv.set == nil {
		rv.set = map[string]time.Time{}
	}
	for n, exp := range rv.set {
		if !now.Before(exp) {
			delete(rv.set, n)
		}
	}
	rv.set[s.nonce] = s.exp
}

func (rv *revocations) has(nonce string) bool {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	_, ok := rv.set[nonce]
	return ok
}

// checkCSRF reports whether a form carries the visitor's anti-CSRF token.
func (v *visitor) checkCSRF(r *http.Request) bool {
	if v.bearer {
		return true
	}
	got := r.PostFormValue("csrf")
	return got != "" && hmac.Equal([]byte(got), []byte(v.csrf))
}

// action wraps an action's handler: the form is read within maxForm and
// must carry the anti-CSRF token.
func (h *Handler) action(fn func(http.ResponseWriter, *http.Request, *visitor)) func(http.ResponseWriter, *http.Request, *visitor) {
	return func(w http.ResponseWriter, r *http.Request, v *visitor) {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "the form could not be read: "+err.Error(), http.StatusBadRequest)
			return
		}
		if !v.checkCSRF(r) {
			http.Error(w, "the form's anti-CSRF token is missing or wrong: reload the page and try again", http.StatusForbidden)
			return
		}
		fn(w, r, v)
	}
}

// loginPage is the data of the sign-in page.
type loginPage struct {
	Base  string
	Next  string
	Error string
	Open  bool // no authentication is configured
}

// serveLogin shows the sign-in form.
func (h *Handler) serveLogin(w http.ResponseWriter, r *http.Request) {
	h.render(w, http.StatusOK, "login", &loginPage{Base: base(r), Next: safeNext(r.URL.Query().Get("next")), Open: h.opts.Authenticate == nil})
}

// login checks a token from the sign-in form and starts a session.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "the form could not be read", http.StatusBadRequest)
		return
	}
	next := safeNext(r.PostFormValue("next"))
	if h.opts.Authenticate == nil {
		redirect(w, base(r)+next)
		return
	}
	// Each failed sign-in takes a token from its source's bucket; one
	// that succeeds gives it back.
	allowed, retry, undo := h.logins.Reserve(httpguard.SourceIP(r.RemoteAddr), h.now())
	if !allowed {
		w.Header().Set("Retry-After", strconv.Itoa(int(retry/time.Second)+1))
		h.render(w, http.StatusTooManyRequests, "login", &loginPage{Base: base(r), Next: next, Error: "Too many failed sign-ins from your address: wait a few seconds and try again."})
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	who, tokenExp, ok := h.opts.Authenticate(r, tok)
	if tok == "" || !ok {
		h.opts.Logger.Warn("dashboard: sign-in refused", "remote", r.RemoteAddr)
		h.render(w, http.StatusUnauthorized, "login", &loginPage{Base: base(r), Next: next, Error: "This token is not an admin token."})
		return
	}
	undo()
	value, exp := h.newSession(who, tokenExp)
	if !h.now().Before(exp) {
		h.render(w, http.StatusUnauthorized, "login", &loginPage{Base: base(r), Next: next, Error: "This token has expired."})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     cookieName,
		Value:    value,
		MaxAge:   int((exp.Sub(h.now()) + time.Second - 1) / time.Second), // rounded up: the server ends it at exp
		HttpOnly: true,
		Secure:   secure(r),
		SameSite: http.SameSiteStrictMode,
		// No Path: the browser scopes the cookie to the directory of the
		// sign-in URL, which is the dashboard's root under any prefix.
	})
	h.opts.Logger.Info("dashboard: signed in", "remote", r.RemoteAddr, "until", exp)
	redirect(w, base(r)+next)
}

// logout ends the session: it is revoked (its cookie, replayed, is
// refused) and the cookie dropped; it needs the anti-CSRF token.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	v, ok := h.visitorOf(r)
	if ok {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if r.ParseForm() != nil || !v.checkCSRF(r) {
			http.Error(w, "the form's anti-CSRF token is missing or wrong", http.StatusForbidden)
			return
		}
		if v.session.nonce != "" {
			h.revoked.add(v.session, h.now())
		}
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", MaxAge: -1, HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
	redirect(w, base(r)+"login")
}

// secure reports whether the browser reached us over HTTPS (directly or
// through a proxy that says so).
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// safeNext keeps a sign-in's "next" only if it names a page of the
// dashboard, relative to its root: never another site, never a path
// outside the dashboard.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		strings.HasPrefix(u.Path, "/") || strings.Contains(u.Path, "..") || strings.Contains(next, "\\") ||
		strings.HasPrefix(next, "//") {
		return ""
	}
	if u.Path != "" && !strings.HasPrefix(u.Path, "tasks/") {
		return ""
	}
	return u.String()
}
