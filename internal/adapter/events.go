package adapter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/delivery"
	"github.com/mcptask/mcptask/internal/webhook"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire/events"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"
)

// EventsConfig configures the MCP Events a Core serves (see
// docs/events.md); the zero value serves poll and push, not webhooks.
type EventsConfig struct {
	// Webhooks enables events/subscribe (webhook delivery), for
	// authenticated requesters.
	Webhooks bool
	// Sender sends the verification handshake (and, in the deliverer,
	// the deliveries); required with Webhooks.
	Sender *webhook.Sender
	// AllowPlainLoopback accepts http:// callbacks to loopback hosts
	// (tests only: the sender must allow private destinations too).
	AllowPlainLoopback bool
	// Verified lists callback URL prefixes that need no verification
	// handshake (the operator's allowlist).
	Verified []string
	// MaxSubscriptions caps one requester's webhook subscriptions; zero
	// means 100.
	MaxSubscriptions int
	// MaxStreams caps one requester's open events/stream requests; zero
	// means 16.
	MaxStreams int
	// DefaultTTL is granted when the client suggests none; zero means
	// an hour. MaxTTL caps a grant; zero means a day. A client asking
	// for no expiry (ttlMs: null) gets MaxTTL unless AllowNoExpiry.
	DefaultTTL, MaxTTL time.Duration
	AllowNoExpiry      bool
	// Heartbeat is the interval of a stream's heartbeats; zero means
	// 15 s.
	Heartbeat time.Duration
	// OutputSchemas returns the tools that declared the schema of their
	// outputs, and the schemas.
	OutputSchemas func() map[string]*jsonschema.Schema
}

// The named defaults of EventsConfig.
const (
	defaultMaxSubscriptions = 100
	defaultMaxStreams       = 16
	defaultSubscriptionTTL  = time.Hour
	defaultMaxTTL           = 24 * time.Hour
	minSubscriptionTTL      = time.Minute
	defaultHeartbeat        = 15 * time.Second
	// rotationGrace is how long a replaced secret still signs.
	rotationGrace = 5 * time.Minute
	// verifiedFor is how long a verified (requester, URL) is remembered.
	verifiedFor = time.Hour
	// eventsRecheck is how often a stream reads the store without a
	// wake-up (other instances' output events).
	eventsRecheck = time.Second
	// pollNextMs is the nextPollMs of an events/poll answer.
	pollNextMs = 2000
)

// eventsState is the Core's events bookkeeping.
type eventsState struct {
	cfg EventsConfig

	mu       sync.Mutex
	streams  map[task.Owner]int
	verified map[string]time.Time     // (owner, url) → when verified
	failed   map[string]failedCheck   // (owner, url) → its last failed check
	hosts    map[string]*rate.Limiter // verification POSTs per destination host
}

// failedCheck is a verification that failed, remembered a while so that
// asking again does not POST again.
type failedCheck struct {
	at  time.Time
	err error
}

// The bounds of verification POSTs: a failure is remembered for
// verifyFailureTTL; a host gets at most verifyHostRate POSTs a second
// (burst verifyHostBurst), so that subscriptions cannot flood it.
const (
	verifyFailureTTL = time.Minute
	verifyHostRate   = 1
	verifyHostBurst  = 5
)

// SetEvents configures the events the core serves; call it before
// serving.
func (c *Core) SetEvents(cfg EventsConfig) {
	if cfg.MaxSubscriptions <= 0 {
		cfg.MaxSubscriptions = defaultMaxSubscriptions
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = defaultMaxStreams
	}
	if cfg.DefaultTTL <= 0 {
		cfg.DefaultTTL = defaultSubscriptionTTL
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = defaultMaxTTL
	}
	cfg.DefaultTTL = min(cfg.DefaultTTL, cfg.MaxTTL)
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = defaultHeartbeat
	}
	c.events = &eventsState{cfg: cfg, streams: map[task.Owner]int{}, verified: map[string]time.Time{},
		failed: map[string]failedCheck{}, hosts: map[string]*rate.Limiter{}}
}

func (c *Core) ev() *eventsState {
	if c.events == nil {
		c.SetEvents(EventsConfig{})
	}
	return c.events
}

// EventsError is an error of the Events extension, with its data.
func EventsError(code int64, msg string, data any) error {
	e := &jsonrpc.Error{Code: code, Message: msg}
	if data != nil {
		e.Data, _ = json.Marshal(data)
	}
	return e
}

