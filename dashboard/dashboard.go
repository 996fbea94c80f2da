package dashboard

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/quota"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// The defaults of [Options].
const (
	// DefaultSessionTTL is how long a sign-in lasts.
	DefaultSessionTTL = 12 * time.Hour
	// DefaultLiveInterval is the shortest time between two updates a live
	// page receives: changes within it are sent together.
	DefaultLiveInterval = 250 * time.Millisecond
	// DefaultRecheckInterval is how often a live page is refreshed when no
	// change was announced (changes the engine cannot see: another
	// process on a SQLite file, expiry).
	DefaultRecheckInterval = 5 * time.Second
	// DefaultMaxLiveStreams caps the live streams served at once.
	DefaultMaxLiveStreams = 64
	// PageSize is the number of tasks a list page shows.
	PageSize = 50
	// MaxBulk caps the tasks one bulk action names.
	MaxBulk = 500
	// LogTailLines is the number of log lines a task page shows.
	LogTailLines = 100
	// ChildrenShown is the number of child tasks a task page lists (the
	// latest ones, when it has more).
	ChildrenShown = 100
)

// Options configure a [Handler]. Engine and Store are required.
type Options struct {
	// Engine runs the tasks: the dashboard cancels through it, reads the
	// ledger and logs, and follows its changes.
	Engine *engine.Engine
	// Store is the engine's store: the dashboard browses and counts its
	// tasks and shows each task's history.
	Store store.Store

	// Authenticate admits a token presented at sign-in (or as a bearer
	// token) and returns who it names and when it expires (zero: no
	// expiry of its own); ok false refuses it. A sign-in's session ends
	// no later than its token. It must compare secrets in constant time.
	// Nil admits every request without sign-in: the caller must then
	// restrict who reaches the handler (e.g. a loopback listener).
	Authenticate func(r *http.Request, token string) (who task.Owner, expires time.Time, ok bool)

	// Drain, if set, lets the dashboard show and change the drain switch
	// per tool.
	Drain DrainControl
	// Gates, if set, lets the dashboard list the tasks held for an
	// approval or for an operator's outcome (a handoff) and decide them,
	// as the signed-in operator (mcptask.Server): the Approvals page. Nil
	// hides the page.
	Gates GateControl
	// Fleet, if set, gives the fleet's switches (mcptask.Server.Fleet):
	// the Tools page shows each tool's canary and rollback, and who
	// drained the fleet, when and why. Nil hides them.
	Fleet func() mcptask.Fleet

	// Tools, if set, lists the server's tool names (for the tool filter
	// and the drain switches).
	Tools func() []string
	// Links, if set, gives the links about a task that its tool gives
	// (mcptask.Server.Links), shown on the task's page and in the list.
	Links func(*task.Task) map[string]string
	// Queue, if set, gives the concurrency queue a tool runs in and its
	// cap (mcptask.Server.ToolQueue), for the Tools page.
	Queue func(tool string) (queue string, limit int)
	// RunAgain, if set, lets an operator run a finished task's call again
	// as a new task (mcptask.Server.RunAgain): nonce is the token of the
	// form the operator posted (the same one returns the task made the
	// first time); a *mcptask.RunAgainError says why it refused.
	RunAgain func(ctx context.Context, t *task.Task, nonce string) (*task.Task, error)

	// Logger receives the dashboard's log records (never a token or a
	// task's payload). Nil discards them.
	Logger *slog.Logger

	// SessionKey signs session cookies and anti-CSRF tokens. Instances
	// behind one load balancer need the same key for a session to hold
	// on each of them. Empty means a random key: sessions then end when
	// the process does.
	SessionKey []byte
	// SessionTTL is how long a sign-in lasts at most (never past its
	// token's expiry); zero means DefaultSessionTTL. Signing out revokes
	// the session in this Handler (instances sharing SessionKey each keep
	// their own revocations: a signed-out cookie replayed to another
	// instance lasts until its expiry there).
	SessionTTL time.Duration

	// LiveInterval, RecheckInterval and MaxLiveStreams tune live updates;
	// zero means the defaults above.
	LiveInterval    time.Duration
	RecheckInterval time.Duration
	MaxLiveStreams  int

	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DrainControl is the drain switch as the dashboard uses it.
type DrainControl interface {
	// DrainState returns whether every tool is drained, and the tools
	// drained one by one.
	DrainState() (all bool, tools []string)
	// SetToolDrain drains tool (drained true) or lets it take new tasks
	// again, on behalf of by, and audits the change.
	SetToolDrain(ctx context.Context, tool string, drained bool, by task.Owner) error
}

// GateControl is the approvals and handoffs of the tasks held for them,
// as the dashboard uses them ([mcptask.Server] implements it).
type GateControl interface {
	// HeldTasks returns the tasks held for an approval (kind
	// "approval"), for an operator's outcome ("handoff"), or both ("").
	HeldTasks(ctx context.Context, kind string) ([]mcptask.Held, error)
	// Decide approves (approve true) or denies the approval of the task
	// id as the operator by, saying why; a *mcptask.GateError says why
	// it changed nothing (by is no approver, made the call, or the task
	// waits no more).
	Decide(ctx context.Context, id task.ID, approve bool, by, reason string) (*task.Task, error)
	// RecordHandoff records the outcome o of the handed-off task id as
	// the operator by; a *mcptask.GateError says why it changed nothing.
	RecordHandoff(ctx context.Context, id task.ID, by string, o mcptask.HandoffOutcome) (*task.Task, error)
}

// Handler is the dashboard, an [http.Handler]. Mount it under a prefix
// with [http.StripPrefix]; it serves "/" (the task list), "/tasks/{id}",
// the actions, the live streams, "/login" and its assets.
type Handler struct {
	opts    Options
	key     []byte
	mux     *http.ServeMux
	guarded http.Handler // mux behind CrossOriginProtection
	tmpl    *template.Template
	static  http.Handler
	logins  *quota.Limiters // failed sign-ins, per source IP
	revoked revocations     // signed-out sessions
	streams chan struct{}   // a slot per live stream

	closeOnce sync.Once
	done      chan struct{} // closed by Close

	countCache countCache
	countLimit int64 // the counts' cap: 0, store.DefaultCountLimit, unless a test lowers it
	toolsCache toolsCache
	changedAt  atomic.Int64 // Unix ns of the last change Engine.Subscribe told
	unsub      func()
}

// lastChange returns when Engine.Subscribe last told of a change.
func (h *Handler) lastChange() time.Time { return time.Unix(0, h.changedAt.Load()) }

//go:embed assets
var assets embed.FS

// New returns the dashboard of opts.
func New(opts Options) (*Handler, error) {
	if opts.Engine == nil || opts.Store == nil {
		return nil, errors.New("dashboard: Options.Engine and Options.Store are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.LiveInterval <= 0 {
		opts.LiveInterval = DefaultLiveInterval
	}
	if opts.RecheckInterval <= 0 {
		opts.RecheckInterval = DefaultRecheckInterval
	}
	if opts.MaxLiveStreams <= 0 {
		opts.MaxLiveStreams = DefaultMaxLiveStreams
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &Handler{
		opts:    opts,
		key:     opts.SessionKey,
		logins:  quota.NewLimiters(signInRate, signInBurst),
		streams: make(chan struct{}, opts.MaxLiveStreams),
		done:    make(chan struct{}),
	}
	if len(h.key) == 0 {
		h.key = make([]byte, 32)
		rand.Read(h.key)
	}
	t, err := parseTemplates(opts.Gates != nil)
	if err != nil {
		return nil, err
	}
	h.tmpl = t
	sub, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, err
	}
	h.static = http.FileServerFS(sub)
	h.unsub = opts.Engine.Subscribe(func(task.ID) { h.changedAt.Store(h.now().UnixNano()) })
	h.routes()
	return h, nil
}

// routes declares the dashboard's URLs, relative to where it is mounted.
func (h *Handler) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.authed(h.serveList))
	m.HandleFunc("GET /tasks/{id}", h.authed(h.serveTask))
	m.HandleFunc("POST /tasks/{id}/cancel", h.authed(h.action(h.cancelOne)))
	m.HandleFunc("POST /tasks/{id}/reveal", h.authed(h.action(h.reveal)))
	m.HandleFunc("POST /cancel", h.authed(h.action(h.cancelMany)))
	m.HandleFunc("POST /drain", h.authed(h.action(h.setDrain)))
	m.HandleFunc("POST /tasks/{id}/rerun", h.authed(h.action(h.runAgain)))
	m.HandleFunc("GET /tools", h.authed(h.serveTools))
	m.HandleFunc("GET /webhooks", h.authed(h.serveWebhooks))
	m.HandleFunc("GET /approvals", h.authed(h.serveApprovals))
	m.HandleFunc("POST /approvals/{id}/decide", h.authed(h.action(h.decide)))
	m.HandleFunc("POST /approvals/{id}/handoff", h.authed(h.action(h.recordHandoff)))
	m.HandleFunc("GET /live", h.authed(h.serveListLive))
	m.HandleFunc("GET /tasks/{id}/live", h.authed(h.serveTaskLive))
	m.HandleFunc("GET /login", h.serveLogin)
	m.HandleFunc("POST /login", h.login)
	m.HandleFunc("POST /logout", h.logout)
	m.Handle("GET /static/", http.StripPrefix("/static", h.static))
	h.mux = m
	h.guarded = http.NewCrossOriginProtection().Handler(m)
}

