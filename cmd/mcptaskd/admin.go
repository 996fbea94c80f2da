package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/httpguard"
	"github.com/mcptask/mcptask/task"
)

// The admin endpoint of the drain switch.
const (
	// adminDrainPath serves GET (the switch now) and PUT/POST (set it).
	adminDrainPath = "/admin/drain"
	// maxAdminBody bounds a request body of the admin endpoint.
	maxAdminBody = 64 << 10
	// maxAdminTools bounds the tools of one drain request.
	maxAdminTools = 1000
	// adminRealm is the realm of the admin endpoint's challenges.
	adminRealm = "mcptaskd-admin"
	// adminTokenPrincipal is the principal the audit trail names for a
	// request authenticated with the -admin-token-file token.
	adminTokenPrincipal = "admin-token"
	// minAdminToken is the shortest token -admin-token-file may hold.
	minAdminToken = 16
)

// drainSwitch is mcptaskd's view of its drain switches: the fleet's,
// kept in the store and set through the admin endpoint or the
// dashboard, and this instance's own, the configuration file's drain
// section (applied at start-up and on SIGHUP). A tool either drains is
// drained: the file cannot lift a fleet drain, nor the admin endpoint
// this instance's.
type drainSwitch struct {
	mu   sync.Mutex
	file mcptask.DrainState // the file's drain section, as last read
}

// drainStatus is the JSON of GET /admin/drain and of a successful PUT:
// the fleet's switch, as every instance sharing the store applies it,
// and this instance's own.
type drainStatus struct {
	All      bool     `json:"all"`
	Tools    []string `json:"tools"`
	Fallback string   `json:"fallback"`
	// Reason, By and At say why, who and when the fleet's switch was
	// last set.
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at,omitzero"`
	// Local is this instance's own switch: the configuration file's
	// drain section.
	Local localDrain `json:"local"`
	// Instance names the mcptaskd that answered; Version is the version
	// of the fleet's switches it applies.
	Instance string `json:"instance"`
	Version  int64  `json:"version"`
}

// localDrain is an instance's own drain switch, as drainStatus shows it.
type localDrain struct {
	All      bool     `json:"all"`
	Tools    []string `json:"tools"`
	Fallback string   `json:"fallback"`
}

// drainRequest is the body of PUT or POST /admin/drain.
type drainRequest struct {
	All      bool     `json:"all"`
	Tools    []string `json:"tools"`
	Fallback *string  `json:"fallback"`
	// Reason says why (recorded with the switch and audited).
	Reason string `json:"reason"`
}

// adminTokens are the tokens of -admin-token-file, each naming its
// operator: the file holds one token (the operator "admin-token"), or a
// JSON list [{"token": "...", "operator": "alice"}, ...] so that the
// audit trail names who acted. Only the tokens' SHA-256 are kept.
type adminTokens []adminToken

// adminToken is one token of -admin-token-file.
type adminToken struct {
	hash     [sha256.Size]byte
	operator string
}

// maxOperatorName bounds an operator's name in -admin-token-file.
const maxOperatorName = 64

// loadAdminTokens reads -admin-token-file: one token, or a JSON list of
// tokens with their operators' names.
func loadAdminTokens(path string) (adminTokens, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-admin-token-file: %w", err)
	}
	return parseAdminTokens(path, b)
}

