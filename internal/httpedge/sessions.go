package httpedge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The 2025-11-25 session record of the fast lane (lane2025.go).
//
// A 2025-11-25 request names its session (Mcp-Session-Id), which the
// go-sdk keeps in a table of its own: it answers 404 for an unknown or
// closed session, 403 when the request's user is not the session's, and
// closes a session left without a POST for StreamableHTTPOptions.SessionTimeout.
// The lane keeps its own record of the sessions, from the go-sdk's
// public edges only, and answers only the requests of a session it knows
// the go-sdk would serve:
//
//   - A session enters the record when the server's receiving middleware
//     sees one of its messages after its initialize ([Register]): the
//     middleware has the *mcp.ServerSession (which the wire's handler
//     needs, as on the slow path) and the user of the request's token,
//     which passed the go-sdk's own check of the session's user. The
//     middleware knows the record of the Handler that created the session
//     from the initialize POST's context, which the go-sdk keeps for the
//     session's handlers; a session of another handler is never answered.
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
//     microseconds, a create's durable write) is served by the go-sdk, which does not see the lane's,
//     where the go-sdk alone would refuse the second; and an ID the go-sdk
//     still holds after its POST ended (the client hung up before the
//     answer) is answered on the lane. Both need a client that reuses the
//     ID of a call still in flight, which JSON-RPC forbids.

// sessionsKey is the context key under which the Handler puts its
// session record on the requests that may create a session (see
// Register).
type sessionsKey struct{}

// Register records the 2025-11-25 session of req, a request the server's
// receiving middleware sees with its context ctx, in the session record
// of the Handler that created the session, if that Handler has a fast
// lane for 2025-11-25; it does nothing otherwise. The server's
// middleware calls it for every request.
func Register(ctx context.Context, req mcp.Request) {
	if ls, ok := ctx.Value(sessionsKey{}).(*sessions); ok {
		ls.register(req)
	}
}

// sessions is the fast lane's record of the 2025-11-25 sessions of one
// Handler.
type sessions struct {
	// timeout is the go-sdk handler's SessionTimeout (0: none).
	timeout time.Duration
	m       sync.Map // session ID → *session
	// watched holds the sessions (*mcp.ServerSession) a goroutine waits
	// on, to remove them from m when they close.
	watched sync.Map

	callsMu sync.Mutex
	// calls counts the calls in flight by session ID, then by ID.
	calls map[string]map[string]*inFlight
}

// inFlight counts the calls with one ID in flight on one session.
type inFlight struct{ slow, fast int }

// session is what the lane knows of one session.
type session struct {
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
func (ls *sessions) register(req mcp.Request) {
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
	ls.m.Store(id, &session{ss: ss, userID: user, seen: now})
	if _, waiting := ls.watched.LoadOrStore(ss, struct{}{}); waiting {
		return
	}
	go func() {
		_ = ss.Wait()
		if v, ok := ls.m.Load(id); ok && v.(*session).ss == ss {
			ls.m.CompareAndDelete(id, v)
		}
		ls.watched.Delete(ss)
	}()
}

// session returns the record of the session id, nil if none.
func (ls *sessions) session(id string) *session {
	if v, ok := ls.m.Load(id); ok {
		return v.(*session)
	}
	return nil
}

// forget removes the session id from the record (before a DELETE).
func (ls *sessions) forget(id string) { ls.m.Delete(id) }

// slowPOST counts the calls of body, a POST of the session sid on its way
// to the go-sdk, as in flight; the returned function ends them.
func (ls *sessions) slowPOST(sid string, body []byte) (end func()) {
	ids := callIDs(body)
	if len(ids) == 0 {
		return func() {}
	}
	ls.count(sid, ids, false, 1)
	return func() { ls.count(sid, ids, false, -1) }
}

// count adds n to the calls ids of the session sid on a lane (fast or
// not).
func (ls *sessions) count(sid string, ids []string, fast bool, n int) {
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
func (ls *sessions) beginFast(sid, id string) (busy, onLane bool) {
	ls.callsMu.Lock()
	c := ls.calls[sid][id]
	ls.callsMu.Unlock()
	if c != nil {
		return true, c.fast > 0
	}
	ls.count(sid, []string{id}, true, 1)
	return false, false
}

// idKey is the key of a call's ID in sessions.calls: equal IDs, as the
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
