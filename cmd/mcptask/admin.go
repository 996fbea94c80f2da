package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The admin endpoints of mcptaskd the admin commands talk to.
const (
	adminDrainPath     = "/admin/drain"
	adminFleetPath     = "/admin/fleet"
	adminCanaryPath    = "/admin/canary"
	adminRollbackPath  = "/admin/rollback"
	adminShadowPath    = "/admin/shadow-report"
	adminHandoffPath   = "/admin/handoff"
	adminApprovalsPath = "/admin/approvals"
	adminDecidePath    = "/admin/decide"
)

// adminPaths are the admin endpoints: an --admin-url ending in one of
// them (or in /admin) names the base of them all.
var adminPaths = []string{adminDrainPath, adminFleetPath, adminCanaryPath, adminRollbackPath, adminShadowPath,
	adminHandoffPath, adminApprovalsPath, adminDecidePath}

// adminFlags are the flags of the commands that talk to mcptaskd's admin
// endpoints ('mcptask admin ...', approvals, approve, deny).
type adminFlags struct {
	url     string // --admin-url
	reason  string // --reason
	drain   drainFlags
	canary  canaryFlags
	undo    bool   // admin rollback --undo
	kind    string // approvals --kind
	handoff handoffFlags
}

// drainFlags are the flags of 'mcptask admin drain'.
type drainFlags struct {
	all      bool
	off      bool
	status   bool
	tools    []string
	fallback string
}

// maxAdminAnswer bounds the answer of an admin endpoint read.
const maxAdminAnswer = 4 << 20

// adminExits says the exit codes of the admin commands that need nothing
// more.
const adminExits = `  0    done (the answer is printed)
  4    the server is unreachable, refuses the token (401, 403) or the
       request (its words are printed), or answered garbage
  5    usage error`

// cmdAdmin is 'mcptask admin': the operator's commands.
var cmdAdmin = &command{
	name:     "admin",
	synopsis: "COMMAND [flags] [arguments]",
	summary:  "operate mcptaskd: drain, fleet, canary, rollback, shadow-report, handoff",
	help: `
'mcptask admin' talks to mcptaskd's admin endpoints (/admin/...), to operate a
fleet of servers sharing a store: drain tools, limit a tool's new tasks to a
canary, roll a tool back, compare a shadow tool with its job API, and record
the outcome of a task handed off to an operator. 'mcptask approvals',
'mcptask approve' and 'mcptask deny' decide the tasks held for an approval.

Every admin command finds its endpoint the same way: --url with its path
replaced (e.g. /admin/drain), or --admin-url. An --admin-url whose path ends
in /admin or in another admin endpoint (/admin/drain) is the base of them
all, so one --admin-url serves every command. With authentication, the token
(--token-file, MCPTASK_TOKEN...) must carry mcptaskd's -admin-scope (default
mcptask:admin) or be one of its -admin-token-file; without authentication,
mcptaskd serves the admin endpoints on loopback only, to the operator
"anonymous". --json prints the server's answer as it is.`,
}

// defineAdminURL defines --admin-url for the admin command whose
// endpoint is path.
func (a *app) defineAdminURL(fs *flag.FlagSet, path string) {
	fs.StringVar(&a.cmd.admin.url, "admin-url", "", "the admin endpoint `URL` (default: --url with the path "+path+"; a URL ending in /admin or another admin endpoint is their base)")
}

// defineReason defines --reason, recorded with the change.
func (a *app) defineReason(fs *flag.FlagSet, what string) {
	fs.StringVar(&a.cmd.admin.reason, "reason", "", "`TEXT` saying why "+what)
}

