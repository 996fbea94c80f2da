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
	"time"

	"github.com/mcptask/mcptask/task"
)

// cookieName names the session cookie.
const cookieName = "mcptask_dashboard"

// maxForm bounds the body of a form the dashboard reads.
const maxForm = 256 << 10

// visitor is who makes a request, as authenticated.
type visitor struct {
	who    task.Owner
	csrf   string // the anti-CSRF token the pages embed in their forms
	bearer bool   // authenticated by an Authorization header: no cookie, no CSRF risk
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
		who, ok := h.opts.Authenticate(r, tok)
		if !ok {
			return nil, false
		}
		return &visitor{who: who, bearer: true}, true
	}
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil, false
	}
	who, ok := h.openSession(c.Value)
	if !ok {
		return nil, false
	}
	return &visitor{who: who, csrf: h.sign("csrf|" + c.Value)}, true
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

// newSession returns a session cookie's value for who: its payload
// (version, expiry, a nonce and the owner) and the payload's MAC.
func (h *Handler) newSession(who task.Owner) string {
	nonce := make([]byte, 12)
	rand.Read(nonce)
	exp := h.now().Add(h.opts.SessionTTL).Unix()
	payload := "v1|" + strconv.FormatInt(exp, 10) + "|" + base64.RawURLEncoding.EncodeToString(nonce) + "|" + string(who)
	p := base64.RawURLEncoding.EncodeToString([]byte(payload))
	return p + "." + h.sign("session|"+p)
}

// openSession checks a session cookie's value and returns its owner.
func (h *Handler) openSession(v string) (task.Owner, bool) {
	p, mac, ok := strings.Cut(v, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(h.sign("session|"+p))) {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return "", false
	}
	parts := strings.SplitN(string(raw), "|", 4)
	if len(parts) != 4 || parts[0] != "v1" {
		return "", false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || h.now().Unix() >= exp {
		return "", false
	}
	return task.Owner(parts[3]), true
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
	if !h.logins.Allow() { // every attempt counts: a guesser gets 5 a second
		h.render(w, http.StatusTooManyRequests, "login", &loginPage{Base: base(r), Next: next, Error: "Too many sign-in attempts: wait a few seconds and try again."})
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	who, ok := h.opts.Authenticate(r, tok)
	if tok == "" || !ok {
		h.opts.Logger.Warn("dashboard: sign-in refused", "remote", r.RemoteAddr)
		h.render(w, http.StatusUnauthorized, "login", &loginPage{Base: base(r), Next: next, Error: "This token is not an admin token."})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     cookieName,
		Value:    h.newSession(who),
		MaxAge:   int(h.opts.SessionTTL / time.Second),
		HttpOnly: true,
		Secure:   secure(r),
		SameSite: http.SameSiteStrictMode,
		// No Path: the browser scopes the cookie to the directory of the
		// sign-in URL, which is the dashboard's root under any prefix.
	})
	h.opts.Logger.Info("dashboard: signed in", "remote", r.RemoteAddr)
	redirect(w, base(r)+next)
}

// logout ends the session (its cookie); it needs the anti-CSRF token.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	v, ok := h.visitorOf(r)
	if ok {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if r.ParseForm() != nil || !v.checkCSRF(r) {
			http.Error(w, "the form's anti-CSRF token is missing or wrong", http.StatusForbidden)
			return
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
