package wire2025

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/mcptask/mcptask/internal/push"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/events"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Serve serves one client of srv on t (e.g. &mcp.StdioTransport{}) until
// the client disconnects or ctx is done. The connection carries the
// `task` parameter of tools/call across the go-sdk (which drops params
// fields it does not know) and receives a notifications/tasks/status at
// each status change of the tasks created on it.
func (w *Wire) Serve(ctx context.Context, srv *mcp.Server, t mcp.Transport) error {
	tt := &transport{Transport: t}
	ss, err := srv.Connect(ctx, tt, nil)
	if err != nil {
		return err
	}
	c := tt.conn
	w.conns.Store(ss, c)
	defer func() {
		w.conns.Delete(ss)
		c.stop()
	}()
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case <-ctx.Done():
		ss.Close()
		<-done
		return ctx.Err()
	case err := <-done:
		return err
	}
}

// transport wraps a go-sdk transport with [conn].
type transport struct {
	mcp.Transport
	conn *conn
}

func (t *transport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.conn = newConn(c)
	return t.conn, nil
}

// conn lifts the task parameter of incoming tools/call requests and
// interleaves task status notifications with the go-sdk's own writes. Its
// notifier goroutine lives as long as the connection: it stops when the
// connection is closed (by either side) or its reading fails.
type conn struct {
	mcp.Connection
	wmu     sync.Mutex // serialises writes: the go-sdk's and the notifier's
	out     chan *jsonrpc.Request
	done    chan struct{}
	stopped sync.Once
}

func newConn(c mcp.Connection) *conn {
	tc := &conn{Connection: c, out: make(chan *jsonrpc.Request, 64), done: make(chan struct{})}
	go tc.notifier()
	return tc
}

func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		c.stop() // the connection is over: nothing more can be written
		return msg, err
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == wire.MethodToolsCall {
		if params, lifted := v1.LiftTaskParams(req.Params); lifted {
			req.Params = params
		}
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == events.MethodStream && req.ID.IsValid() {
		// The stream's notifications name its request: the ID rides in
		// a private _meta key, which the go-sdk's handler cannot see
		// otherwise.
		req.Params = withStreamID(req.Params, req.ID.Raw())
	}
	return msg, nil
}

// withStreamID returns params with _meta[MetaStreamID] set to id.
func withStreamID(params json.RawMessage, id any) json.RawMessage {
	m := map[string]any{}
	if len(params) > 0 && json.Unmarshal(params, &m) != nil {
		return params
	}
	meta, _ := m["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[MetaStreamID] = id
	m["_meta"] = meta
	out, err := json.Marshal(m)
	if err != nil {
		return params
	}
	return out
}

// MetaStreamID is the private _meta key that carries an events/stream
// request's JSON-RPC ID to its handler on a stdio connection.
const MetaStreamID = "io.mcptask/streamRequestId"

// EventNotifier returns the function that writes a notification on the
// stdio connection of ss (Serve's), waiting for its turn, or nil when ss
// has none.
func (w *Wire) EventNotifier(ss *mcp.ServerSession) func(ctx context.Context, method string, params any) error {
	v, ok := w.conns.Load(ss)
	if !ok {
		return nil
	}
	c := v.(*conn)
	return func(ctx context.Context, method string, params any) error {
		raw, err := json.Marshal(params)
		if err != nil {
			return err
		}
		select {
		case <-c.done:
			return errors.New("the connection is closed")
		default:
		}
		return c.Write(ctx, &jsonrpc.Request{Method: method, Params: raw})
	}
}

func (c *conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.Connection.Write(ctx, msg)
}

// Close stops the notifier and closes the connection.
func (c *conn) Close() error {
	c.stop()
	return c.Connection.Close()
}

// send queues a notification; it never blocks. Status notifications are
// advisory (clients must keep polling), so one that finds the queue full,
// or the connection closed, is dropped.
func (c *conn) send(n *jsonrpc.Request) {
	select {
	case <-c.done:
	case c.out <- n:
	default:
	}
}

func (c *conn) notifier() {
	for {
		select {
		case <-c.done:
			return
		case n := <-c.out:
			_ = c.Write(context.Background(), n)
		}
	}
}

func (c *conn) stop() { c.stopped.Do(func() { close(c.done) }) }

// sessionPush is what a session follows: its tasks, until the session
// ends, and the input requests asked on it (ask.go).
type sessionPush struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	followed map[task.ID]task.Owner
	asks     map[task.ID]map[string]*askState // by input request key
	results  map[task.ID]int                  // tasks/result requests waiting
	refusals map[task.ID]int                  // answers refused, for the pause before asking again
	unseen   map[task.ID]*unseen              // followed tasks the client may not know yet (ask.go)
}

