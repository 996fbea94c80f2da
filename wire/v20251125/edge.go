package v20251125

import (
	"bytes"
	"encoding/json"

	"github.com/mcptask/mcptask/task"
)

// LiftTaskParams moves the `task` parameter of a tools/call request's params
// into params._meta[MetaTaskParam], where the go-sdk keeps it (it drops
// params fields it does not know). It returns the params unchanged and false
// when there is nothing to move or they are not a JSON object.
func LiftTaskParams(params json.RawMessage) (json.RawMessage, bool) {
	if !bytes.Contains(params, []byte(`"task"`)) {
		return params, false
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return params, false
	}
	raw, ok := p["task"]
	if !ok {
		return params, false
	}
	delete(p, "task")
	meta := map[string]json.RawMessage{}
	if m, ok := p["_meta"]; ok && json.Unmarshal(m, &meta) != nil {
		return params, false // leave a malformed _meta for the SDK to reject
	}
	meta[MetaTaskParam] = raw
	mb, err := json.Marshal(meta)
	if err != nil {
		return params, false
	}
	p["_meta"] = mb
	out, err := json.Marshal(p)
	if err != nil {
		return params, false
	}
	return out, true
}

// LiftTaskMessage applies [LiftTaskParams] to a whole JSON-RPC message
// body if it is a tools/call request.
func LiftTaskMessage(body []byte) ([]byte, bool) {
	if !bytes.Contains(body, []byte(`"task"`)) {
		return body, false
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil {
		return body, false
	}
	var method string
	if json.Unmarshal(msg["method"], &method) != nil || method != "tools/call" {
		return body, false
	}
	params, ok := LiftTaskParams(msg["params"])
	if !ok {
		return body, false
	}
	msg["params"] = params
	out, err := json.Marshal(msg)
	if err != nil {
		return body, false
	}
	return out, true
}

// ResultRequest reports whether body is a single tasks/result request, and
// the task ID it names (parsed: a malformed one is not reported).
func ResultRequest(body []byte) (task.ID, bool) {
	if !bytes.Contains(body, []byte(`"tasks/result"`)) {
		return "", false
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			TaskID string `json:"taskId"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "tasks/result" {
		return "", false
	}
	id, err := task.ParseID(msg.Params.TaskID)
	return id, err == nil
}
