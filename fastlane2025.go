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
//     returns), and before the go-sdk sees a DELETE of it.
//   - The go-sdk's idle timer restarts at the end of each POST it serves.
//     The lane answers a session only within half the timeout of the last
//     POST that went to the go-sdk; past that, the request goes to the
//     go-sdk, which restarts the timer (or answers 404 if the session is
//     gone). A session polled by tasks/get alone thus stays open.
//   - Only a request whose token has the user recorded is answered.
//   - A call whose ID is in flight on the lane is refused as the go-sdk
//     refuses a duplicate; one whose ID is in flight on the slow lane goes
//     to the go-sdk, which refuses it. (The lane cannot see an ID the go-sdk
//     still holds after its POST ended, e.g. when the client hung up before
//     the answer: a client that reuses such an ID is answered.)
//
// tasks/result waits for a task to finish and carries the task's status
// notifications meanwhile (Wire.ServeResultStream): the lane answers it
// only when the task has finished already, and leaves the others to the
// go-sdk.

// laneSessionsKey is the context key under which Handler's router puts its
// session record on the requests that may create a session (see
// registerSession).
type laneSessionsKey struct{}

// laneSessions is the fast lane's record of the 2025-11-25 sessions of
// one Handler.
type laneSessions struct {
	// timeout is the go-sdk handler's SessionTimeout (0: none).
	timeout time.Duration
	m       sync.Map // session ID → *laneSession
}

// laneSession is what the lane knows of one session.
type laneSession struct {
	ss     *mcp.ServerSession
	userID string // of the token that may use it on the lane

	mu sync.Mutex
	// lastSDK is when a POST of the session last reached or left the go-sdk.
	lastSDK time.Time
	// calls counts the IDs of calls in flight, by lane (true: fast).
	calls map[string]map[bool]int
}

// register records ss, seen by the middleware on a request req of the
// session after its initialize, if it has an ID and is not recorded yet.
func (ls *laneSessions) register(req mcp.Request) {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return
	}
	id := ss.ID()
	if id == "" || ss.InitializeParams() == nil {
		return
	}
	if _, known := ls.m.Load(id); known {
		return
	}
	var user string
	if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
		user = extra.TokenInfo.UserID
	}
	rec := &laneSession{ss: ss, userID: user, lastSDK: time.Now(), calls: map[string]map[bool]int{}}
	if _, loaded := ls.m.LoadOrStore(id, rec); loaded {
		return
	}
	go func() {
		_ = ss.Wait()
		ls.m.CompareAndDelete(id, rec)
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

// slowPOST notes a POST of the session sid, with body, on its way to the
// go-sdk; the returned function notes its end.
func (ls *laneSessions) slowPOST(sid string, body []byte) (end func()) {
	rec := ls.session(sid)
	if rec == nil {
		return func() {}
	}
	ids := callIDs(body)
	rec.mu.Lock()
	rec.lastSDK = time.Now()
	rec.begin(ids, false)
	rec.mu.Unlock()
	return func() {
		rec.mu.Lock()
		rec.lastSDK = time.Now()
		rec.end(ids, false)
		rec.mu.Unlock()
	}
}

// begin and end count the calls ids in flight on the lane fast; rec.mu
// is held.
func (rec *laneSession) begin(ids []string, fast bool) {
	for _, id := range ids {
		m := rec.calls[id]
		if m == nil {
			m = map[bool]int{}
			rec.calls[id] = m
		}
		m[fast]++
	}
}

func (rec *laneSession) end(ids []string, fast bool) {
	for _, id := range ids {
		m := rec.calls[id]
		if m[fast]--; m[fast] <= 0 {
			delete(m, fast)
		}
		if len(m) == 0 {
			delete(rec.calls, id)
		}
	}
}

// idKey is the key of a call's ID in laneSession.calls: equal IDs, as the
// go-sdk compares them, have equal keys.
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
var lane25Methods = map[string]func(raw json.RawMessage, extra *mcp.RequestExtra) (p mcp.Params, req mcp.Request, ok bool){
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
	if i := bytes.IndexFunc(body, func(r rune) bool { return !bytes.ContainsRune([]byte(" \t\r\n"), r) }); i < 0 || body[i] != '{' ||
		bytes.Count(body, []byte("{"))+bytes.Count(body, []byte("[")) > 1000 {
		return false
	}
	jreq, ok := decodeRequest(body)
	if !ok || lane25Methods[jreq.Method] == nil || !jreq.IsCall() || len(jreq.Params) == 0 {
		return false
	}
	extra := &mcp.RequestExtra{TokenInfo: ti, Header: r.Header}
	p, _, ok := lane25Methods[jreq.Method](jreq.Params, extra)
	if !ok {
		return false
	}
	if _, versioned := p.GetMeta()[mcp.MetaKeyProtocolVersion]; versioned {
		// The go-sdk checks a per-request protocol version itself.
		return false
	}
	req := laneRequest25(rec.ss, p, extra)
	key := idKey(jreq.ID)
	rec.mu.Lock()
	if f.sessions.timeout > 0 && time.Since(rec.lastSDK) >= f.sessions.timeout/2 {
		// The go-sdk's idle timer is to be restarted: this one goes there.
		rec.mu.Unlock()
		return false
	}
	if n := rec.calls[key]; n[false] > 0 {
		// In flight on the slow lane: the go-sdk refuses it.
		rec.mu.Unlock()
		return false
	} else if n[true] > 0 {
		rec.mu.Unlock()
		f.duplicate(w, jreq.ID)
		return true
	}
	rec.begin([]string{key}, true)
	rec.mu.Unlock()
	defer func() {
		rec.mu.Lock()
		rec.end([]string{key}, true)
		rec.mu.Unlock()
	}()
	s := f.s
	ctx := r.Context()
	if jreq.Method == wire.MethodTasksResult && !s.finished(ctx, req, p) {
		// It waits for the task, with the task's notifications on its
		// stream: the go-sdk and ServeResultStream serve it.
		return false
	}
	method := jreq.Method
	hd := s.w25.Table()[method]
	res, err := s.limitedTasksRequest(ctx, method, req, func(ctx context.Context) (mcp.Result, error) {
		return s.runTasksHandler(ctx, hd, &adapter.Request{Method: method, Req: req, Params: p, Session: rec.ss}, p)
	})
	f.writeAnswer(w, jreq.ID, res, err, false)
	s.fastServed.Add(1)
	return true
}

// laneRequest25 is the request the go-sdk hands the middleware for a
// tasks/* call of session ss with params p.
func laneRequest25(ss *mcp.ServerSession, p mcp.Params, extra *mcp.RequestExtra) mcp.Request {
	switch p := p.(type) {
	case *ext2026.GetTaskParams:
		return &mcp.ServerRequest[*ext2026.GetTaskParams]{Session: ss, Params: p, Extra: extra}
	case *v1.TaskIDParams:
		return &mcp.ServerRequest[*v1.TaskIDParams]{Session: ss, Params: p, Extra: extra}
	}
	panic(fmt.Sprintf("mcptask: no fast-lane request for params %T", p))
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
	t, err := s.eng.Get(ctx, s.core.Requester(ctx, req), id)
	return err != nil || t.Status.Terminal()
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
