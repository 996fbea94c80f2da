package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/events"
	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// clientImpl holds the connection; its methods do the work of Client.
type clientImpl struct {
	wire    string       // the negotiated protocol revision
	tw      wireStrategy // the task wire's side, picked at connect
	target  string
	opts    Options
	log     *slog.Logger
	e       *edge
	journal *journal // nil without Options.Journal
	// noLedger is set once the server answered that it keeps no
	// operation ledger (CallTool stops asking it for unknown effects).
	noLedger atomic.Bool
	closeFn  func() // releases transport resources after the session
	// closing is closed by Close: waits following notifications stop
	// expecting them.
	closing   chan struct{}
	closeOnce sync.Once
	// idempotent reports whether the server advertised
	// wire.ExtensionIdempotency: it honours the key of a re-sent create.
	idempotent bool
	// deleteExt reports whether the server advertised
	// wire.ExtensionTasksDelete (2026-07-28: tasks/delete).
	deleteExt bool
	// opsAdvertised reports whether the server advertised its operation
	// ledger (wire.ExtensionOperations, in either capability map).
	opsAdvertised bool
	// effectCheck reports whether the server checks a call's unknown
	// effects itself (ExtensionOperations' wire.EffectCheckSetting):
	// CallTool then asks it to (wire.MetaRefuseUnknownEffects) instead of
	// listing the operations first.
	effectCheck bool
	// notifies reports whether the server advertised
	// wire.ExtensionTaskNotifications (2025-11-25 status notifications).
	notifies bool
	// listen opens 2026-07-28 subscriptions/listen streams; nil when the
	// client was not made with Dial.
	listen *listener

	mu sync.Mutex
	cs *mcp.ClientSession // the session now (see renew)
	// redial opens a new session with the same server, nil when the
	// transport cannot (a custom one, such as stdio's, which would start
	// another server).
	redial func(ctx context.Context) (*mcp.ClientSession, error)
}

// session returns the session requests go out on.
func (c *clientImpl) session() *mcp.ClientSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cs
}

// sessionGone reports whether err says the go-sdk closed the session for
// good: the server forgot it (a restart answers 404 for its ID) or the
// connection failed in a way the go-sdk does not recover from.
func sessionGone(err error) bool {
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing)
}

