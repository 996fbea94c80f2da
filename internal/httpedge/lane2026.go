package httpedge

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The 2026-07-28 part of the fast lane: tasks/get, tasks/update,
// tasks/cancel and tasks/delete, and the tools/call the server answers
// with a task ([Tasks.Call]), stateless.

// laneMethods are the 2026-07-28 methods of the fast lane.
var laneMethods = map[string]laneDecoder{
	wire.MethodTasksGet:    laneParams[ext2026.GetTaskParams],
	wire.MethodTasksUpdate: laneParams[ext2026.UpdateTaskParams],
	wire.MethodTasksCancel: laneParams[ext2026.CancelTaskParams],
	wire.MethodTasksDelete: laneParams[ext2026.CancelTaskParams],
	wire.MethodToolsCall:   laneCallParams,
}

// laneCallParams decodes the params of a tools/call as the go-sdk does,
// into the request it hands the middleware, of session ss (nil on
// 2026-07-28). Its Extra's CloseSSEStream does nothing: the go-sdk sets
// one on every call, and the call's answer is the lane's, whole.
func laneCallParams(raw json.RawMessage, extra *mcp.RequestExtra, ss *mcp.ServerSession) (mcp.Params, mcp.Request, bool) {
	var p *mcp.CallToolParamsRaw
	if sdkUnmarshal(raw, &p) != nil || p == nil {
		return nil, nil, false
	}
	x := *extra
	x.CloseSSEStream = func(mcp.CloseSSEStreamArgs) {}
	return p, &mcp.CallToolRequest{Session: ss, Params: p, Extra: &x}, true
}

// serve answers r if it is a fast-lane request and reports whether it did;
// when it did not, r (its body included) is as it came.
func (f *fastLane) serve(w http.ResponseWriter, r *http.Request) bool {
	f.probeOnce.Do(f.doProbe)
	if !f.on {
		return false
	}
	method := r.Header.Get("Mcp-Method")
	if r.Method != http.MethodPost || r.Body == nil || laneMethods[method] == nil ||
		method == wire.MethodToolsCall && !f.tasks.CallsTool(r.Header.Get("Mcp-Name")) ||
		!f.headersOK(r, ext2026.Version) {
		// (The go-sdk's DNS rebinding protection, among others, would
		// refuse it.)
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, f.maxBody+1))
	if err != nil || int64(len(body)) > f.maxBody {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		return false
	}
	r.Body.Close()
	if !f.answer(w, r, body) {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		return false
	}
	return true
}

// answer answers the request of body if the go-sdk would hand it to
// the server's middleware as it is, and reports whether it did.
func (f *fastLane) answer(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if !plainObject(body) {
		return false
	}
	jreq, ok := decodeRequest(body)
	method := r.Header.Get("Mcp-Method")
	if !ok || jreq.Method != method || !jreq.IsCall() || len(jreq.Params) == 0 {
		return false
	}
	if method != wire.MethodToolsCall {
		if _, bad := ext2026.RoutingMismatch(r.Header, body); bad {
			return false
		}
	}
	ctx := r.Context()
	extra := &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(ctx), Header: r.Header}
	p, req, ok := laneMethods[method](jreq.Params, extra, nil)
	if !ok || !sdkAcceptsMeta(p.GetMeta(), r.Header.Get("Mcp-Protocol-Version")) {
		return false
	}
	if method == wire.MethodToolsCall {
		// The go-sdk checks the Mcp-Name header against the tool's name
		// (and its parameter headers, of tools the lane does not take).
		name := r.Header.Get("Mcp-Name")
		if name == "" || name != p.(*mcp.CallToolParamsRaw).Name {
			return false
		}
		res, err, served := f.tasks.Call(ctx, &adapter.Request{Method: method, Req: req})
		if !served {
			return false
		}
		f.writeAnswer(w, jreq.ID, res, err, true)
		return true
	}
	h := f.v2026.Table()[method]
	res, err, _ := f.tasks.Run(ctx, h, &adapter.Request{Method: method, Req: req, Params: p}, nil)
	f.writeAnswer(w, jreq.ID, res, err, true)
	return true
}

// sdkClientCapabilities is the shape the go-sdk decodes the
// per-request client capabilities into.
type sdkClientCapabilities struct {
	mcp.ClientCapabilities
	Roots *mcp.RootCapabilities `json:"roots,omitempty"`
}

// sdkAcceptsMeta reports whether the go-sdk accepts a 2026-07-28 request
// with the _meta meta and the protocol version header version and handles
// it on the new protocol, as its servePOST and ServerSession.handle check.
func sdkAcceptsMeta(meta map[string]any, version string) bool {
	if v, _ := meta[mcp.MetaKeyProtocolVersion].(string); v != version || !ext2026.UsesWire(meta) {
		return false
	}
	if ci, present := meta[mcp.MetaKeyClientInfo]; present {
		var impl *mcp.Implementation
		if ci == nil || !decodesAs(ci, implementationStrings, nil) && remarshal(ci, &impl) != nil {
			return false
		}
	}
	caps, present := meta[mcp.MetaKeyClientCapabilities]
	if !present || caps == nil {
		return false
	}
	var c *sdkClientCapabilities
	return decodesAs(caps, nil, capabilityObjects) || remarshal(caps, &c) == nil
}

// The fields of mcp.Implementation that are strings, and of
// mcp.ClientCapabilities that are maps (any JSON object decodes into
// them); see decodesAs.
var (
	implementationStrings = map[string]bool{"name": true, "title": true, "description": true, "version": true, "websiteUrl": true}
	capabilityObjects     = map[string]bool{"experimental": true, "extensions": true}
)

// decodesAs reports, without encoding v again, that v (a value the JSON
// decoder made of a request) decodes into a struct whose fields named in
// strings are strings and in objects are maps: v is an object, and each
// of its members is one of those fields with a value of its type (a
// string; an object, which always decodes into a map). false means only
// that it cannot tell (another member, a null, another type):
// remarshal, the go-sdk's way, then decides.
func decodesAs(v any, strings, objects map[string]bool) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for k, x := range m {
		switch {
		case strings[k]:
			if _, ok := x.(string); !ok {
				return false
			}
		case objects[k]:
			if _, ok := x.(map[string]any); !ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}
