package mcptask

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/internal/adapter/wire2025"
	"github.com/mcptask/mcptask/internal/delivery"
	"github.com/mcptask/mcptask/internal/webhook"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire/events"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Events configures the MCP Events a [Server] serves (the
// io.modelcontextprotocol/events extension; see docs/events.md): the
// task.status and task.output event types of each requester's own tasks,
// by events/poll and events/stream always, by webhook (events/subscribe)
// when Webhooks is set. Zero fields take the defaults named in
// internal/delivery and internal/adapter.
type Events struct {
	// Webhooks enables webhook delivery (events/subscribe and
	// events/unsubscribe), for authenticated requesters.
	Webhooks bool
	// AllowPrivateCallbacks lets callbacks be plain http:// on loopback
	// and resolve to loopback or private addresses. For tests only: in
	// production a callback must be https and globally routable.
	AllowPrivateCallbacks bool
	// VerifiedCallbacks lists callback URL prefixes that need no
	// verification handshake (the operator vouches for them).
	VerifiedCallbacks []string
	// MaxSubscriptions caps one requester's webhook subscriptions
	// (default 100); MaxStreams its open events/stream requests
	// (default 16).
	MaxSubscriptions, MaxStreams int
	// DefaultTTL is the lifetime granted to a subscription whose client
	// suggests none (default 1 h); MaxTTL caps any grant (default 24 h).
	// AllowNoExpiry grants no expiry to a client asking for it.
	DefaultTTL, MaxTTL time.Duration
	AllowNoExpiry      bool
	// Timeout bounds one delivery attempt (default 10 s); MaxAttempts is
	// a delivery's attempt budget (default 12) before it is a dead
	// letter; RetryBase and RetryMax bound the backoff (default 1 s and
	// 5 min); Workers is how many deliveries are sent at once (default
	// 16; negative: this instance sends none and applies no retention,
	// another instance sharing the store delivers); Rate caps the
	// deliveries per second of one requester's subscriptions (default
	// 50).
	Timeout             time.Duration
	MaxAttempts         int
	RetryBase, RetryMax time.Duration
	Workers             int
	Rate                float64
	// Lease is how long a claimed delivery is kept from other instances
	// (default 1 min): a crashed instance's deliveries are taken over
	// after it. It must exceed Timeout.
	Lease time.Duration
	// Retention is how long events and dead letters are kept (default
	// 24 h): a cursor older than that reads with truncated set.
	Retention time.Duration
	// PublishLog names task-log streams whose lines every tool's tasks
	// publish as output events, besides each tool's
	// ToolOptions.PublishLog (e.g. "stdout" of commands, "job" of HTTP
	// jobs; "*" for all).
	PublishLog []string
	// Observer, if set, is told of deliveries (the metrics implement
	// it); nil uses the engine's observer when it implements it.
	Observer delivery.Observer
}

// setupEvents configures the core's events and the deliverer.
func (s *Server) setupEvents(o Events) {
	s.publishAll = o.PublishLog
	s.noDelivery = o.Workers < 0
	sender := webhook.New(webhook.Options{Timeout: o.Timeout, AllowPrivate: o.AllowPrivateCallbacks})
	s.core.SetEvents(adapter.EventsConfig{
		Webhooks: o.Webhooks, Sender: sender, AllowPlainLoopback: o.AllowPrivateCallbacks,
		Verified: o.VerifiedCallbacks, MaxSubscriptions: o.MaxSubscriptions, MaxStreams: o.MaxStreams,
		DefaultTTL: o.DefaultTTL, MaxTTL: o.MaxTTL, AllowNoExpiry: o.AllowNoExpiry,
		OutputSchemas: s.outputSchemas,
	})
	obs := o.Observer
	if obs == nil {
		obs, _ = s.eng.Observer().(delivery.Observer)
	}
	s.deliverer = delivery.New(delivery.Options{
		Store: s.eng.Events(), Sender: sender, Result: s.core.ResultOf(), Observer: obs, Log: s.core.Log(),
		Workers: o.Workers, MaxAttempts: o.MaxAttempts, RetryBase: o.RetryBase, RetryMax: o.RetryMax,
		Rate: o.Rate, Retention: o.Retention, Lease: o.Lease,
	})
}

// outputSchemas returns the tools with an OutputSchema.
func (s *Server) outputSchemas() map[string]*jsonschema.Schema {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]*jsonschema.Schema{}
	for name, o := range s.tools {
		if o.OutputSchema != nil {
			out[name] = o.OutputSchema
		}
	}
	return out
}