func unknownEvent(name string) error {
	return EventsError(events.CodeNotFound, fmt.Sprintf("unknown event type %q: see events/list", name), map[string]string{"kind": "event"})
}

// taskArgsSchema is the inputSchema of the task event types.
var taskArgsSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"taskId":{"type":"string","description":"Only the events of this task (the requester's own)."},` +
	`"tool":{"type":"string","description":"Only the events of this tool's tasks."}},"additionalProperties":false}`)

var statusPayloadSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"taskId":{"type":"string"},"tool":{"type":"string"},` +
	`"status":{"type":"string","enum":["working","input_required","completed","failed","cancelled"]},` +
	`"statusMessage":{"type":"string"},"outcome":{"type":"string","enum":["ok","tool_error","failed","cancelled"]},` +
	`"result":{"type":"object","description":"The CallToolResult of a completed task (absent when too large: resultOmitted)."},` +
	`"resultOmitted":{"type":"boolean"}},"required":["taskId","tool","status"]}`)

func outputPayloadSchema(data json.RawMessage) json.RawMessage {
	if data == nil {
		data = json.RawMessage(`{"description":"A JSON value the work emitted."}`)
	}
	return json.RawMessage(`{"type":"object","properties":{"taskId":{"type":"string"},"tool":{"type":"string"},` +
		`"stream":{"type":"string","description":"emit for what the work emitted, else the log stream of a published line."},` +
		`"data":` + string(data) + `,"text":{"type":"string","description":"A published log line."}},"required":["taskId","tool"]}`)
}

// deliveryModes are the modes a requester may use.
func (c *Core) deliveryModes() []string {
	modes := []string{events.ModePoll, events.ModePush}
	if c.ev().cfg.Webhooks {
		modes = append(modes, events.ModeWebhook)
	}
	return modes
}

// EventsList answers events/list: the task event types.
func (c *Core) EventsList(ctx context.Context, req mcp.Request) (*events.ListResult, error) {
	modes := c.deliveryModes()
	res := &events.ListResult{Events: []events.EventType{
		{Name: events.TypeStatus, Description: "Each status change of the requester's tasks (working, input_required, completed, failed, cancelled), with the outcome and, on completion, the result.",
			Delivery: modes, InputSchema: taskArgsSchema, PayloadSchema: statusPayloadSchema},
		{Name: events.TypeOutput, Description: "What the requester's tasks emit while they run: intermediate results, and the log lines their tools publish.",
			Delivery: modes, InputSchema: taskArgsSchema, PayloadSchema: outputPayloadSchema(nil)},
	}}
	if fn := c.ev().cfg.OutputSchemas; fn != nil {
		schemas := fn()
		for _, tool := range slices.Sorted(maps.Keys(schemas)) {
			raw, err := json.Marshal(schemas[tool])
			if err != nil {
				continue
			}
			res.Events = append(res.Events, events.EventType{Name: events.ToolOutputType(tool),
				Description: fmt.Sprintf("The intermediate results of the tasks of tool %s.", tool),
				Delivery:    modes, InputSchema: json.RawMessage(`{"type":"object","properties":{"taskId":{"type":"string"}},"additionalProperties":false}`),
				PayloadSchema: outputPayloadSchema(raw)})
		}
	}
	return res, nil
}

// eventSelector is what a subscription's (name, arguments) select.
type eventSelector struct {
	name   string
	kind   store.EventKind
	taskID task.ID
	tool   string
	args   string // canonical JSON
}