// cmdAdminDrain is 'mcptask admin drain'.
var cmdAdminDrain = &command{
	name:     "admin drain",
	synopsis: "[--all | --tool NAME ... | --off | --status] [--fallback refuse|sync|handoff|jobs] [--reason TEXT]",
	summary:  "set or show the fleet's drain switch (/admin/drain)",
	help: `
'mcptask admin drain' sets the fleet's drain switch without a restart: every
mcptaskd sharing the store applies it within a second, and keeps it across
restarts. New task-augmented calls of every tool (--all) or of the tools named
(--tool, repeatable) are not served as tasks, while existing tasks stay
readable, answerable and cancellable. --off lifts it; --status (or no flag)
shows it. --reason says why (recorded with the switch and audited).

--fallback says what a drained tool's new calls get: refuse (-32010), sync
(optional tools answer synchronously; a required tool is refused all the
same), handoff (a task that waits for an operator: 'mcptask approvals --kind
handoff', 'mcptask admin handoff') or jobs (refused, naming the job tools).
A tool that declares its own fallback (mcptaskd's rollout section) keeps it.
Without --fallback, the server's configured fallback applies.

The answer shows the fleet's switch (who set it, when, why), this instance's
own drain (its configuration file's drain section: a tool either drains is
drained), the instance that answered and the version of the switches.
Exits 0 on success, 4 when the server is unreachable or refuses (401, 403,
or the request, in its words), 5 on a usage error.`,
	flags: func(a *app, fs *flag.FlagSet) {
		f := &a.cmd.admin.drain
		fs.BoolVar(&f.all, "all", false, "drain every tool")
		fs.BoolVar(&f.off, "off", false, "lift the drain: accept new tasks of every tool")
		fs.BoolVar(&f.status, "status", false, "show the drain switch (the default)")
		fs.Func("tool", "drain this tool `NAME` (repeatable)", func(v string) error {
			if v == "" {
				return fmt.Errorf("--tool needs a tool name")
			}
			f.tools = append(f.tools, v)
			return nil
		})
		fs.StringVar(&f.fallback, "fallback", "", "what a drained tool's task-augmented calls get: `refuse`, sync (optional tools answer synchronously), handoff or jobs")
		a.defineReason(fs, "the drain is set or lifted (recorded and audited)")
		a.defineAdminURL(fs, adminDrainPath)
	},
	run: runAdminDrain,
}

// adminDrainState is the drain switch as /admin/drain answers it: the
// fleet's switch, this instance's own, and who answered.
type adminDrainState struct {
	All      bool      `json:"all"`
	Tools    []string  `json:"tools"`
	Fallback string    `json:"fallback"`
	Reason   string    `json:"reason,omitempty"`
	By       string    `json:"by,omitempty"`
	At       time.Time `json:"at,omitzero"`
	// Local is the instance's own drain: its configuration file's.
	Local    adminLocalDrain `json:"local"`
	Instance string          `json:"instance"`
	Version  int64           `json:"version"`
}

// adminLocalDrain is an instance's own drain switch.
type adminLocalDrain struct {
	All      bool     `json:"all"`
	Tools    []string `json:"tools"`
	Fallback string   `json:"fallback"`
}

// runAdminDrain runs 'mcptask admin drain'.
func runAdminDrain(a *app, ctx context.Context, pos []string) int {
	f := a.cmd.admin.drain
	if len(pos) != 0 {
		return a.usage(usagef("admin drain takes no arguments (name the tools with --tool): got %q", pos))
	}
	set := 0
	for _, b := range []bool{f.all, f.off, f.status, len(f.tools) > 0} {
		if b {
			set++
		}
	}
	if set > 1 {
		return a.usage(usagef("give one of --all, --tool, --off and --status"))
	}
	if err := checkFallback(f.fallback); err != nil {
		return a.usage(err)
	}
	change := set == 1 && !f.status
	if f.fallback != "" && !change {
		return a.usage(usagef("--fallback goes with --all, --tool or --off"))
	}
	if a.cmd.admin.reason != "" && !change {
		return a.usage(usagef("--reason goes with --all, --tool or --off"))
	}
	method, body := http.MethodGet, any(nil)
	if change {
		req := map[string]any{"all": f.all, "tools": append([]string{}, f.tools...)}
		if f.fallback != "" {
			req["fallback"] = f.fallback
		}
		if a.cmd.admin.reason != "" {
			req["reason"] = a.cmd.admin.reason
		}
		method, body = http.MethodPut, req
	}
	raw, err := a.adminCall(ctx, method, adminDrainPath, nil, body)
	if err != nil {
		return a.adminFailed(ctx, err)
	}
	var st adminDrainState
	if err := decodeAdmin(raw, &st, adminDrainPath, "a drain switch"); err != nil {
		return a.adminFailed(ctx, err)
	}
	if a.g.json {
		a.printRaw(raw)
		return exitOK
	}
	fmt.Fprint(a.stdout, describeDrain(&st))
	return exitOK
}