// add reports whether id was not followed yet, and follows it for owner.
func (p *sessionPush) add(id task.ID, owner task.Owner) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.followed[id]; ok {
		return false
	}
	p.followed[id] = owner
	return true
}

// unseen is the follow of a task the client may not know yet (ask.go):
// its status changes are held, in order, until reveal sends them.
type unseen struct {
	timer    *time.Timer
	revealed chan struct{} // closed by reveal
	mu       sync.Mutex
	shown    bool         // revealed: changes go out as they come
	held     []*task.Task // changes not sent yet, oldest first (at most maxHeld)
	// reveal sends what is held that is newer than known (the state the
	// client has; nil: the creation's), then asks the task's questions.
	reveal func(known *task.Task)
}

// maxHeld bounds the status changes held for a task not known yet; the
// oldest go first.
const maxHeld = 64

// wait marks id unseen by u, revealed when it is seen, or after
// askGrace.
func (p *sessionPush) wait(id task.ID, u *unseen) {
	p.mu.Lock()
	defer p.mu.Unlock()
	u.timer = time.AfterFunc(askGrace, func() {
		if p.see(id) != nil {
			u.reveal(nil)
		}
	})
	p.unseen[id] = u
}

// see marks id known to the client and returns its unseen follow, nil if
// it was not waiting.
func (p *sessionPush) see(id task.ID) *unseen {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := p.unseen[id]
	if u != nil {
		u.timer.Stop()
		delete(p.unseen, id)
	}
	return u
}

// remove ends the follow of id, and the asks of its input requests.
func (p *sessionPush) remove(id task.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.asks[id] {
		if a.cancel != nil {
			a.cancel()
		}
	}
	if u := p.unseen[id]; u != nil {
		u.timer.Stop()
	}
	delete(p.followed, id)
	delete(p.asks, id)
	delete(p.refusals, id)
	delete(p.unseen, id)
}

// session returns the follows of ss, set up at its first use and ended
// when ss ends or the wire is closed.
func (w *Wire) session(ss *mcp.ServerSession) *sessionPush {
	if p, ok := w.sessions.Load(ss); ok {
		return p.(*sessionPush)
	}
	ctx, cancel := context.WithCancel(w.base)
	p := &sessionPush{ctx: ctx, cancel: cancel, followed: map[task.ID]task.Owner{},
		asks: map[task.ID]map[string]*askState{}, results: map[task.ID]int{}, refusals: map[task.ID]int{},
		unseen: map[task.ID]*unseen{}}
	if old, loaded := w.sessions.LoadOrStore(ss, p); loaded {
		cancel()
		return old.(*sessionPush)
	}
	go func() {
		done := make(chan struct{})
		go func() { _ = ss.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
		}
		cancel()
		w.sessions.Delete(ss)
	}()
	return p
}

