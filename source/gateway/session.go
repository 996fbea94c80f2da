package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/httpguard"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is one session with an upstream, carrying at most one call at a
// time, and only calls of one requester (its key, see callKey): the
// requests and notifications the upstream sends during a call are that
// call's; those it sends between calls belong to no call and are refused.
type session struct {
	u  *upstream
	cs *mcp.ClientSession

	mu   sync.Mutex
	key  string          // the requester whose calls it carries; "" before its first call
	ctx  context.Context // the call's, nil while idle
	task *mcptask.Task   // the call's task, nil for a plain call
	tok  string          // the call's progress token
	// tainted: the upstream sent a request outside any call; the session
	// is closed instead of carrying another call.
	tainted bool
	// lost: since the call began, a POST of the session (an HTTP
	// upstream's) was sent and its answer lost: the call may have run.
	lost bool
	// notes counts the notifications read and handled, so that a call
	// ends after those the upstream sent before its answer.
	notes notes
}

var tokens atomic.Int64

// begin marks the session busy with a call of the requester key.
func (s *session) begin(ctx context.Context, key string, tk *mcptask.Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key, s.lost = key, false
	s.ctx, s.task, s.tok = ctx, tk, fmt.Sprintf("mcptask-gateway-%d", tokens.Add(1))
}

// sentAndLost records that a POST of the session was sent and its answer
// lost.
func (s *session) sentAndLost() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost = true
}

// wasLost reports whether a POST was sent and its answer lost since the
// call began.
func (s *session) wasLost() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// end marks the session idle.
func (s *session) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctx, s.task, s.tok = nil, nil, ""
}

func (s *session) token() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tok
}

// current returns the call in flight and its task; ok is false while the
// session is idle.
func (s *session) current() (_ context.Context, _ *mcptask.Task, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctx, s.task, s.ctx != nil
}

// isTainted reports whether the upstream sent a request outside any call.
func (s *session) isTainted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tainted
}

var errNoTask = errors.New("the upstream asked for input during a call that does not run as a task")

// errNoCall refuses a request the upstream sent while no call of the
// session was in flight: it belongs to no call (a finished one's, say,
// whose requester is gone), and is given to none.
var errNoCall = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "refused: this request was sent outside any tools/call in flight on the session"}

// outside refuses a request of the upstream that arrived while no call
// was in flight: logged without its payload, and the session tainted, so
// that it carries no other call.
func (s *session) outside(method string) error {
	s.mu.Lock()
	s.tainted = true
	s.mu.Unlock()
	s.u.log.Warn("refused a request the upstream sent outside any call; the session is closed", "method", method, "session", s.cs.ID())
	s.u.drop(s)
	return errNoCall
}

// elicit hands an upstream elicitation to the task of the call in flight:
// the task shows input_required until the client answers.
func (s *session) elicit(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	ctx, tk, ok := s.current()
	switch {
	case !ok:
		return nil, s.outside("elicitation/create")
	case tk == nil:
		return nil, errNoTask
	}
	p := *req.Params
	p.Meta = nil // the upstream's _meta (its related task, say) is not ours
	return tk.Elicit(ctx, &p)
}

// sample hands an upstream sampling request to the task of the call in
// flight.
func (s *session) sample(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	ctx, tk, ok := s.current()
	switch {
	case !ok:
		return nil, s.outside("sampling/createMessage")
	case tk == nil:
		return nil, errNoTask
	}
	p := *req.Params
	p.Meta = nil
	return tk.CreateMessage(ctx, &p)
}

// progress turns the upstream's progress of the call in flight into the
// task's status message.
func (s *session) progress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	defer s.notes.sawHandled()
	s.mu.Lock()
	ctx, tk, tok := s.ctx, s.task, s.tok
	s.mu.Unlock()
	if tk == nil || fmt.Sprint(req.Params.ProgressToken) != tok {
		return
	}
	msg := req.Params.Message
	if msg == "" {
		if req.Params.Total > 0 {
			msg = fmt.Sprintf("%g of %g", req.Params.Progress, req.Params.Total)
		} else {
			msg = fmt.Sprintf("progress %g", req.Params.Progress)
		}
	}
	_ = tk.SetStatusMessage(ctx, msg)
}