// checkFallback checks a --fallback ("" is the server's choice).
func checkFallback(fb string) error {
	switch fb {
	case "", "refuse", "sync", "handoff", "jobs":
		return nil
	}
	return usagef("--fallback must be refuse, sync, handoff or jobs, not %q", fb)
}

// describeDrain says the switches of a /admin/drain answer, one line each.
func describeDrain(st *adminDrainState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "fleet: %s\n", drainWords(st.All, st.Tools, st.Fallback))
	if st.All || len(st.Tools) > 0 || st.By != "" {
		if s := setBy(st.By, st.At, st.Reason); s != "" {
			fmt.Fprintf(&b, "  %s\n", s)
		}
	}
	fmt.Fprintf(&b, "local: %s (this instance's configuration file)\n", drainWords(st.Local.All, st.Local.Tools, st.Local.Fallback))
	if st.Instance != "" {
		fmt.Fprintf(&b, "instance %s, switches version %d\n", st.Instance, st.Version)
	}
	return b.String()
}

// drainWords says a drain switch in words.
func drainWords(all bool, tools []string, fallback string) string {
	var what, these string
	switch {
	case all:
		what, these = "draining every tool", "new tasks"
	case len(tools) > 0:
		what, these = "draining "+strings.Join(tools, ", "), "new tasks of these tools"
	default:
		return "not draining: new tasks are accepted"
	}
	words := "are refused"
	switch fallback {
	case "sync":
		words = "are answered synchronously by the optional tools, refused by the others"
	case "handoff":
		words = "wait for an operator to record their outcome"
	case "jobs":
		words = "are refused, naming the job tools"
	case "", "refuse":
		fallback = "refuse"
	}
	return what + ": " + these + " " + words + " (fallback " + fallback + ", unless a tool declares its own)"
}

// setBy says who set a switch, when and why ("" when none is known).
func setBy(by string, at time.Time, reason string) string {
	var parts []string
	if by != "" {
		parts = append(parts, "set by "+by)
	}
	if !at.IsZero() {
		parts = append(parts, "at "+at.UTC().Format(time.RFC3339))
	}
	s := strings.Join(parts, " ")
	if reason != "" {
		if s != "" {
			s += ", "
		}
		s += "reason: " + oneLine(reason)
	}
	return s
}