// startEvents runs the deliverer until Close, woken by every task change.
func (s *Server) startEvents() {
	if s.noDelivery {
		s.stopEvents = func() {}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	stop := s.eng.Subscribe(func(task.ID) { s.deliverer.Wake() })
	go func() {
		defer close(done)
		s.deliverer.Run(ctx)
	}()
	s.stopEvents = func() {
		stop()
		cancel()
		<-done
	}
}

// streamWriteTimeout bounds the write of one frame of an events/stream.
const streamWriteTimeout = 30 * time.Second

type eventsReqKey struct{}

// eventsRequest returns the request the middleware stashed for an
// events/* method.
func eventsRequest(ctx context.Context) mcp.Request {
	r, _ := ctx.Value(eventsReqKey{}).(mcp.Request)
	return r
}

// addEventsMethods registers the events/* methods on the mcp.Server;
// their handlers are the core's, for the request the middleware stashed.
func (s *Server) addEventsMethods() error {
	return errors.Join(
		mcp.AddReceivingCustomMethod(s.mcp, events.MethodList, func(ctx context.Context, _ *mcp.ServerSession, _ *events.ListParams) (*events.ListResult, error) {
			return s.core.EventsList(ctx, eventsRequest(ctx))
		}),
		mcp.AddReceivingCustomMethod(s.mcp, events.MethodPoll, func(ctx context.Context, _ *mcp.ServerSession, p *events.PollParams) (*events.PollResult, error) {
			return s.core.EventsPoll(ctx, eventsRequest(ctx), p)
		}),
		mcp.AddReceivingCustomMethod(s.mcp, events.MethodSubscribe, func(ctx context.Context, _ *mcp.ServerSession, p *events.SubscribeParams) (*events.SubscribeResult, error) {
			return s.core.EventsSubscribe(ctx, eventsRequest(ctx), p)
		}),
		mcp.AddReceivingCustomMethod(s.mcp, events.MethodUnsubscribe, func(ctx context.Context, _ *mcp.ServerSession, p *events.UnsubscribeParams) (*events.EmptyResult, error) {
			return s.core.EventsUnsubscribe(ctx, eventsRequest(ctx), p)
		}),
		mcp.AddReceivingCustomMethod(s.mcp, events.MethodStream, s.streamOnSession),
	)
}

// streamOnSession serves an events/stream that reached the go-sdk: on a
// stdio connection ([Server.Run]), whose notifications it writes there.
// Over Streamable HTTP the edge serves the stream before the go-sdk
// (serveEventStream).
func (s *Server) streamOnSession(ctx context.Context, ss *mcp.ServerSession, p *events.PollParams) (*events.EmptyResult, error) {
	notify := s.w25.EventNotifier(ss)
	if notify == nil {
		return nil, events2Unsupported("events/stream is served on stdio and Streamable HTTP POST streams only")
	}
	var id any
	if p != nil && p.Meta != nil {
		id = p.Meta[wire2025.MetaStreamID]
		delete(p.Meta, wire2025.MetaStreamID)
	}
	if _, err := s.core.EventsStream(ctx, eventsRequest(ctx), p, func(method string, params any) error {
		return notify(ctx, method, withSubscriptionID(params, id))
	}); err != nil {
		return nil, err
	}
	return &events.EmptyResult{}, nil
}

func events2Unsupported(msg string) error {
	return adapter.EventsError(events.CodeUnsupported, msg, map[string]string{"feature": "deliveryMode", "value": events.ModePush})
}

// withSubscriptionID returns params (a notification's) with
// _meta[io.modelcontextprotocol/subscriptionId] set to id.
func withSubscriptionID(params any, id any) any {
	b, err := json.Marshal(params)
	if err != nil {
		return params
	}
	// Numbers stay as written (no float64 on the way).
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil || m == nil {
		return params
	}
	meta, _ := m["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[events.MetaSubscriptionID] = id
	m["_meta"] = meta
	return m
}

// serveEventStream serves an events/stream POST over Streamable HTTP
// (either wire) as a server-sent event stream, and reports whether it
// did (false: body is not one, and nothing was written).
func (s *Server) serveEventStream(w http.ResponseWriter, r *http.Request, body []byte) bool {
	var msg struct {
		JSONRPC string             `json:"jsonrpc"`
		ID      json.RawMessage    `json:"id"`
		Method  string             `json:"method"`
		Params  *events.PollParams `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != events.MethodStream || len(msg.ID) == 0 {
		return false
	}

	var id any
	_ = json.Unmarshal(msg.ID, &id)
	ctx := r.Context()
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && auth.TokenInfoFromContext(ctx) == nil {
		ctx = adapter.WithSessionRequester(ctx, sid)
	}
	var meta map[string]any
	if msg.Params != nil {
		meta = msg.Params.Meta
	}
	req := &mcp.ServerRequest[*mcp.SubscriptionsListenParams]{
		Params: &mcp.SubscriptionsListenParams{Meta: meta},
		Extra:  &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(ctx), Header: r.Header},
	}
	writeErr := func(err error) {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "error": je})
	}
	if !s.requesterKnown(ctx, req) {
		writeErr(events2Unsupported("events/stream over HTTP cannot tell the requester of this server's Owner function (it needs the request's session): use events/poll"))
		return true
	}
	if err := s.core.AllowRequest(ctx, events.MethodStream, req); err != nil {
		writeErr(err)
		return true
	}
	rc := http.NewResponseController(w)
	started := false
	write := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if !started {
			started = true
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
		}
		// A client that stops reading does not hold the stream forever.
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", b); err != nil {
			return err
		}
		return rc.Flush()
	}
	// The server's shutdown ends the stream too.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.streamsCtx, cancel)
	defer stop()
	ended, err := s.core.EventsStream(sctx, req, msg.Params, func(method string, params any) error {
		return write(map[string]any{"jsonrpc": "2.0", "method": method, "params": withSubscriptionID(params, id)})
	})
	switch {
	case err != nil && !started:
		writeErr(err)
	case ended:
		// Its task ended: the final frame. Any other end (the server
		// shutting down) just closes the stream: the client reconnects
		// with its cursor.
		_ = write(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{"_meta": map[string]any{}}})
	}
	return true
}

// requesterKnown reports whether the server's Owner function tells the
// requester of req, built at the edge without a session: an Owner
// function that needs the session (and fails without it) does not.
func (s *Server) requesterKnown(ctx context.Context, req mcp.Request) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	s.core.Requester(ctx, req)
	return true
}