// selectEvents resolves name and args for owner; a task ID owner may
// not see is audited as a denied lookup and selects nothing (as an
// unknown one does).
func (c *Core) selectEvents(ctx context.Context, method string, owner task.Owner, name string, rawArgs json.RawMessage) (*eventSelector, error) {
	sel := &eventSelector{name: name}
	switch name {
	case events.TypeStatus:
		sel.kind = store.EventKindStatus
	case events.TypeOutput:
		sel.kind = store.EventKindOutput
	default:
		tool, ok := strings.CutSuffix(name, ".output")
		if !ok || tool == "" {
			return nil, unknownEvent(name)
		}
		schemas := map[string]*jsonschema.Schema{}
		if fn := c.ev().cfg.OutputSchemas; fn != nil {
			schemas = fn()
		}
		if _, ok := schemas[tool]; !ok {
			return nil, unknownEvent(name)
		}
		sel.kind, sel.tool = store.EventKindOutput, tool
	}
	var args events.TaskArgs
	if len(rawArgs) > 0 && string(rawArgs) != "null" {
		dec := json.NewDecoder(strings.NewReader(string(rawArgs)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&args); err != nil {
			return nil, InvalidParams(fmt.Sprintf("arguments of %s: %v (allowed: taskId, tool, both strings)", name, err))
		}
	}
	if args.Tool != "" {
		if sel.tool != "" && sel.tool != args.Tool {
			return nil, InvalidParams(fmt.Sprintf("arguments of %s: tool must be %s", name, sel.tool))
		}
		sel.tool = args.Tool
	}
	if args.TaskID != "" {
		id, err := ParseID(args.TaskID)
		if err != nil {
			return nil, err
		}
		sel.taskID = id
		if err := c.eng.CheckVisible(ctx, owner, id); err != nil {
			// Nothing is revealed: the selection is empty, as for an
			// unknown task, and the lookup audited.
			_ = c.EngineError(ctx, method, owner, id, err)
			sel.taskID = "denied"
		}
	}
	canon, _ := json.Marshal(args)
	sel.args = string(canon)
	return sel, nil
}

func (s *eventSelector) query(owner task.Owner) store.EventQuery {
	return store.EventQuery{Owner: owner, Kind: s.kind, TaskID: s.taskID, Tool: s.tool}
}

// resultOf is the delivery.ResultFunc of the core: the result of a
// completed task its owner may see.
func (c *Core) resultOf(ctx context.Context, owner task.Owner, id task.ID) json.RawMessage {
	t, err := c.eng.Get(ctx, owner, id)
	if err != nil || t.Status != task.Completed {
		return nil
	}
	return t.Result
}

// ResultOf is resultOf for the deliverer (its deliveries are the owner's
// own).
func (c *Core) ResultOf() delivery.ResultFunc { return c.resultOf }

func parseCursor(raw *string) (*store.EventPos, error) {
	if raw == nil {
		return nil, nil
	}
	p, err := store.ParseEventPos(*raw)
	if err != nil {
		return nil, InvalidParams("cursor: " + err.Error() + " (pass null to start from now)")
	}
	return &p, nil
}

func notBefore(maxAgeMs *int64, now time.Time) (time.Time, error) {
	if maxAgeMs == nil {
		return time.Time{}, nil
	}
	if *maxAgeMs < 0 {
		return time.Time{}, InvalidParams("maxAgeMs must not be negative")
	}
	if *maxAgeMs > int64(100*365*24*time.Hour/time.Millisecond) {
		return time.Time{}, nil // older than anything kept: no floor
	}
	return now.Add(-time.Duration(*maxAgeMs) * time.Millisecond), nil
}

func cursorOf(p store.EventPos) *string {
	s := p.String()
	return &s
}

// EventsPoll answers events/poll.
func (c *Core) EventsPoll(ctx context.Context, req mcp.Request, p *events.PollParams) (*events.PollResult, error) {
	if p == nil || p.Name == "" {
		return nil, InvalidParams("events/poll needs the name of an event type")
	}
	owner := c.Requester(ctx, req)
	sel, err := c.selectEvents(ctx, events.MethodPoll, owner, p.Name, p.Arguments)
	if err != nil {
		return nil, err
	}
	from, err := parseCursor(p.Cursor)
	if err != nil {
		return nil, err
	}
	if from == nil {
		head, err := c.eng.EventHead(ctx)
		if err != nil {
			return nil, c.EngineError(ctx, events.MethodPoll, owner, "", err)
		}
		return &events.PollResult{Events: []events.Occurrence{}, Cursor: cursorOf(head), NextPollMs: pollNextMs}, nil
	}
	q := sel.query(owner)
	q.After = *from
	if q.NotBefore, err = notBefore(p.MaxAgeMs, time.Now()); err != nil {
		return nil, err
	}
	if p.MaxEvents != nil {
		if *p.MaxEvents < 1 {
			return nil, InvalidParams("maxEvents must be at least 1")
		}
		q.Limit = *p.MaxEvents
	}
	page, err := c.eng.ReadEvents(ctx, owner, q)
	if err != nil {
		return nil, c.EngineError(ctx, events.MethodPoll, owner, "", err)
	}
	res := &events.PollResult{Events: make([]events.Occurrence, 0, len(page.Events)), Cursor: cursorOf(page.Next),
		Truncated: page.Truncated, HasMore: page.More, NextPollMs: pollNextMs}
	for _, e := range page.Events {
		res.Events = append(res.Events, delivery.Occurrence(ctx, e, sel.name, owner, cursorOf(e.Pos), c.resultOf))
	}
	return res, nil
}

// subscriptionID derives the ID of the subscription key.
func subscriptionID(owner task.Owner, u, name, args string) string {
	h := sha256.New()
	for _, part := range []string{string(owner), u, name, args} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return "sub_" + hex.EncodeToString(h.Sum(nil))[:24]
}

// webhookOwner checks that webhooks are served and that the requester
// is authenticated (a subscription is keyed on its principal).
func (c *Core) webhookOwner(ctx context.Context, req mcp.Request) (task.Owner, error) {
	if !c.ev().cfg.Webhooks {
		return "", EventsError(events.CodeUnsupported, "this server does not deliver events by webhook: use events/poll or events/stream",
			map[string]string{"feature": "deliveryMode", "value": events.ModeWebhook})
	}
	owner := c.Requester(ctx, req)
	if owner.Anonymous() {
		return "", EventsError(events.CodeForbidden, "webhook subscriptions need an authenticated requester", nil)
	}
	return owner, nil
}

func callbackURL(raw string, plain bool) (string, error) {
	u, err := webhook.CheckURL(raw, plain)
	if err != nil {
		return "", InvalidParams("delivery.url: " + err.Error())
	}
	return u.String(), nil
}

// verify runs the verification handshake of (owner, u) unless it is on
// the allowlist or was verified lately.
func (c *Core) verify(ctx context.Context, owner task.Owner, u, subID, secret string) error {
	st := c.ev()
	for _, prefix := range st.cfg.Verified {
		if strings.HasPrefix(u, prefix) {
			return nil
		}
	}
	key := string(owner) + "\x00" + u
	host := ""
	if pu, perr := url.Parse(u); perr == nil {
		host = pu.Host
	}
	st.mu.Lock()
	at, ok := st.verified[key]
	f, failed := st.failed[key]
	lim := st.hosts[host]
	if lim == nil {
		if len(st.hosts) > 10000 {
			clear(st.hosts)
		}
		lim = rate.NewLimiter(verifyHostRate, verifyHostBurst)
		st.hosts[host] = lim
	}
	st.mu.Unlock()
	if ok && time.Since(at) < verifiedFor {
		return nil
	}
	if failed && time.Since(f.at) < verifyFailureTTL {
		return f.err
	}
	if !lim.Allow() {
		return EventsError(events.CodeResourceExhausted, "too many callback verifications to this host: try again in a moment",
			map[string]any{"limit": "verifications"})
	}
	if st.cfg.Sender == nil {
		return EventsError(events.CodeCallbackEndpoint, "the callback could not be verified", map[string]string{"reason": "challenge_failed"})
	}
	if err := st.cfg.Sender.Verify(ctx, u, subID, []string{secret}); err != nil {
		reason := "challenge_failed"
		var we *webhook.Error
		if errors.As(err, &we) {
			reason = we.Category
		}
		c.log.Info("events: a webhook callback failed verification", "requester", owner, "host", host, "reason", reason)
		verr := EventsError(events.CodeCallbackEndpoint, "the callback endpoint failed verification: "+reason, map[string]string{"reason": reason})
		st.mu.Lock()
		if len(st.failed) > 10000 {
			clear(st.failed)
		}
		st.failed[key] = failedCheck{at: time.Now(), err: verr}
		st.mu.Unlock()
		return verr
	}
	st.mu.Lock()
	if len(st.verified) > 10000 {
		clear(st.verified)
	}
	st.verified[key] = time.Now()
	delete(st.failed, key)
	st.mu.Unlock()
	return nil
}

// grantTTL returns the expiry granted for the suggestion raw (absent,
// null or milliseconds) at now; zero means none.
func (c *Core) grantTTL(raw json.RawMessage, now time.Time) (time.Time, error) {
	cfg := c.ev().cfg
	switch {
	case len(raw) == 0:
		return now.Add(cfg.DefaultTTL), nil
	case string(raw) == "null":
		if cfg.AllowNoExpiry {
			return time.Time{}, nil
		}
		return now.Add(cfg.MaxTTL), nil
	}
	var ms int64
	if err := json.Unmarshal(raw, &ms); err != nil || ms < 0 {
		return time.Time{}, InvalidParams("ttlMs must be a non-negative integer of milliseconds, or null")
	}
	d := cfg.MaxTTL
	if ms < cfg.MaxTTL.Milliseconds() {
		d = max(time.Duration(ms)*time.Millisecond, minSubscriptionTTL)
	}
	return now.Add(d), nil
}

func rfc3339(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

// EventsSubscribe answers events/subscribe: a webhook subscription,
// created or refreshed.
func (c *Core) EventsSubscribe(ctx context.Context, req mcp.Request, p *events.SubscribeParams) (*events.SubscribeResult, error) {
	owner, err := c.webhookOwner(ctx, req)
	if err != nil {
		return nil, err
	}
	if p == nil || p.Name == "" {
		return nil, InvalidParams("events/subscribe needs the name of an event type")
	}
	if p.Delivery.Mode != "" && p.Delivery.Mode != events.ModeWebhook {
		return nil, EventsError(events.CodeUnsupported, "events/subscribe delivers by webhook only",
			map[string]string{"feature": "deliveryMode", "value": p.Delivery.Mode})
	}
	sel, err := c.selectEvents(ctx, events.MethodSubscribe, owner, p.Name, p.Arguments)
	if err != nil {
		return nil, err
	}
	u, err := callbackURL(p.Delivery.URL, c.ev().cfg.AllowPlainLoopback)
	if err != nil {
		return nil, err
	}
	if err := webhook.ValidSecret(p.Delivery.Secret); err != nil {
		return nil, InvalidParams("delivery.secret: " + err.Error())
	}
	from, err := parseCursor(p.Cursor)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	expires, err := c.grantTTL(p.TTLMs, now)
	if err != nil {
		return nil, err
	}
	fromTime, err := notBefore(p.MaxAgeMs, now)
	if err != nil {
		return nil, err
	}
	id := subscriptionID(owner, u, sel.name, sel.args)
	evs := c.eng.Events()
	head, err := c.eng.EventHead(ctx)
	if err != nil {
		return nil, c.EngineError(ctx, events.MethodSubscribe, owner, "", err)
	}
	old, err := evs.GetSubscription(ctx, owner, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, c.EngineError(ctx, events.MethodSubscribe, owner, "", err)
	}
	if old == nil {
		if err := c.verify(ctx, owner, u, id, p.Delivery.Secret); err != nil {
			return nil, err
		}
	}
	sub := &store.Subscription{ID: id, Owner: owner, Name: sel.name, Args: sel.args, Kind: sel.kind, TaskID: sel.taskID,
		Tool: sel.tool, URL: u, Secret: p.Delivery.Secret, Expires: expires, Created: now, Refreshed: now, Active: true,
		From: from, FromTime: fromTime}
	if old != nil && old.Secret != p.Delivery.Secret {
		sub.OldSecret, sub.OldUntil = old.Secret, now.Add(rotationGrace)
	} else if old != nil {
		sub.OldSecret, sub.OldUntil = old.OldSecret, old.OldUntil
	}
	_, truncated, err := evs.PutSubscription(ctx, sub, c.ev().cfg.MaxSubscriptions)
	if errors.Is(err, store.ErrTooManySubscriptions) {
		c.observeLimited("subscriptions")
		return nil, EventsError(events.CodeResourceExhausted, fmt.Sprintf("too many webhook subscriptions (at most %d per requester): unsubscribe some first", c.ev().cfg.MaxSubscriptions),
			map[string]any{"limit": "subscriptions", "max": c.ev().cfg.MaxSubscriptions})
	}
	if err != nil {
		return nil, c.EngineError(ctx, events.MethodSubscribe, owner, "", err)
	}
	res := &events.SubscribeResult{ID: id, RefreshBefore: rfc3339(expires), Truncated: truncated}
	switch {
	case p.Cursor != nil:
		// The client's own position stays safe: what follows it is
		// delivered (a replay, or the live subscription's queue).
		res.Cursor = p.Cursor
	case old == nil:
		// A new subscription from now: nothing before it is owed.
		res.Cursor = cursorOf(head)
	}
	if old != nil {
		ds := &events.DeliveryStatus{Active: old.Active, LastDeliveryAt: rfc3339(old.LastDelivery), FailedSince: rfc3339(old.FailedSince)}
		if old.LastError != "" {
			e := old.LastError
			ds.LastError = &e
		}
		res.DeliveryStatus = ds
	}
	return res, nil
}

// EventsUnsubscribe answers events/unsubscribe.
func (c *Core) EventsUnsubscribe(ctx context.Context, req mcp.Request, p *events.UnsubscribeParams) (*events.EmptyResult, error) {
	owner, err := c.webhookOwner(ctx, req)
	if err != nil {
		return nil, err
	}
	if p == nil || p.Name == "" {
		return nil, InvalidParams("events/unsubscribe needs the name of an event type")
	}
	sel, err := c.selectEvents(ctx, events.MethodUnsubscribe, owner, p.Name, p.Arguments)
	if err != nil {
		return nil, err
	}
	u, err := callbackURL(p.Delivery.URL, c.ev().cfg.AllowPlainLoopback)
	if err != nil {
		return nil, err
	}
	err = c.eng.Events().DeleteSubscription(ctx, owner, subscriptionID(owner, u, sel.name, sel.args))
	if errors.Is(err, store.ErrNotFound) {
		return nil, EventsError(events.CodeNotFound, "no such subscription", map[string]string{"kind": "subscription"})
	}
	if err != nil {
		return nil, c.EngineError(ctx, events.MethodUnsubscribe, owner, "", err)
	}
	return &events.EmptyResult{}, nil
}

// observeLimited tells the observer of a refusal by a limit.
func (c *Core) observeLimited(limit string) {
	if obs := c.eng.Observer(); obs != nil {
		obs.Limited(limit)
	}
}

// Notify sends one notification of an events/stream.
type Notify func(method string, params any) error

// EventsStream serves an events/stream for req until ctx ends, the
// subscribed task ends (after its last events), or send fails: it sends
// notifications/events/active first, then each event, and heartbeats
// with the cursor. A refusal before the stream opens is returned as the
// error; ended reports that the stream is over because its task ended
// (the caller then sends the final result): any other end (the client
// went, the server shuts down) is not.
func (c *Core) EventsStream(ctx context.Context, req mcp.Request, p *events.PollParams, send Notify) (ended bool, err error) {
	if p == nil || p.Name == "" {
		return false, InvalidParams("events/stream needs the name of an event type")
	}
	owner := c.Requester(ctx, req)
	sel, err := c.selectEvents(ctx, events.MethodStream, owner, p.Name, p.Arguments)
	if err != nil {
		return false, err
	}
	from, err := parseCursor(p.Cursor)
	if err != nil {
		return false, err
	}
	nb, err := notBefore(p.MaxAgeMs, time.Now())
	if err != nil {
		return false, err
	}
	release, err := c.acquireEventStream(owner)
	if err != nil {
		return false, err
	}
	defer release()

	// Wake-ups: any change of the selected task (or of any task).
	wake := make(chan struct{}, 1)
	stop := c.eng.Subscribe(func(id task.ID) {
		if sel.taskID == "" || id == sel.taskID {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	})
	defer stop()

	q := sel.query(owner)
	if from == nil {
		head, err := c.eng.EventHead(ctx)
		if err != nil {
			return false, c.EngineError(ctx, events.MethodStream, owner, "", err)
		}
		q.After = head
	} else {
		q.After, q.NotBefore = *from, nb
	}
	// The first read tells whether events were skipped.
	page, err := c.eng.ReadEvents(ctx, owner, q)
	if err != nil {
		return false, c.EngineError(ctx, events.MethodStream, owner, "", err)
	}
	active := q.After
	if page.Truncated && len(page.Events) == 0 {
		active = page.Next // the fresh position, past what was skipped
	}
	if err := send(events.NotifyActive, map[string]any{"cursor": active.String(), "truncated": page.Truncated}); err != nil {
		return false, nil
	}
	q.NotBefore = time.Time{}
	hb := time.NewTicker(c.ev().cfg.Heartbeat)
	defer hb.Stop()
	recheck := time.NewTicker(eventsRecheck)
	defer recheck.Stop()
	// read reads the next page; a failure is told on the stream, which
	// goes on (the log may be back at the next read).
	read := func() {
		p, err := c.eng.ReadEvents(ctx, owner, q)
		if err != nil {
			if ctx.Err() == nil {
				_ = send(events.NotifyError, map[string]any{"error": map[string]any{"code": -32603, "message": "the event log is unavailable for a moment; retrying"}})
			}
			p = &store.EventPage{Next: q.After}
		}
		page = p
	}
	var endMark *store.EventPos // set once the task is seen ended
	var endBy time.Time
	for {
		for _, e := range page.Events {
			occ := delivery.Occurrence(ctx, e, sel.name, owner, cursorOf(e.Pos), c.resultOf)
			if err := send(events.NotifyEvent, occ); err != nil {
				return false, nil
			}
		}
		q.After = page.Next
		more := page.More
		page = &store.EventPage{Next: q.After} // sent: never again
		if more {
			read()
			continue
		}
		if endMark != nil {
			// The task ended: its events are all committed, and read once
			// the log's position passed the mark (on PostgreSQL, once no
			// older transaction still runs), or after a while.
			if !q.After.Before(*endMark) || time.Now().After(endBy) {
				return true, nil
			}
			if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
				return false, nil
			}
			read()
			continue
		}
		if sel.taskID != "" {
			// A task-scoped stream ends with its task, after its last
			// events. Another failure to read the task is transient.
			t, err := c.eng.Get(ctx, owner, sel.taskID)
			if errors.Is(err, engine.ErrNotFound) || (err == nil && t.Status.Terminal()) {
				mark, herr := c.eng.EventHead(ctx)
				if herr != nil {
					mark = q.After
				}
				endMark, endBy = &mark, time.Now().Add(10*time.Second)
				read()
				continue
			}
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-hb.C:
			if err := send(events.NotifyHeartbeat, map[string]any{"cursor": q.After.String()}); err != nil {
				return false, nil
			}
			continue
		case <-wake:
		case <-recheck.C:
		}
		read()
	}
}

// sleepCtx waits d, or until ctx ends (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// acquireEventStream takes one of owner's event streams, or refuses.
func (c *Core) acquireEventStream(owner task.Owner) (func(), error) {
	st := c.ev()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.streams[owner] >= st.cfg.MaxStreams {
		c.observeLimited("event_streams")
		return nil, EventsError(events.CodeResourceExhausted, fmt.Sprintf("too many open event streams (at most %d per requester)", st.cfg.MaxStreams),
			map[string]any{"limit": "streams", "max": st.cfg.MaxStreams})
	}
	st.streams[owner]++
	return func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.streams[owner]--; st.streams[owner] <= 0 {
			delete(st.streams, owner)
		}
	}, nil
}

// DeclaresEvents reports whether a client's capabilities (the 2026
// per-request ones, or the 2025 initialize ones) declare the Events
// extension.
func DeclaresEvents(caps map[string]any) bool {
	if caps == nil {
		return false
	}
	if _, ok := caps["events"]; ok {
		return true
	}
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[events.ExtensionID]
	return ok
}

// PrepareEventSource, when the client's capabilities caps declare the
// Events extension, reads the event log's position before a task is
// created, and returns what gives the created task's eventSource (the
// draft Task Event Sources): its output events, from that position (or
// from the start, for a task an idempotent retry found created before).
// It returns nil when the client did not declare Events: never an
// eventSource then.
func (c *Core) PrepareEventSource(ctx context.Context, caps map[string]any) func(*task.Task) *events.TaskEventSource {
	if !DeclaresEvents(caps) {
		return nil
	}
	at := time.Now().Truncate(time.Millisecond)
	head, err := c.eng.EventHead(ctx)
	if err != nil {
		return nil
	}
	return func(t *task.Task) *events.TaskEventSource {
		name := events.TypeOutput
		if fn := c.ev().cfg.OutputSchemas; fn != nil {
			if _, ok := fn()[t.Tool]; ok {
				name = events.ToolOutputType(t.Tool)
			}
		}
		from := head
		if t.CreatedAt.Before(at) {
			from = store.EventPos{}
		}
		return &events.TaskEventSource{Name: name, Input: events.TaskArgs{TaskID: string(t.ID)}, InitialCursor: from.String()}
	}
}

// WithEventsCapability returns dr with capabilities.events added to its
// JSON (the key the go-sdk's capabilities have no field for).
func WithEventsCapability(dr *mcp.DiscoverResult) (mcp.Result, error) {
	b, err := json.Marshal(dr)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	caps, _ := m["capabilities"].(map[string]any)
	if caps == nil {
		caps = map[string]any{}
	}
	caps["events"] = map[string]any{"listChanged": false}
	m["capabilities"] = caps
	if _, ok := m["resultType"]; !ok {
		// What the go-sdk adds to its own DiscoverResult on this wire.
		m["resultType"] = "complete"
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &v1.RawResult{JSON: out}, nil
}