// renew replaces the session broken, closed for good, by a new one with
// the same server, unless another request did already. Tasks outlive
// sessions: the new session reaches the same tasks (a restarted server
// forgets its sessions, not its tasks).
func (c *clientImpl) renew(ctx context.Context, broken *mcp.ClientSession) error {
	if c.redial == nil {
		return errors.New("the session was closed and this transport cannot open another")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cs != broken {
		return nil // renewed meanwhile
	}
	cs, err := c.redial(ctx)
	if err != nil {
		return err
	}
	if init := cs.InitializeResult(); init == nil || init.ProtocolVersion != c.wire {
		cs.Close()
		return fmt.Errorf("the server no longer speaks %s", c.wire)
	}
	c.log.Info("the session was closed; continuing on a new one", "target", c.target)
	c.cs = cs
	// The old session is dead, but its Close waits for what still runs on
	// it (an input handler, another request about to fail): not here.
	go broken.Close()
	return nil
}

// onSession runs fn on the session, and once more on a new session when
// the first was closed for good (see renew).
func onSession[T any](ctx context.Context, c *clientImpl, fn func(*mcp.ClientSession) (T, error)) (T, error) {
	cs := c.session()
	v, err := fn(cs)
	if err != nil && sessionGone(err) && ctx.Err() == nil {
		if rerr := c.renew(ctx, cs); rerr == nil {
			return fn(c.session())
		}
	}
	return v, err
}

// rawResult captures a result's JSON as is; the client decodes it per
// wire. One result type serves every tasks/* method, since the go-sdk
// decodes into the type registered for the method.
type rawResult struct {
	mcp.ResultBase
	JSON json.RawMessage `json:"-"`
}

func (r *rawResult) UnmarshalJSON(b []byte) error {
	r.JSON = append(json.RawMessage(nil), b...)
	return nil
}

func (o *Options) normalized() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.ClientInfo == nil {
		out.ClientInfo = &mcp.Implementation{Name: "mcptask-client", Version: "1"}
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

func dial(ctx context.Context, url string, opts *Options) (*Client, error) {
	o := opts.normalized()
	var hc http.Client
	var base http.RoundTripper
	var owned *http.Transport
	if o.HTTPClient != nil {
		hc = *o.HTTPClient
		base = hc.Transport
	}
	if base == nil {
		owned = http.DefaultTransport.(*http.Transport).Clone()
		base = owned
	}
	e := newEdge()
	auth := &authRoundTripper{base: base, token: o.BearerToken}
	hc.Transport = &edgeRoundTripper{base: auth, e: e}
	t := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &hc}
	closeFn := func() {
		if owned != nil {
			owned.CloseIdleConnections()
		}
	}
	c, err := newClient(ctx, t, url, o, e, closeFn, true)
	if err != nil {
		closeFn()
		if auth.refused.Load() {
			return nil, &UnauthorizedError{TokenSent: o.BearerToken != "", Err: err}
		}
		return nil, err
	}
	// Listen streams go through the same client: its bearer token and
	// edge apply.
	c.impl.listen = &listener{hc: &hc, url: url, wire: c.impl.wire, info: o.ClientInfo}
	return c, nil
}

func connect(ctx context.Context, t mcp.Transport, target string, opts *Options) (*Client, error) {
	if t == nil {
		return nil, errors.New("client: Connect needs a transport")
	}
	if target == "" {
		return nil, errors.New("client: Connect needs a target naming the server (the journal records it)")
	}
	e := newEdge()
	// The connection itself carries the server's notifications.
	e.hub.always = true
	return newClient(ctx, &edgeTransport{inner: t, e: e}, target, opts.normalized(), e, func() {}, false)
}

// newClient connects on t; redial says t may connect again, for a new
// session when the server forgot the first.
func newClient(ctx context.Context, t mcp.Transport, target string, o Options, e *edge, closeFn func(), redial bool) (*Client, error) {
	switch o.ProtocolVersion {
	case "", Wire20260728, Wire20251125:
	default:
		return nil, fmt.Errorf("client: unknown ProtocolVersion %q (want %q, %q or empty)", o.ProtocolVersion, Wire20260728, Wire20251125)
	}
	c := &clientImpl{
		target:  target,
		opts:    o,
		log:     o.Logger,
		e:       e,
		closeFn: closeFn,
		closing: make(chan struct{}),
	}
	if o.Journal != "" {
		j, err := openJournal(o.Journal)
		if err != nil {
			return nil, err
		}
		c.journal = j
	}

	// The tasks extension goes into the client's capabilities, which the
	// go-sdk sends in every request's _meta on 2026-07-28 (including custom
	// methods) and in initialize on 2025-11-25.
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension(ext2026.ExtensionID, map[string]any{})
	// MCP Events: the client follows a task's eventSource (Events).
	caps.AddExtension(events.ExtensionID, map[string]any{})
	copts := &mcp.ClientOptions{
		Logger:       o.Logger,
		Capabilities: caps,
		// Elicitation is always declared: a nil Options.Elicit declines.
		ElicitationHandler: c.elicitFromServer,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			e.forgetTools()
		},
	}
	if o.Sample != nil {
		copts.CreateMessageHandler = c.sampleFromServer //nolint:staticcheck // sampling is what Options.Sample asks for
	}
	mc := mcp.NewClient(o.ClientInfo, copts)
	for _, m := range []string{wire.MethodTasksGet, wire.MethodTasksUpdate, wire.MethodTasksCancel, wire.MethodTasksResult, wire.MethodTasksList, wire.MethodTasksDelete, wire.MethodOperationsList} {
		if err := mcp.AddSendingCustomMethod[*taskParams, *rawResult](mc, m); err != nil {
			return nil, err
		}
	}
	for _, m := range []string{events.MethodPoll} {
		if err := mcp.AddSendingCustomMethod[*events.PollParams, *rawResult](mc, m); err != nil {
			return nil, err
		}
	}
	open := func(ctx context.Context) (*mcp.ClientSession, error) {
		wt := &watchedTransport{Transport: t}
		cs, err := mc.Connect(ctx, wt, &mcp.ClientSessionOptions{ProtocolVersion: o.ProtocolVersion})
		if err != nil {
			if wt.conn != nil {
				// The go-sdk closes the session it was making on most of
				// its failures; this covers them all (Close may be called
				// twice).
				wt.conn.Close()
			}
			return nil, fmt.Errorf("connecting to %s: %w", target, err)
		}
		return cs, nil
	}
	cs, err := open(ctx)
	if err != nil {
		return nil, err
	}
	c.cs = cs
	if redial {
		c.redial = open
	}
	init := cs.InitializeResult()
	if init == nil {
		cs.Close()
		return nil, fmt.Errorf("connecting to %s: no initialize or discover result", target)
	}
	c.wire = init.ProtocolVersion
	if o.ProtocolVersion != "" && c.wire != o.ProtocolVersion {
		cs.Close()
		return nil, fmt.Errorf("connecting to %s: the server does not speak %s (it negotiated %s)", target, o.ProtocolVersion, c.wire)
	}
	if caps := init.Capabilities; caps != nil {
		_, inExt := caps.Extensions[wire.ExtensionIdempotency]
		_, inExp := caps.Experimental[wire.ExtensionIdempotency]
		c.idempotent = inExt || inExp
		_, c.deleteExt = caps.Extensions[wire.ExtensionTasksDelete]
		_, opsExt := caps.Extensions[wire.ExtensionOperations]
		_, opsExp := caps.Experimental[wire.ExtensionOperations]
		c.opsAdvertised = opsExt || opsExp
		for _, settings := range []any{caps.Extensions[wire.ExtensionOperations], caps.Experimental[wire.ExtensionOperations]} {
			if m, ok := settings.(map[string]any); ok && m[wire.EffectCheckSetting] == true {
				c.effectCheck = true
			}
		}
		_, c.notifies = caps.Experimental[wire.ExtensionTaskNotifications]
	}
	c.tw = newWireStrategy(c, init)
	c.log.Debug("connected", "target", target, "wire", c.wire, "tasks", c.tasksSupported())
	return &Client{impl: c}, nil
}