// logMessage writes the upstream's log message, sent while a call that
// runs as a task is in flight, to that task's log: "[level] text", under
// the upstream logger's name (or "upstream"). A message that is not a
// string is written as its JSON.
func (s *session) logMessage(_ context.Context, req *mcp.LoggingMessageRequest) {
	defer s.notes.sawHandled()
	_, tk, ok := s.current()
	if !ok {
		// Between calls: no task's. An upstream may log on its own.
		s.u.log.Debug("dropped a log message the upstream sent outside any call", "session", s.cs.ID())
		return
	}
	if tk == nil || req.Params == nil {
		return
	}
	text, ok := req.Params.Data.(string)
	if !ok {
		b, err := json.Marshal(req.Params.Data)
		if err != nil {
			return
		}
		text = string(b)
	}
	stream := req.Params.Logger
	if stream == "" {
		stream = "upstream"
	}
	tk.LogStream(stream, "["+string(req.Params.Level)+"] "+text)
}

// dial opens a new session with the upstream.
func (u *upstream) dial(ctx context.Context) (*session, error) {
	s := &session{u: u}
	opts := &mcp.ClientOptions{
		Logger:                      u.log,
		ElicitationHandler:          s.elicit,
		CreateMessageHandler:        s.sample, //nolint:staticcheck // forwarding the upstream's sampling is the point
		ProgressNotificationHandler: s.progress,
		LoggingMessageHandler:       s.logMessage,
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "mcptask-gateway", Version: "1"}, opts)
	var t mcp.Transport
	if u.cfg.Command != "" {
		t = countingTransport{Transport: u.transport(nil), n: &s.notes}
	} else {
		// The HTTP client counts the event streams' notifications.
		t = u.transport(u.httpClient(s.sentAndLost, &s.notes))
	}
	cs, err := c.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: u.cfg.ProtocolVersion})
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	s.cs = cs
	if lvl := u.logLevel(); lvl != "" {
		if init := cs.InitializeResult(); init != nil && init.Capabilities != nil && init.Capabilities.Logging != nil {
			if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: mcp.LoggingLevel(lvl)}); err != nil {
				u.log.Warn("the upstream refused the logging level: its log messages do not reach the task logs", "level", lvl, "err", err)
			}
		}
	}
	u.log.Debug("upstream session opened", "session", cs.ID())
	return s, nil
}

// logLevel is the logging level set on the upstream's sessions, "" for
// none.
func (u *upstream) logLevel() string {
	switch u.cfg.LogLevel {
	case "":
		return DefaultLogLevel
	case "off":
		return ""
	}
	return u.cfg.LogLevel
}

// httpClient is the HTTP client of an HTTP upstream: its configured
// headers (its credentials) go to its origin (scheme, host and port of its
// URL) only, and a redirect is followed within that origin only. A
// redirect elsewhere fails the request: it would carry the call's body
// (the tool's arguments) to a server nobody configured. lost, if not nil,
// is called when a POST was sent but its answer never came (the
// connection broke after the request went out).
func (u *upstream) httpClient(lost func(), n *notes) *http.Client {
	origin, _ := url.Parse(u.cfg.URL)
	return &http.Client{
		Transport:     &headers{base: http.DefaultTransport, h: u.cfg.Headers, origin: origin, lost: lost, notes: n},
		CheckRedirect: httpguard.SameOriginRedirects(nil),
	}
}

// headers adds fixed headers (e.g. an upstream's Authorization) to every
// request to origin, and to no other.
type headers struct {
	base   http.RoundTripper
	h      map[string]string
	origin *url.URL
	lost   func() // a POST was written, and no answer came
	notes  *notes // counts the notifications of event streams, if not nil
}

func (t *headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 && t.origin != nil && httpguard.SameOrigin(r.URL, t.origin) {
		r = r.Clone(r.Context())
		for k, v := range t.h {
			r.Header.Set(k, v)
		}
	}
	if t.lost == nil || r.Method != http.MethodPost {
		return t.counting(t.base.RoundTrip(r))
	}
	var wrote atomic.Bool
	r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) { wrote.Store(info.Err == nil) },
	}))
	res, err := t.base.RoundTrip(r)
	if err != nil && wrote.Load() {
		t.lost()
	}
	return t.counting(res, err)
}

// counting gives an event stream's answer a body that counts its
// notifications.
func (t *headers) counting(res *http.Response, err error) (*http.Response, error) {
	if err == nil && t.notes != nil && eventStream(res.Header.Get("Content-Type")) {
		res.Body = &countingBody{ReadCloser: res.Body, n: t.notes}
	}
	return res, err
}

// logWriter logs what a stdio upstream writes on its standard error.
type logWriter struct {
	log *slog.Logger
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.log.Info("upstream stderr", "line", string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