// follow sends notifications/tasks/status for t to the session of req
// until t is terminal or the session ends: on the connection of
// [Wire.Serve] (stdio), or on the open standalone GET streams of a
// Streamable HTTP session ([Wire.ServeStream]). since is the state the
// client already has (the CreateTaskResult's), nil for none. known tells
// whether the client has shown it knows the task (a request naming it),
// false for its creation: see ask.go.
func (w *Wire) follow(req mcp.Request, owner task.Owner, t *task.Task, since *task.Task, known bool) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if ss == nil || t.Status.Terminal() {
		return
	}
	id := t.ID
	var send func(*jsonrpc.Request)
	if c, ok := w.conns.Load(ss); ok {
		send = c.(*conn).send
	} else if sid := ss.ID(); sid != "" {
		send = func(n *jsonrpc.Request) {
			// Looked up, not created: a session with no stream open
			// keeps no entry.
			if set, ok := w.streams.Load(sid); ok {
				set.(*streamSet).event(id, n)
			}
		}
	} else {
		return
	}
	p := w.session(ss)
	if !p.add(id, owner) {
		// Followed already; if it waited for the client to know the
		// task, the client has the state t now.
		if known {
			if u := p.see(id); u != nil {
				u.reveal(t)
			}
		}
		return
	}
	notify := func(t *task.Task) {
		if n, err := statusNotification(t); err == nil {
			send(n)
		}
	}
	var u *unseen
	if !known {
		// Nothing goes on the session's channel about a task the client
		// may not know yet: a client that cannot tie a status
		// notification or a request to a task drops the one and answers
		// the other for the user (ask.go). Its changes are held, and sent
		// once it is known (those newer than what the client has), then
		// its questions asked.
		u = &unseen{revealed: make(chan struct{})}
		u.reveal = func(known *task.Task) {
			u.mu.Lock()
			last := since
			if known != nil {
				last = known
			}
			for _, h := range u.held {
				if known == nil || h.LastUpdatedAt.After(known.LastUpdatedAt) {
					notify(h)
					last = h
				}
			}
			u.held, u.shown = nil, true
			u.mu.Unlock()
			close(u.revealed)
			if last != nil && last.Status == task.InputRequired {
				w.askOnSession(ss, id)
			}
		}
		p.wait(id, u)
	} else if since != nil && since.Status == task.InputRequired {
		// The client may not call tasks/result to see the question (ask.go).
		w.askOnSession(ss, id)
	}
	go func() {
		defer p.remove(id)
		if u != nil {
			// A task that ended before the client knew it: its changes
			// still go out once it is known.
			defer func() {
				select {
				case <-u.revealed:
				case <-p.ctx.Done():
				}
			}()
		}
		_ = push.Follow(p.ctx, w.c.Engine(), owner, id, w.push, since, func(t *task.Task) error {
			if u != nil {
				u.mu.Lock()
				if !u.shown {
					if len(u.held) == maxHeld {
						u.held = u.held[1:]
					}
					u.held = append(u.held, t)
					u.mu.Unlock()
					return nil
				}
				u.mu.Unlock()
			}
			notify(t)
			if t.Status == task.InputRequired {
				w.askOnSession(ss, id)
			} else {
				p.cancelAsks(id)
			}
			return nil // advisory: a client without a stream polls
		})
	}()
}

// statusNotification is the notifications/tasks/status of t. It carries
// no related-task _meta: "the notifications/tasks/status notification
// SHOULD NOT include the io.modelcontextprotocol/related-task metadata,
// as the task ID is already present in the notification parameters"
// (2025-11-25, Task Notifications).
func statusNotification(t *task.Task) (*jsonrpc.Request, error) {
	b, err := json.Marshal(v1.FromTask(t))
	if err != nil {
		return nil, err
	}
	return &jsonrpc.Request{Method: wire.MethodTaskStatus, Params: b}, nil
}

// streamSet holds the open streams of one Streamable HTTP session that
// carry its status notifications: standalone GET streams, and the streams
// of its pending tasks/result requests.
type streamSet struct {
	mu   sync.Mutex
	open []stream
	gone bool // emptied and removed from Wire.streams: not to be used again
}

type stream struct {
	sp     *push.Splice
	task   task.ID       // the task of a tasks/result stream; "" for a GET stream
	closed chan struct{} // closed when the stream ends
}

func (w *Wire) streamsOf(sessionID string) *streamSet {
	s, _ := w.streams.LoadOrStore(sessionID, &streamSet{})
	return s.(*streamSet)
}

// event writes n, a notification of task id, on the streams of the
// tasks/result requests for that task if any are open (where the
// notification relates to a request of the client's), else on every open
// GET stream; with none open it is dropped (the client polls).
func (s *streamSet) event(id task.ID, n *jsonrpc.Request) {
	data, err := jsonrpc.EncodeMessage(n)
	if err != nil {
		return
	}
	s.mu.Lock()
	var to []*push.Splice
	for _, o := range s.open {
		if o.task == id && o.sp.Streaming() {
			to = append(to, o.sp)
		}
	}
	if len(to) == 0 {
		for _, o := range s.open {
			if o.task == "" {
				to = append(to, o.sp)
			}
		}
	}
	s.mu.Unlock()
	for _, sp := range to {
		_ = sp.Event(data)
	}
}