// parseAdminTokens parses the content b of the -admin-token-file path.
// Its errors never quote a token.
func parseAdminTokens(path string, b []byte) (adminTokens, error) {
	text := strings.TrimSpace(string(b))
	check := func(where, tok string) error {
		switch {
		case len(tok) < minAdminToken:
			return fmt.Errorf("-admin-token-file %s: %sthe token must have %d characters or more", path, where, minAdminToken)
		case strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }):
			return fmt.Errorf("-admin-token-file %s: %sthe token must be one line without spaces or control characters", path, where)
		}
		return nil
	}
	if !strings.HasPrefix(text, "[") {
		if err := check("", text); err != nil {
			return nil, err
		}
		return adminTokens{{hash: sha256.Sum256([]byte(text)), operator: adminTokenPrincipal}}, nil
	}
	var list []struct {
		Token    string `json:"token"`
		Operator string `json:"operator"`
	}
	d := json.NewDecoder(strings.NewReader(text))
	d.DisallowUnknownFields()
	if err := d.Decode(&list); err != nil {
		return nil, fmt.Errorf("-admin-token-file %s: not a token, nor a JSON list of {\"token\", \"operator\"}: %v", path, err)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("-admin-token-file %s: the list holds no token", path)
	}
	var out adminTokens
	seen := map[string]bool{}
	for i, e := range list {
		where := fmt.Sprintf("entry %d: ", i+1)
		if err := check(where, e.Token); err != nil {
			return nil, err
		}
		name := e.Operator
		switch {
		case name == "" || len(name) > maxOperatorName:
			return nil, fmt.Errorf("-admin-token-file %s: %sname its operator (1 to %d characters)", path, where, maxOperatorName)
		case strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f || r == '/' }):
			return nil, fmt.Errorf("-admin-token-file %s: %sthe operator's name must be one line without control characters or '/'", path, where)
		case seen[name]:
			return nil, fmt.Errorf("-admin-token-file %s: %sthe operator %q is named twice", path, where, name)
		}
		seen[name] = true
		h := sha256.Sum256([]byte(e.Token))
		for _, o := range out {
			if o.hash == h {
				return nil, fmt.Errorf("-admin-token-file %s: %sthe token of %q is also %q's", path, where, name, o.operator)
			}
		}
		out = append(out, adminToken{hash: h, operator: name})
	}
	return out, nil
}

// match returns the operator whose token tok is, comparing every token
// in constant time.
func (ts adminTokens) match(tok string) (operator string, ok bool) {
	h := sha256.Sum256([]byte(tok))
	for _, t := range ts {
		if subtle.ConstantTimeCompare(h[:], t.hash[:]) == 1 {
			operator, ok = t.operator, true
		}
	}
	return operator, ok
}

// owner is the principal the audit trail names for an operator of
// -admin-token-file.
func (ts adminTokens) owner(operator string) task.Owner {
	return task.UserOwner("", operator)
}

// adminHandler returns the handler of /admin/drain: DNS-rebinding
// protection on a loopback listener (as /mcp), cross-origin browser
// requests refused, then authorization.
func (a *App) adminHandler(serve http.HandlerFunc) http.Handler {
	var h http.Handler = serve
	if isLoopbackAddr(a.cfg.Addr) {
		h = httpguard.LoopbackOnly(h)
	}
	return http.NewCrossOriginProtection().Handler(h)
}

// serveAdminDrain answers /admin/drain.
func (a *App) serveAdminDrain(w http.ResponseWriter, r *http.Request) {
	who, ok := a.authorizeAdmin(w, r)
	if !ok {
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		writeAdminJSON(w, http.StatusOK, a.drainStatus())
	case http.MethodPut, http.MethodPost:
		a.setDrain(w, r, who)
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT, POST")
		adminError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed: GET reads the drain switch, PUT or POST sets it")
	}
}

