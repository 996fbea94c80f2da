package client

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The go-sdk's ClientSession knows nothing of tasks: it drops the `task`
// parameter of a tools/call (CallToolParams has no such field), decodes a
// task handle into an empty CallToolResult, and drops the `tasks`
// capability of an initialize result and the `execution` of each tool.
// The edge fixes this at the SDK's public edges, on the JSON-RPC messages
// themselves: the HTTP RoundTripper (Dial) and the Connection wrapper
// (Connect) both hand it every request they send and every response they
// receive (see transport.go).
//
//   - Outgoing tools/call: a `task` parameter the client asked for under
//     the private _meta key metaTaskRequest moves to params.task (2025-11-25).
//   - Incoming answer to a tools/call that is a task handle (2026-07-28:
//     resultType "task"; 2025-11-25: {task:{...}}): it is rewritten into a
//     CallToolResult carrying the raw handle under the private _meta key
//     metaTaskHandle, which ClientSession.CallTool returns intact.
//   - Incoming answers to initialize and tools/list: capabilities.tasks and
//     each tool's execution.taskSupport are recorded.
const (
	// metaTaskRequest carries the 2025-11-25 `task` parameter of a
	// tools/call from CallTool to the edge, which moves it to params.task.
	metaTaskRequest = wire.MetaPrefix + "client-task-request"
	// metaTaskHandle carries a task handle from the edge to CallTool inside
	// a CallToolResult's _meta.
	metaTaskHandle = wire.MetaPrefix + "client-task-handle"
)

// Methods whose answers the edge looks at, besides wire.MethodToolsCall.
const (
	methodInitialize = "initialize"
	methodListTools  = "tools/list"
)

// edge tracks the requests whose answers it must see and holds what it
// learnt from them. It is shared by one client's transport and the client.
type edge struct {
	mu sync.Mutex
	// pending holds the tracked calls awaiting their answer: ID → method.
	// A call abandoned before its answer came (its ctx ended) stays here,
	// which costs a few bytes and nothing else.
	pending map[jsonrpc.ID]string
	// tasksCap is capabilities.tasks of the initialize result (2025-11-25),
	// nil when the server sent none.
	tasksCap json.RawMessage
	// support maps a tool name to its execution.taskSupport as the last
	// tools/list answer said (2025-11-25); absent when unknown.
	support map[string]string
	// listed is set once a tools/list answer has been seen.
	listed bool

	// hub receives the 2025-11-25 status notifications (push.go).
	hub pushHub
}

func newEdge() *edge {
	e := &edge{pending: map[jsonrpc.ID]string{}, support: map[string]string{}}
	e.hub.init()
	return e
}

// expecting reports whether some tracked call still awaits its answer.
func (e *edge) expecting() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.pending) > 0
}

// tracks reports whether the edge looks at the answer to req.
func (e *edge) tracks(req *jsonrpc.Request) bool {
	switch req.Method {
	case wire.MethodToolsCall, methodInitialize, methodListTools:
		return req.IsCall()
	}
	return false
}

// outgoing inspects a request about to be sent. It returns the request to
// send instead and true when it changed it.
func (e *edge) outgoing(req *jsonrpc.Request) (*jsonrpc.Request, bool) {
	if !e.tracks(req) {
		return req, false
	}
	e.mu.Lock()
	e.pending[req.ID] = req.Method
	e.mu.Unlock()
	if req.Method != wire.MethodToolsCall || !bytes.Contains(req.Params, []byte(metaTaskRequest)) {
		return req, false
	}
	params, ok := liftTaskRequest(req.Params)
	if !ok {
		return req, false
	}
	out := *req
	out.Params = params
	return &out, true
}

// liftTaskRequest moves params._meta[metaTaskRequest] to params.task.
func liftTaskRequest(raw json.RawMessage) (json.RawMessage, bool) {
	var p map[string]json.RawMessage
	if json.Unmarshal(raw, &p) != nil {
		return raw, false
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(p["_meta"], &meta) != nil {
		return raw, false
	}
	tk, ok := meta[metaTaskRequest]
	if !ok {
		return raw, false
	}
	delete(meta, metaTaskRequest)
	if len(meta) == 0 {
		delete(p, "_meta")
	} else {
		mb, err := json.Marshal(meta)
		if err != nil {
			return raw, false
		}
		p["_meta"] = mb
	}
	p["task"] = tk
	out, err := json.Marshal(p)
	if err != nil {
		return raw, false
	}
	return out, true
}

// incoming inspects a response just received. It returns the response to
// deliver instead and true when it changed it.
func (e *edge) incoming(resp *jsonrpc.Response) (*jsonrpc.Response, bool) {
	e.mu.Lock()
	method, ok := e.pending[resp.ID]
	if ok {
		delete(e.pending, resp.ID)
	}
	e.mu.Unlock()
	if !ok || resp.Error != nil || len(resp.Result) == 0 {
		return resp, false
	}
	switch method {
	case methodInitialize:
		e.recordCapabilities(resp.Result)
	case methodListTools:
		e.recordTools(resp.Result)
	case wire.MethodToolsCall:
		if res, ok := wrapTaskHandle(resp.Result); ok {
			out := *resp
			out.Result = res
			return &out, true
		}
	}
	return resp, false
}

// incomingRaw applies incoming to one encoded JSON-RPC message and returns
// the message to deliver (data itself when nothing changed).
func (e *edge) incomingRaw(data []byte) []byte {
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return data // the SDK reports what it cannot decode
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return data
	}
	out, changed := e.incoming(resp)
	if !changed {
		return data
	}
	b, err := jsonrpc.EncodeMessage(out)
	if err != nil {
		return data
	}
	return b
}

