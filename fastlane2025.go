package mcptask

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/internal/adapter/wire2025"
	"github.com/mcptask/mcptask/internal/tracing"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The 2025-11-25 part of the fast lane: tasks/get, and tasks/result of a
// task already finished, on a session of the stateful go-sdk handler.
//
// A 2025-11-25 request names its session (Mcp-Session-Id), which the
// go-sdk keeps in a table of its own: it answers 404 for an unknown or
// closed session, 403 when the request's user is not the session's, and
// closes a session left without a POST for StreamableHTTPOptions.SessionTimeout.
// The lane keeps its own record of the sessions, from the go-sdk's
// public edges only, and answers only the requests of a session it knows
// the go-sdk would serve:
//
//   - A session enters the record when mcptask's receiving middleware sees
//     one of its messages after its initialize: the middleware has the
//     *mcp.ServerSession (which the wire's handler needs, as on the slow
//     path) and the user of the request's token, which passed the go-sdk's
//     own check of the session's user. The middleware knows the record of
//     the Handler that created the session from the initialize POST's
//     context, which the go-sdk keeps for the session's handlers; a session
//     of another handler is never answered.
//   - It leaves the record when the session closes (ServerSession.Wait
//     returns), and before the go-sdk sees a DELETE of it (a DELETE the
//     go-sdk refuses only sends the session's next request to the go-sdk,
//     which records it again).
//   - The go-sdk's idle timer restarts at the end of each POST it serves
//     past its checks of the session. The middleware sees a message only of
//     such a POST, and notes when (a POST the go-sdk refused, e.g. of
//     another user or with a bad header, restarts nothing and is not
//     counted). The lane answers a session only within half the timeout of
//     that; past it, the request goes to the go-sdk, which restarts the
//     timer (or answers 404 if the session is gone). A session polled by
//     tasks/get alone thus stays open.
//   - Only a request whose token has the user recorded is answered.
//   - The IDs of the calls in flight on each session are counted, on both
//     lanes, from before the go-sdk sees them until their answer, whether
//     the session is recorded yet or not. A call whose ID is in flight on
//     the lane is refused as the go-sdk refuses a duplicate; one whose ID
//     is in flight on the slow lane goes to the go-sdk, which refuses it.
//     What the lane cannot reproduce: a call sent to the go-sdk while a
//     call with its ID is on the lane (for the lane's few hundred
//     microseconds) is served by the go-sdk, which does not see the lane's,
//     where the go-sdk alone would refuse the second; and an ID the go-sdk
//     still holds after its POST ended (the client hung up before the
//     answer) is answered on the lane. Both need a client that reuses the
//     ID of a call still in flight, which JSON-RPC forbids.
//
// tasks/result waits for a task to finish and carries the task's status
// notifications meanwhile (Wire.ServeResultStream): the lane answers it
// only when the task has finished already (it reads the task first, with
// the requester's rights, once the request rate allowed the request), and
// leaves the others to the go-sdk, giving the rate's charge back first:
// the go-sdk's path charges it.

// laneSessionsKey is the context key under which Handler's router puts its
// session record on the requests that may create a session (see
// laneSessions.register).
type laneSessionsKey struct{}

// laneSessions is the fast lane's record of the 2025-11-25 sessions of
// one Handler.
type laneSessions struct {
	// timeout is the go-sdk handler's SessionTimeout (0: none).
	timeout time.Duration
	m       sync.Map // session ID → *laneSession
	// watched holds the sessions (*mcp.ServerSession) a goroutine waits
	// on, to remove them from m when they close.
	watched sync.Map

	callsMu sync.Mutex
	// calls counts the calls in flight by session ID, then by ID.
	calls map[string]map[string]*inFlight
}

// inFlight counts the calls with one ID in flight on one session.
type inFlight struct{ slow, fast int }

// laneSession is what the lane knows of one session.
type laneSession struct {
	ss     *mcp.ServerSession
	userID string // of the token that may use it on the lane

	mu sync.Mutex
	// seen is when the middleware last saw a message of the session: a
	// POST the go-sdk served, which restarts its idle timer.
	seen time.Time
}

