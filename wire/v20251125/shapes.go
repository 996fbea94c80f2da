package v20251125

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/mcptask/mcptask/wire/events"
	"math"
	"time"

	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is the protocol revision this adapter serves.
const Version = "2025-11-25"

// MetaRelatedTask is the _meta key that ties a message to its task.
const MetaRelatedTask = "io.modelcontextprotocol/related-task"

// MetaTaskParam is the private _meta key under which the transport edge
// carries a tools/call request's `task` parameter across the go-sdk, which
// drops params fields it does not know.
const MetaTaskParam = wire.MetaTaskParam

// Task is the task object of this wire.
type Task struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTL is the retention in milliseconds (null for unlimited).
	TTL          *int64 `json:"ttl"`
	PollInterval int64  `json:"pollInterval,omitempty"`
}

// FromTask translates a domain task. A completed tool call whose result
// has isError:true (t.ToolError, as stores keep it, or its Result when
// loaded) is shown failed, as this wire requires.
func FromTask(t *task.Task) Task {
	ttl := t.TTL.Milliseconds()
	status := string(t.Status)
	if t.Status == task.Completed && (t.ToolError || isToolError(t.Result)) {
		status = string(task.Failed)
	}
	return Task{
		TaskID:        string(t.ID),
		Status:        status,
		StatusMessage: t.StatusMessage,
		CreatedAt:     task.FormatTime(t.CreatedAt),
		LastUpdatedAt: task.FormatTime(t.LastUpdatedAt),
		TTL:           &ttl,
		PollInterval:  max(t.PollInterval, time.Millisecond).Milliseconds(),
	}
}

// isToolError reports whether the result says isError: true at its top
// level (see task.ToolError: nothing else is decoded).
func isToolError(result json.RawMessage) bool { return task.ToolError(result) }

// CreateTaskResult answers a task-augmented request.
type CreateTaskResult struct {
	mcp.ResultBase
	Task Task `json:"task"`
	// EventSource links the task to its output events (the draft Task
	// Event Sources), only for a client that declared Events.
	EventSource *events.TaskEventSource `json:"eventSource,omitempty"`
}

// TaskResult answers tasks/get and tasks/cancel: the task's fields, flat.
type TaskResult struct {
	mcp.ResultBase
	Task
}

// ListTasksResult answers tasks/list.
type ListTasksResult struct {
	mcp.ResultBase
	Tasks      []Task `json:"tasks"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// RawResult is a result whose JSON is given as is (e.g. a stored tool
// result returned by tasks/result).
type RawResult struct {
	mcp.ResultBase
	JSON json.RawMessage
}

// MarshalJSON returns the raw JSON, with _meta merged in when set.
func (r *RawResult) MarshalJSON() ([]byte, error) {
	if len(r.Meta) == 0 {
		return r.JSON, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.JSON, &m); err != nil {
		return nil, err
	}
	meta := map[string]any{}
	if raw, ok := m["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	for k, v := range r.Meta {
		meta[k] = v
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	m["_meta"] = b
	return json.Marshal(m)
}

// TaskIDParams are the params of tasks/get, tasks/result and tasks/cancel.
type TaskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// ListTasksParams are the params of tasks/list.
type ListTasksParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// RelatedTask returns the related-task _meta value for a task.
func RelatedTask(id task.ID) map[string]any {
	return map[string]any{"taskId": string(id)}
}

// ParseTaskParam decodes a request's `task` parameter ({"ttl": ms}) and
// returns the requested retention, nil when none is asked for. A ttl that is
// not a non-negative integer number of milliseconds is an error.
func ParseTaskParam(raw json.RawMessage) (*time.Duration, error) {
	var p struct {
		TTL json.RawMessage `json:"ttl"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("params.task must be an object like {\"ttl\": 60000}: %v", err)
	}
	if len(p.TTL) == 0 || string(p.TTL) == "null" {
		return nil, nil
	}
	bad := fmt.Errorf("params.task.ttl must be a non-negative integer number of milliseconds, not %s", p.TTL)
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(p.TTL))
	dec.UseNumber()
	if p.TTL[0] == '"' || dec.Decode(&n) != nil {
		return nil, bad
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || f < 0 || f != math.Trunc(f) {
		return nil, bad
	}
	// Anything beyond ~292 years cannot be a duration; the policy caps far
	// below that anyway.
	if f > float64(math.MaxInt64/int64(time.Millisecond)) {
		d := time.Duration(math.MaxInt64)
		return &d, nil
	}
	d := time.Duration(int64(f)) * time.Millisecond
	return &d, nil
}