// adminURL returns the URL of the admin endpoint path with the query q:
// --url with that path, or --admin-url (whose /admin or admin endpoint
// path is replaced by path).
func (a *app) adminURL(path string, q url.Values) (string, error) {
	given := a.cmd.admin.url
	if a.g.stdio != "" && given == "" {
		return "", usagef("the admin commands talk to mcptaskd over HTTP: give --url or --admin-url, not --stdio")
	}
	raw := given
	if raw == "" {
		raw = a.g.url
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usagef("the admin URL must be an http:// or https:// URL, not %q", raw)
	}
	u.Fragment = ""
	if given == "" {
		u.Path, u.RawPath, u.RawQuery = path, "", ""
	} else if base, ok := adminBase(u.Path); ok {
		u.Path, u.RawPath = base+path, ""
	}
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

// adminBase returns the base of the admin endpoints that the path p of an
// --admin-url names: p without its trailing /admin or admin endpoint; ok
// is false when it ends in neither (p is the endpoint itself).
func adminBase(p string) (base string, ok bool) {
	t := strings.TrimSuffix(p, "/")
	if base, ok := strings.CutSuffix(t, "/admin"); ok {
		return base, true
	}
	for _, e := range adminPaths {
		if base, ok := strings.CutSuffix(t, e); ok {
			return base, true
		}
	}
	return "", false
}

// adminError is a failed admin request: the endpoint unreachable, or an
// answer other than 200 OK (exit 4 unless the command says otherwise).
type adminError struct {
	msg string
	// status is the HTTP status of the answer (0: none); server the
	// server's own words ({"error": ...}); challenge whether the answer
	// asks for authentication (WWW-Authenticate).
	status    int
	server    string
	challenge bool
}

func (e *adminError) Error() string { return e.msg }

// tokenError is a bearer token that cannot be read (exit 5).
type tokenError struct{ err error }

func (e *tokenError) Error() string { return e.err.Error() }

// adminCall sends one request to the admin endpoint path (with the query
// q, and body as its JSON unless nil) and returns the answer of a 200 OK.
// Its errors are a *usageError (a bad URL), a *tokenError, or an
// *adminError; none says the token.
func (a *app) adminCall(ctx context.Context, method, path string, q url.Values, body any) ([]byte, error) {
	endpoint, err := a.adminURL(path, q)
	if err != nil {
		return nil, err
	}
	token, from, err := a.g.bearerToken()
	if err != nil {
		return nil, &tokenError{err}
	}
	rctx, cancel := requestContext(ctx)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(rctx, method, endpoint, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, &adminError{msg: fmt.Sprintf("cannot reach the admin endpoint %s: %v", endpoint, err)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminAnswer))
	if err != nil {
		return nil, &adminError{msg: fmt.Sprintf("reading the answer of %s: %v", endpoint, err)}
	}
	if resp.StatusCode == http.StatusOK {
		return raw, nil
	}
	var e struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(raw))
	server := ""
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		msg, server = e.Error, e.Error
	}
	if len(msg) > 500 {
		msg = msg[:500] + "..."
	}
	challenge := resp.Header.Get("WWW-Authenticate") != ""
	hint := ""
	switch {
	case resp.StatusCode == http.StatusUnauthorized && token == "":
		hint = " (give a token with --token-file, MCPTASK_TOKEN or MCPTASK_TOKEN_FILE)"
	case resp.StatusCode == http.StatusUnauthorized:
		hint = " (the token of " + from + ")"
	case resp.StatusCode == http.StatusForbidden && token != "" && challenge:
		hint = " (the token of " + from + ")"
	}
	return nil, &adminError{msg: fmt.Sprintf("%s %s: HTTP %d: %s%s", method, endpoint, resp.StatusCode, msg, hint),
		status: resp.StatusCode, server: server, challenge: challenge}
}

// decodeAdmin decodes the answer raw of the admin endpoint path into v,
// what it should be.
func decodeAdmin(raw []byte, v any, path, what string) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return &adminError{msg: fmt.Sprintf("%s answered what is not %s: %v", path, what, err)}
	}
	return nil
}

// adminFailed reports the error of an admin request and returns the exit
// code: 5 for a bad URL or an unreadable token, 130 when interrupted,
// else 4.
func (a *app) adminFailed(ctx context.Context, err error) int {
	var ue *usageError
	var te *tokenError
	switch {
	case errors.As(err, &ue):
		return a.usage(err)
	case errors.As(err, &te):
		a.errorf("%v", err)
		return exitUsage
	}
	a.errorf("%v", err)
	return exitCodeOf(ctx, err)
}

// gateRefusal returns the server's words when err is its refusal of a
// decision or a handoff (403: not an approver, or the requester's own
// call; 409: the task is no longer waiting for it), and "" otherwise (an
// authentication refusal is not one).
func gateRefusal(err error) (status int, words string) {
	var ae *adminError
	if !errors.As(err, &ae) || ae.server == "" || ae.challenge {
		return 0, ""
	}
	switch {
	case ae.status == http.StatusConflict:
		return ae.status, ae.server
	case ae.status == http.StatusForbidden && !strings.HasPrefix(ae.server, "the admin endpoint"):
		return ae.status, ae.server
	}
	return 0, ""
}

// unknownTask reports whether err is the server's answer that it does
// not know the task of a decision or a handoff (404).
func unknownTask(err error) bool {
	var ae *adminError
	return errors.As(err, &ae) && ae.status == http.StatusNotFound && ae.server != ""
}

// printRaw prints an admin endpoint's answer as it is (--json).
func (a *app) printRaw(raw []byte) {
	fmt.Fprintln(a.stdout, strings.TrimRight(string(raw), "\r\n"))
}