// register records ss, seen by the middleware on a request req of the
// session after its initialize, if it has an ID; it notes the time of a
// session recorded already.
func (ls *laneSessions) register(req mcp.Request) {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return
	}
	id := ss.ID()
	if id == "" || ss.InitializeParams() == nil {
		return
	}
	now := time.Now()
	if rec := ls.session(id); rec != nil && rec.ss == ss {
		rec.mu.Lock()
		rec.seen = now
		rec.mu.Unlock()
		return
	}
	var user string
	if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
		user = extra.TokenInfo.UserID
	}
	ls.m.Store(id, &laneSession{ss: ss, userID: user, seen: now})
	if _, waiting := ls.watched.LoadOrStore(ss, struct{}{}); waiting {
		return
	}
	go func() {
		_ = ss.Wait()
		if v, ok := ls.m.Load(id); ok && v.(*laneSession).ss == ss {
			ls.m.CompareAndDelete(id, v)
		}
		ls.watched.Delete(ss)
	}()
}

// session returns the record of the session id, nil if none.
func (ls *laneSessions) session(id string) *laneSession {
	if v, ok := ls.m.Load(id); ok {
		return v.(*laneSession)
	}
	return nil
}

// forget removes the session id from the record (before a DELETE).
func (ls *laneSessions) forget(id string) { ls.m.Delete(id) }

// slowPOST counts the calls of body, a POST of the session sid on its way
// to the go-sdk, as in flight; the returned function ends them.
func (ls *laneSessions) slowPOST(sid string, body []byte) (end func()) {
	ids := callIDs(body)
	if len(ids) == 0 {
		return func() {}
	}
	ls.count(sid, ids, false, 1)
	return func() { ls.count(sid, ids, false, -1) }
}

// count adds n to the calls ids of the session sid on a lane (fast or
// not).
func (ls *laneSessions) count(sid string, ids []string, fast bool, n int) {
	ls.callsMu.Lock()
	defer ls.callsMu.Unlock()
	if ls.calls == nil {
		ls.calls = map[string]map[string]*inFlight{}
	}
	m := ls.calls[sid]
	if m == nil {
		m = map[string]*inFlight{}
		ls.calls[sid] = m
	}
	for _, id := range ids {
		c := m[id]
		if c == nil {
			c = &inFlight{}
			m[id] = c
		}
		if fast {
			c.fast += n
		} else {
			c.slow += n
		}
		if c.fast <= 0 && c.slow <= 0 {
			delete(m, id)
		}
	}
	if len(m) == 0 {
		delete(ls.calls, sid)
	}
}

// beginFast counts the call id of the session sid in flight on the lane,
// unless a call with that ID is in flight already: then it returns which
// lane has it.
func (ls *laneSessions) beginFast(sid, id string) (busy, onLane bool) {
	ls.callsMu.Lock()
	c := ls.calls[sid][id]
	ls.callsMu.Unlock()
	if c != nil {
		return true, c.fast > 0
	}
	ls.count(sid, []string{id}, true, 1)
	return false, false
}

// idKey is the key of a call's ID in laneSessions.calls: equal IDs, as
// the go-sdk compares them, have equal keys.
func idKey(id jsonrpc.ID) string { return fmt.Sprintf("%T:%v", id.Raw(), id.Raw()) }

// callIDs returns the keys of the IDs of the calls in body (one message
// or a batch); messages that do not decode are left out (the go-sdk
// refuses the body then).
func callIDs(body []byte) []string {
	body = bytes.TrimLeft(body, " \t\r\n")
	var msgs []json.RawMessage
	if len(body) > 0 && body[0] == '[' {
		if sdkUnmarshal(body, &msgs) != nil {
			return nil
		}
	} else {
		msgs = []json.RawMessage{body}
	}
	var ids []string
	for _, m := range msgs {
		var msg struct {
			ID     any             `json:"id,omitempty"`
			Method json.RawMessage `json:"method"`
		}
		if sdkUnmarshal(m, &msg) != nil || len(msg.Method) == 0 || msg.ID == nil {
			continue
		}
		if id, err := jsonrpc.MakeID(msg.ID); err == nil && id.IsValid() {
			ids = append(ids, idKey(id))
		}
	}
	return ids
}

// lane25Methods are the 2025-11-25 methods of the fast lane, with the
// decoding of their params as the go-sdk decodes them (see addMethods).
var lane25Methods = map[string]laneDecoder{
	wire.MethodTasksGet:    laneParams[ext2026.GetTaskParams],
	wire.MethodTasksResult: laneParams[v1.TaskIDParams],
}