func (e *edge) recordCapabilities(result json.RawMessage) {
	var r struct {
		Capabilities struct {
			Tasks json.RawMessage `json:"tasks"`
		} `json:"capabilities"`
	}
	if json.Unmarshal(result, &r) != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tasksCap = nil
	if t := bytes.TrimSpace(r.Capabilities.Tasks); len(t) > 0 && t[0] == '{' {
		e.tasksCap = append(json.RawMessage(nil), t...)
	}
}

func (e *edge) recordTools(result json.RawMessage) {
	var r struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution *struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &r) != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.listed = true
	for _, t := range r.Tools {
		var stated string // an mcptask server's statement on 2026-07-28
		_ = json.Unmarshal(t.Meta[wire.MetaTaskSupport], &stated)
		switch {
		case t.Execution != nil:
			e.support[t.Name] = t.Execution.TaskSupport
		default:
			e.support[t.Name] = stated
		}
	}
}

// serverTasks returns what the server's 2025-11-25 tasks capability
// offers: task-augmented tools/call, tasks/list, tasks/cancel.
func (e *edge) serverTasks() (toolsCall, list, cancel bool) {
	e.mu.Lock()
	raw := e.tasksCap
	e.mu.Unlock()
	if raw == nil {
		return false, false, false
	}
	var c struct {
		List     json.RawMessage `json:"list"`
		Cancel   json.RawMessage `json:"cancel"`
		Requests struct {
			Tools struct {
				Call json.RawMessage `json:"call"`
			} `json:"tools"`
		} `json:"requests"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return false, false, false
	}
	present := func(r json.RawMessage) bool { return len(r) > 0 && string(r) != "null" }
	return present(c.Requests.Tools.Call), present(c.List), present(c.Cancel)
}

// serverDeletes reports whether the server's 2025-11-25 tasks capability
// offers mcptask's tasks/delete (capabilities.tasks.delete).
func (e *edge) serverDeletes() bool {
	e.mu.Lock()
	raw := e.tasksCap
	e.mu.Unlock()
	var c struct {
		Delete json.RawMessage `json:"delete"`
	}
	if raw == nil || json.Unmarshal(raw, &c) != nil {
		return false
	}
	return len(c.Delete) > 0 && string(c.Delete) != "null"
}

// toolSupport returns the recorded execution.taskSupport of a tool and
// whether the tool was in a tools/list answer.
func (e *edge) toolSupport(name string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.support[name]
	return s, ok
}

// forgetTools drops what tools/list said (the server's tool list changed).
func (e *edge) forgetTools() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.support = map[string]string{}
	e.listed = false
}

// wrapTaskHandle rewrites a tools/call result that is a task handle into a
// CallToolResult that carries the raw handle under metaTaskHandle.
func wrapTaskHandle(result json.RawMessage) (json.RawMessage, bool) {
	if !bytes.Contains(result, []byte(`"task`)) {
		return result, false
	}
	var r struct {
		ResultType string          `json:"resultType"`
		Task       json.RawMessage `json:"task"`
		Content    json.RawMessage `json:"content"`
	}
	if json.Unmarshal(result, &r) != nil {
		return result, false
	}
	isHandle := r.ResultType == "task" || // 2026-07-28
		(len(r.Content) == 0 && len(bytes.TrimSpace(r.Task)) > 0 && bytes.TrimSpace(r.Task)[0] == '{') // 2025-11-25
	if !isHandle {
		return result, false
	}
	out, err := json.Marshal(map[string]any{
		"content": []any{},
		"_meta":   map[string]json.RawMessage{metaTaskHandle: result},
	})
	if err != nil {
		return result, false
	}
	return out, true
}

// taskIDParam returns params.taskId of a tasks/* request, "" otherwise.
func taskIDParam(req *jsonrpc.Request) string {
	if !wire.IsTasksMethod(req.Method) || !bytes.Contains(req.Params, []byte(`"taskId"`)) {
		return ""
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return ""
	}
	return p.TaskID
}
