package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/mcptask/mcptask/wire/ext2026"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tasks methods a client sends (custom methods of the go-sdk).
const (
	methodTasksGet    = "tasks/get"
	methodTasksUpdate = "tasks/update"
	methodTasksCancel = "tasks/cancel"
	methodTasksResult = "tasks/result"
	methodTasksList   = "tasks/list"
)

// clientImpl holds the connection; its methods do the work of Client.
type clientImpl struct {
	wire    string
	target  string
	opts    Options
	log     *slog.Logger
	cs      *mcp.ClientSession
	e       *edge
	journal *journal // nil without Options.Journal
	closeFn func()   // releases transport resources after the session

	// extension reports whether the server advertised the tasks extension
	// in server/discover (2026-07-28).
	extension bool

	mu      sync.Mutex
	handled map[string]map[string]bool // task ID → input request keys answered or being answered (2026)
	results map[string]*resultCall     // task ID → tasks/result in flight (2025)
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
	hc.Transport = &edgeRoundTripper{base: base, e: e}
	t := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &hc}
	closeFn := func() {
		if owned != nil {
			owned.CloseIdleConnections()
		}
	}
	c, err := newClient(ctx, t, url, o, e, closeFn)
	if err != nil {
		closeFn()
		return nil, err
	}
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
	return newClient(ctx, &edgeTransport{inner: t, e: e}, target, opts.normalized(), e, func() {})
}

func newClient(ctx context.Context, t mcp.Transport, target string, o Options, e *edge, closeFn func()) (*Client, error) {
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
		handled: map[string]map[string]bool{},
		results: map[string]*resultCall{},
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
	for _, m := range []string{methodTasksGet, methodTasksUpdate, methodTasksCancel, methodTasksResult, methodTasksList} {
		if err := mcp.AddSendingCustomMethod[*taskParams, *rawResult](mc, m); err != nil {
			return nil, err
		}
	}
	cs, err := mc.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: o.ProtocolVersion})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", target, err)
	}
	c.cs = cs
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
	if init.Capabilities != nil {
		_, c.extension = init.Capabilities.Extensions[ext2026.ExtensionID]
	}
	c.log.Debug("connected", "target", target, "wire", c.wire, "tasks", c.tasksSupported())
	return &Client{impl: c}, nil
}

// modern reports whether the session speaks the 2026-07-28 wire (or later).
func (c *clientImpl) modern() bool { return c.wire >= Wire20260728 }

func (c *clientImpl) close() error {
	err := c.cs.Close()
	c.closeFn()
	return err
}

func (c *clientImpl) tasksSupported() bool {
	switch {
	case c.modern():
		return c.extension
	case c.wire == Wire20251125:
		call, _, _ := c.e.serverTasks()
		return call
	}
	return false
}

func (c *clientImpl) tools(ctx context.Context) ([]Tool, error) {
	var out []Tool
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tool := Tool{Tool: t}
		if c.wire == Wire20251125 {
			tool.TaskSupport, _ = c.e.toolSupport(t.Name)
		}
		out = append(out, tool)
	}
	return out, nil
}

// elicitFromServer answers an elicitation/create the server sends: on
// 2025-11-25 for a task (during tasks/result, with the related-task _meta),
// or during a plain call.
func (c *clientImpl) elicitFromServer(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	id := relatedTask(req.Params.GetMeta())
	if c.opts.Elicit == nil {
		c.log.Info("declining an elicitation: no Elicit handler", "task", id)
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	return c.opts.Elicit(ctx, id, req.Params)
}

// sampleFromServer answers a sampling/createMessage the server sends.
func (c *clientImpl) sampleFromServer(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return c.opts.Sample(ctx, relatedTask(req.Params.GetMeta()), req.Params)
}

// relatedTask returns the task ID of a related-task _meta, "" if none.
func relatedTask(meta map[string]any) string {
	rt, _ := meta[v1.MetaRelatedTask].(map[string]any)
	id, _ := rt["taskId"].(string)
	return id
}

// custom sends a tasks/* method and returns the raw result.
func (c *clientImpl) custom(ctx context.Context, method string, params *taskParams) (json.RawMessage, error) {
	res, err := mcp.CallCustomMethod[*taskParams, *rawResult](ctx, c.cs, method, params)
	if err != nil {
		return nil, err
	}
	if len(res.JSON) == 0 || string(res.JSON) == "null" {
		return nil, fmt.Errorf("%s: the server sent an empty result", method)
	}
	return res.JSON, nil
}

// taskParams are the params of every tasks/* request the client sends.
type taskParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId,omitempty"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	Cursor         string                     `json:"cursor,omitempty"`
}