// serve25 answers r, a POST of the 2025-11-25 session sid whose body has
// been read, if it is a fast-lane request, and reports whether it did.
func (f *fastLane) serve25(w http.ResponseWriter, r *http.Request, sid string, body []byte) bool {
	if f.sessions == nil {
		return false
	}
	f.probeOnce.Do(f.doProbe)
	if !f.on25 {
		return false
	}
	rec := f.sessions.session(sid)
	h := r.Header
	if rec == nil || h.Get("Mcp-Protocol-Version") != v1.Version ||
		len(h.Values("Last-Event-ID")) > 0 ||
		baseMediaType(h.Get("Content-Type")) != "application/json" ||
		!acceptsBoth(h.Values("Accept")) ||
		int64(len(body)) > f.maxBody || !bytes.Contains(body, []byte(`"tasks/`)) {
		return false
	}
	if !f.rebindingOK(r) {
		return false
	}
	var user string
	ti := auth.TokenInfoFromContext(r.Context())
	if ti != nil {
		user = ti.UserID
	}
	if user != rec.userID {
		return false
	}
	if !plainObject(body) {
		return false
	}
	jreq, ok := decodeRequest(body)
	if !ok || lane25Methods[jreq.Method] == nil || !jreq.IsCall() || len(jreq.Params) == 0 {
		return false
	}
	extra := &mcp.RequestExtra{TokenInfo: ti, Header: r.Header}
	p, req, ok := lane25Methods[jreq.Method](jreq.Params, extra, rec.ss)
	if !ok {
		return false
	}
	if _, versioned := p.GetMeta()[mcp.MetaKeyProtocolVersion]; versioned {
		// The go-sdk checks a per-request protocol version itself.
		return false
	}
	s := f.s
	rec.mu.Lock()
	stale := f.sessions.timeout > 0 && time.Since(rec.seen) >= f.sessions.timeout/2
	rec.mu.Unlock()
	if stale {
		// The go-sdk's idle timer is to be restarted: this one goes there.
		return false
	}
	key := idKey(jreq.ID)
	if busy, onLane := f.sessions.beginFast(sid, key); busy {
		if !onLane {
			// In flight on the slow lane: the go-sdk refuses it.
			return false
		}
		f.duplicate(w, jreq.ID)
		return true
	}
	defer f.sessions.count(sid, []string{key}, true, -1)
	ctx := r.Context()
	method := jreq.Method
	var take func(context.Context) bool
	if method == wire.MethodTasksResult {
		// A tasks/result of a task still running waits for it, with the
		// task's notifications on its stream: the go-sdk and
		// ServeResultStream serve it.
		take = func(ctx context.Context) bool { return s.finished(ctx, req, p) }
	}
	hd := s.w25.Table()[method]
	res, err, served := s.limitedTasksRequestIf(ctx, method, req, take, func(ctx context.Context) (mcp.Result, error) {
		return s.runTasksHandler(ctx, hd, &adapter.Request{Method: method, Req: req, Params: p, Session: rec.ss}, p)
	})
	if !served {
		return false
	}
	f.writeAnswer(w, jreq.ID, res, err, false)
	s.fastServed.Add(1)
	return true
}

// finished reports whether the task a tasks/result names has finished,
// for its requester; a task it cannot see, or an invalid ID, counts as
// finished (the answer, an error, does not wait).
func (s *Server) finished(ctx context.Context, req mcp.Request, p mcp.Params) bool {
	tp, ok := p.(*v1.TaskIDParams)
	if !ok {
		return false
	}
	id, err := task.ParseID(tp.TaskID)
	if err != nil {
		return true
	}
	if s.traceStore {
		// Its store span joins the request's trace, as the handler's.
		ctx = tracing.FromMeta(ctx, p.GetMeta())
	}
	// Read as the handler reads it (from the view cache, if any, the
	// second time).
	v, err := s.eng.View(ctx, s.core.Requester(ctx, req), id, wire2025.ResultView)
	return err != nil || v.Task.Status.Terminal()
}

// duplicate answers a call whose ID is in flight on the lane as the
// go-sdk answers a duplicate ID.
func (f *fastLane) duplicate(w http.ResponseWriter, id jsonrpc.ID) {
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
		Code:    jsonrpc.CodeInvalidRequest,
		Message: fmt.Sprintf("duplicate in-flight request ID %v", id.Raw()),
	}})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// The go-sdk sets the headers of the answer's stream before it finds
	// the duplicate.
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-cache, no-transform")
	if !f.jsonResponse {
		hdr.Set("Connection", "keep-alive")
	}
	hdr.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(data)
}