// csp is the Content-Security-Policy of every response: the page's own
// script and style only, no inline code, nothing from other origins, no
// framing, forms posting back here only.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP serves the dashboard.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: with no-referrer, browsers send
	// "Origin: null" on the forms' POSTs, which a loopback listener's
	// DNS-rebinding guard refuses. Other origins still get no referrer
	// (the URLs hold task IDs).
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	if !strings.HasPrefix(r.URL.Path, "/static/") {
		hd.Set("Cache-Control", "no-store")
	}
	if r.URL.Path == "" {
		// Mounted with StripPrefix("/dashboard") and asked for
		// "/dashboard": send the browser to "dashboard/", relative, so a
		// proxy's prefix is kept.
		redirect(w, relativeSelf(r))
		return
	}
	h.guarded.ServeHTTP(w, r)
}

// relativeSelf is the relative URL of the directory a request for a
// path without its trailing slash names ("./dashboard/" for
// "/ops/dashboard"): the full path is in RequestURI, as the client sent
// it, before any StripPrefix.
func relativeSelf(r *http.Request) string {
	u := r.RequestURI
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	if i := strings.LastIndex(u, "/"); i >= 0 {
		u = u[i+1:]
	}
	if u == "" {
		return "./"
	}
	return "./" + u + "/"
}

// base returns the relative URL of the dashboard's root from the page
// r asks for ("./" at the root, "../" one level down), so that the
// pages' links hold under any prefix.
func base(r *http.Request) string {
	depth := strings.Count(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if depth == 0 {
		return "./"
	}
	return strings.Repeat("../", depth)
}

// now is the dashboard's clock.
func (h *Handler) now() time.Time { return h.opts.Now() }