// beginResultStreams lets the status notifications of task id go on the
// open tasks/result streams of the session ss for it. It runs in the
// tasks/result handler: the go-sdk has set the stream's headers by then.
func (w *Wire) beginResultStreams(ss *mcp.ServerSession, id task.ID) {
	if ss == nil || ss.ID() == "" {
		return
	}
	v, ok := w.streams.Load(ss.ID())
	if !ok {
		return
	}
	set := v.(*streamSet)
	set.mu.Lock()
	defer set.mu.Unlock()
	for _, o := range set.open {
		if o.task == id {
			o.sp.Begin()
		}
	}
}

// ServeStream serves a standalone GET stream of a 2025-11-25 Streamable
// HTTP session with sdk (the go-sdk's stateful handler, which checks the
// session and its user) and writes the session's task status
// notifications into it, between the go-sdk's own events: the go-sdk
// cannot send a method it does not know.
func (w *Wire) ServeStream(rw http.ResponseWriter, r *http.Request, sdk http.Handler) {
	w.serveWith(rw, r, sdk, "")
}

// resultStreamClosed returns the channel closed when the stream of the
// newest tasks/result of task id served on session ss ends (its
// connection cut, or the request answered), nil when there is none (a
// stdio session, a request not served through ServeResultStream).
func (w *Wire) resultStreamClosed(ss *mcp.ServerSession, id task.ID) <-chan struct{} {
	if ss == nil || ss.ID() == "" {
		return nil
	}
	v, ok := w.streams.Load(ss.ID())
	if !ok {
		return nil
	}
	set := v.(*streamSet)
	set.mu.Lock()
	defer set.mu.Unlock()
	for i := len(set.open) - 1; i >= 0; i-- {
		if set.open[i].task == id {
			return set.open[i].closed
		}
	}
	return nil
}

// ServeResultStream serves a session's tasks/result POST for the task id
// with sdk, and writes the task's status notifications into its response
// stream while the request waits.
func (w *Wire) ServeResultStream(rw http.ResponseWriter, r *http.Request, sdk http.Handler, id task.ID) {
	w.serveWith(rw, r, sdk, id)
}

func (w *Wire) serveWith(rw http.ResponseWriter, r *http.Request, sdk http.Handler, id task.ID) {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		sdk.ServeHTTP(rw, r)
		return
	}
	sp := push.NewSplice(rw)
	closed := make(chan struct{})
	var set *streamSet
	for {
		set = w.streamsOf(sid)
		set.mu.Lock()
		if !set.gone { // else removed meanwhile: take the new one
			set.open = append(set.open, stream{sp: sp, task: id, closed: closed})
			set.mu.Unlock()
			break
		}
		set.mu.Unlock()
	}
	defer func() {
		close(closed)
		sp.Close()
		set.mu.Lock()
		defer set.mu.Unlock()
		set.open = slices.DeleteFunc(set.open, func(o stream) bool { return o.sp == sp })
		if len(set.open) == 0 {
			set.gone = true
			w.streams.CompareAndDelete(sid, set)
		}
	}()
	if id != "" {
		// A POST's stream is not held open by the server at shutdown:
		// the request ends as it would.
		sdk.ServeHTTP(sp, r)
		return
	}
	// Shutdown ends a GET stream (Close): an HTTP server's Shutdown
	// waits for it otherwise.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(w.base, cancel)
	defer stop()
	go func() {
		// Once the go-sdk serves the stream (its status written while it
		// takes the stream), the session's pending input requests may go
		// on it: asked again after a reconnection (ask.go).
		select {
		case <-sp.Started():
			if sp.Streaming() {
				w.askOnStream(sid)
			}
		case <-closed:
		}
	}()
	sdk.ServeHTTP(sp, r.WithContext(ctx))
}

// Close stops following tasks for every session and ends the standalone
// streams served by ServeStream.
func (w *Wire) Close() { w.stop() }
