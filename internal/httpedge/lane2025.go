package httpedge

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The 2025-11-25 part of the fast lane: tasks/get, tasks/result of a
// task already finished, and the tools/call the server answers with a
// task ([Tasks.Call]), on a session of the stateful go-sdk handler that
// the lane's record knows (sessions.go).
//
// tasks/result waits for a task to finish and carries the task's status
// notifications meanwhile (the wire's ServeResultStream): the lane answers
// it only when the task has finished already ([Tasks.Finished], asked
// with the requester's rights once the request rate allowed the request),
// and leaves the others to the go-sdk, giving the rate's charge back
// first: the go-sdk's path charges it.

// lane25Methods are the 2025-11-25 methods of the fast lane, with the
// decoding of their params as the go-sdk decodes them.
var lane25Methods = map[string]laneDecoder{
	wire.MethodTasksGet:    laneParams[ext2026.GetTaskParams],
	wire.MethodTasksResult: laneParams[v1.TaskIDParams],
	wire.MethodToolsCall:   laneCallParams,
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
	if rec == nil || int64(len(body)) > f.maxBody ||
		!bytes.Contains(body, []byte(`"tasks/`)) && !(bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(body, []byte(`"task"`))) ||
		!f.headersOK(r, v1.Version) {
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
	params := jreq.Params
	if jreq.Method == wire.MethodToolsCall {
		// The task parameter, which the go-sdk would drop, is carried in
		// _meta, as on the go-sdk's path (liftTaskParam); a call without
		// it is a plain call.
		var lifted bool
		if params, lifted = v1.LiftTaskParams(params); !lifted {
			return false
		}
	}
	p, req, ok := lane25Methods[jreq.Method](params, extra, rec.ss)
	if !ok {
		return false
	}
	if cp, call := p.(*mcp.CallToolParamsRaw); call && !f.tasks.CallsTool(cp.Name) {
		return false
	}
	if _, versioned := p.GetMeta()[mcp.MetaKeyProtocolVersion]; versioned {
		// The go-sdk checks a per-request protocol version itself.
		return false
	}
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
	method := jreq.Method
	var take func(context.Context) bool
	if method == wire.MethodTasksResult {
		// A tasks/result of a task still running waits for it, with the
		// task's notifications on its stream: the go-sdk and
		// ServeResultStream serve it.
		take = func(ctx context.Context) bool { return f.tasks.Finished(ctx, req, p) }
	}
	var res mcp.Result
	var err error
	var served bool
	if method == wire.MethodToolsCall {
		res, err, served = f.tasks.Call(r.Context(), &adapter.Request{Method: method, Req: req, Session: rec.ss})
	} else {
		h := f.v25.Table()[method]
		res, err, served = f.tasks.Run(r.Context(), h, &adapter.Request{Method: method, Req: req, Params: p, Session: rec.ss}, take)
	}
	if !served {
		return false
	}
	f.writeAnswer(w, jreq.ID, res, err, false)
	return true
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
