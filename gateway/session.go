package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"

	"github.com/mcptask/mcptask"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is one session with an upstream, carrying at most one call at a
// time: the requests and notifications the upstream sends meanwhile are
// that call's.
type session struct {
	u  *upstream
	cs *mcp.ClientSession

	mu   sync.Mutex
	ctx  context.Context // the call's, nil while idle
	task *mcptask.Task   // the call's task, nil for a plain call
	tok  string          // the call's progress token
}

var tokens atomic.Int64

// begin marks the session busy with a call.
func (s *session) begin(ctx context.Context, tk *mcptask.Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctx, s.task, s.tok = ctx, tk, fmt.Sprintf("mcptask-gateway-%d", tokens.Add(1))
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

// current returns the call in flight and its task.
func (s *session) current() (context.Context, *mcptask.Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctx, s.task
}

var errNoTask = errors.New("the upstream asked for input during a call that does not run as a task")

// elicit hands an upstream elicitation to the task of the call in flight:
// the task shows input_required until the client answers.
func (s *session) elicit(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	ctx, tk := s.current()
	if tk == nil {
		return nil, errNoTask
	}
	p := *req.Params
	p.Meta = nil // the upstream's _meta (its related task, say) is not ours
	return tk.Elicit(ctx, &p)
}

// sample hands an upstream sampling request to the task of the call in
// flight.
func (s *session) sample(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	ctx, tk := s.current()
	if tk == nil {
		return nil, errNoTask
	}
	p := *req.Params
	p.Meta = nil
	return tk.CreateMessage(ctx, &p)
}

// progress turns the upstream's progress of the call in flight into the
// task's status message.
func (s *session) progress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
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
	_, tk := s.current()
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
		cmd := exec.Command(u.cfg.Command, u.cfg.Args...)
		cmd.Dir = u.cfg.Dir
		cmd.Env = os.Environ()
		for k, v := range u.cfg.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = &logWriter{log: u.log}
		dieWithParent(cmd)
		t = &mcp.CommandTransport{Command: cmd}
	} else {
		t = &mcp.StreamableClientTransport{Endpoint: u.cfg.URL, HTTPClient: &http.Client{Transport: &headers{base: http.DefaultTransport, h: u.cfg.Headers}}}
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

// headers adds fixed headers (e.g. an upstream's Authorization) to every
// request.
type headers struct {
	base http.RoundTripper
	h    map[string]string
}

func (t *headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.h {
			r.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(r)
}

// logWriter logs what a stdio upstream writes on its standard error.
type logWriter struct {
	log *slog.Logger
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.log.Info("upstream stderr", "line", string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