// watchedTransport remembers the connection its transport made, so that a
// connect that fails after it (cut short by ctx, or refused) closes it. It
// hands the connection on as it is: the go-sdk talks to its own
// connections through interfaces a wrapper would hide.
type watchedTransport struct {
	mcp.Transport
	conn mcp.Connection
}

func (t *watchedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	t.conn = conn
	return conn, err
}

func (c *clientImpl) close() error {
	c.closeOnce.Do(func() { close(c.closing) })
	err := c.session().Close()
	c.closeFn()
	return err
}

func (c *clientImpl) tasksSupported() bool { return c.tw.tasksSupported() }

func (c *clientImpl) tools(ctx context.Context) ([]Tool, error) {
	var out []Tool
	_, err := onSession(ctx, c, func(cs *mcp.ClientSession) (struct{}, error) {
		out = out[:0]
		for t, err := range cs.Tools(ctx, nil) {
			if err != nil {
				return struct{}{}, err
			}
			out = append(out, Tool{Tool: t, TaskSupport: c.tw.taskSupport(t.Name)})
		}
		return struct{}{}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// custom sends a tasks/* method and returns the raw result.
func (c *clientImpl) custom(ctx context.Context, method string, params *taskParams) (json.RawMessage, error) {
	c.requestMeta(ctx, &params.Meta)
	res, err := onSession(ctx, c, func(cs *mcp.ClientSession) (*rawResult, error) {
		return mcp.CallCustomMethod[*taskParams, *rawResult](ctx, cs, method, params)
	})
	if err != nil {
		return nil, err
	}
	if len(res.JSON) == 0 || string(res.JSON) == "null" {
		return nil, fmt.Errorf("%s: the server sent an empty result", method)
	}
	return res.JSON, nil
}

// requestMeta lets Options.RequestMeta add to the _meta of a request
// sent in ctx; it leaves *meta as it is when there is no RequestMeta or
// it added nothing.
func (c *clientImpl) requestMeta(ctx context.Context, meta *mcp.Meta) {
	if c.opts.RequestMeta == nil {
		return
	}
	m := *meta
	if m == nil {
		m = mcp.Meta{}
	}
	c.opts.RequestMeta(ctx, m)
	if len(m) > 0 {
		*meta = m
	}
}

// taskParams are the params of every tasks/* request the client sends.
// lookParams are the params of a tasks/get of the task id, marked as a
// one-time look (wire.MetaLook) when look is set.
func lookParams(id string, look bool) *taskParams {
	p := &taskParams{TaskID: id}
	if look {
		p.Meta = mcp.Meta{wire.MetaLook: true}
	}
	return p
}

type taskParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId,omitempty"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	Cursor         string                     `json:"cursor,omitempty"`
	State          string                     `json:"state,omitempty"` // of io.mcptask/operations/list
}

// authRoundTripper adds the bearer token to each request and notes a
// refusal (HTTP 401).
type authRoundTripper struct {
	base    http.RoundTripper
	token   string
	refused atomic.Bool
}

func (rt *authRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if rt.token != "" && r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+rt.token)
	}
	resp, err := rt.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		rt.refused.Store(true)
	}
	return resp, err
}