// authorizeAdmin admits an admin request and returns who made it; when ok
// is false the refusal has been written. With authentication (or an admin
// token file), the request needs a bearer token: the admin token, or a
// token the verifier accepts that carries -admin-scope. Without either,
// the endpoint answers on a loopback listener only.
func (a *App) authorizeAdmin(w http.ResponseWriter, r *http.Request) (_ task.Owner, ok bool) {
	if a.verifier == nil && a.adminTokens == nil {
		if !isLoopbackAddr(a.cfg.Addr) {
			adminError(w, http.StatusForbidden, "the admin endpoint is served on a loopback listener only when mcptaskd has no authentication: "+
				"enable authentication (-tokens, -jwt-key or -jwks, and a token with the -admin-scope scope) or give -admin-token-file")
			return "", false
		}
		return task.AnonymousOwner(""), true
	}
	token, found := bearerToken(r)
	if !found {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+adminRealm+`"`)
		adminError(w, http.StatusUnauthorized, "the admin endpoint needs Authorization: Bearer TOKEN")
		return "", false
	}
	if blocked, retry := a.guesses.blocked(r); blocked {
		refuseGuesses(w, retry)
		return "", false
	}
	if op, ok := a.adminTokens.match(token); ok {
		return a.adminTokens.owner(op), true
	}
	if a.verifier != nil {
		info, err := a.verifier.Verify(r.Context(), token, r)
		if err == nil {
			if !slices.Contains(info.Scopes, a.cfg.AdminScope) {
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q, error="insufficient_scope", scope=%q`, adminRealm, a.cfg.AdminScope))
				adminError(w, http.StatusForbidden, fmt.Sprintf("the token lacks the scope %q the admin endpoint needs", a.cfg.AdminScope))
				a.log.Warn("admin endpoint: a token without the admin scope was refused", "user", info.UserID, "remote", r.RemoteAddr)
				return "", false
			}
			return task.TokenOwner(info.UserID), true
		}
	}
	a.guesses.failed(r)
	w.Header().Set("WWW-Authenticate", `Bearer realm="`+adminRealm+`", error="invalid_token"`)
	adminError(w, http.StatusUnauthorized, "the bearer token was refused")
	a.log.Warn("admin endpoint: a bearer token was refused", "remote", r.RemoteAddr)
	return "", false
}

// bearerToken returns the token of an Authorization: Bearer header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	tok = strings.TrimSpace(tok)
	return tok, ok && strings.EqualFold(scheme, "bearer") && tok != ""
}

// setDrain answers PUT or POST /admin/drain: it sets the switch from the
// body and answers with the switch now.
func (a *App) setDrain(w http.ResponseWriter, r *http.Request, who task.Owner) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		adminError(w, http.StatusUnsupportedMediaType, "send the drain switch as Content-Type: application/json")
		return
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	var req drainRequest
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			adminError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", maxAdminBody))
			return
		}
		adminError(w, http.StatusBadRequest, `invalid body: `+err.Error()+`; want {"all": bool, "tools": [NAME, ...], "fallback": "refuse"|"sync"}`)
		return
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		adminError(w, http.StatusBadRequest, "invalid body: one JSON object only")
		return
	}
	if len(req.Tools) > maxAdminTools {
		adminError(w, http.StatusBadRequest, fmt.Sprintf("at most %d tools", maxAdminTools))
		return
	}
	var unknown []string
	for _, t := range req.Tools {
		if !a.tasks.HasTool(t) {
			unknown = append(unknown, t)
		}
	}
	if len(unknown) > 0 {
		adminError(w, http.StatusBadRequest, fmt.Sprintf("no such tool: %q (this server serves no tool of that name; nothing changed)", unknown))
		return
	}
	a.drain.mu.Lock()
	st := mcptask.DrainState{All: req.All, Tools: slices.Compact(slices.Sorted(slices.Values(req.Tools))), Reason: req.Reason}
	st.Fallback = a.drain.file.Fallback // omitted: the configuration file's choice
	if req.Fallback != nil {
		st.Fallback = mcptask.DrainFallback(*req.Fallback)
	}
	err := a.tasks.SetDrain(r.Context(), st, "admin", who)
	a.drain.mu.Unlock()
	if err != nil {
		adminError(w, http.StatusBadRequest, err.Error())
		return
	}
	p, t, _ := who.Identity()
	a.log.Warn("fleet drain switch set through the admin endpoint", "all", st.All, "tools", st.Tools, "fallback", st.Fallback,
		"reason", st.Reason, "principal", p, "tenant", t, "remote", r.RemoteAddr)
	writeAdminJSON(w, http.StatusOK, a.drainStatus())
}

// drainStatus returns the switches now.
func (a *App) drainStatus() drainStatus {
	f := a.tasks.Fleet()
	d := f.Drain
	s := drainStatus{All: d.All, Tools: d.Tools, Fallback: string(d.Fallback), Reason: d.Reason, By: d.By, At: d.At,
		Local:    localDrain{All: f.LocalDrain.All, Tools: f.LocalDrain.Tools, Fallback: string(f.LocalDrain.Fallback)},
		Instance: a.eng.InstanceID(), Version: f.Version}
	if s.Tools == nil {
		s.Tools = []string{}
	}
	if s.Local.Tools == nil {
		s.Local.Tools = []string{}
	}
	if !d.Active() {
		a.drain.mu.Lock()
		s.Fallback = string(a.drain.file.Fallback) // what a drain set without one would get
		a.drain.mu.Unlock()
		if s.Fallback == "" {
			s.Fallback = string(mcptask.DrainRefuse)
		}
	}
	return s
}

// writeAdminJSON writes v as the JSON answer.
func writeAdminJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// adminError writes {"error": msg} with the HTTP status code.
func adminError(w http.ResponseWriter, code int, msg string) {
	writeAdminJSON(w, code, map[string]string{"error": msg})
}
