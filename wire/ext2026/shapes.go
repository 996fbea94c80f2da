package ext2026

import (
	"encoding/json"
	"github.com/mcptask/mcptask/wire/events"
	"time"

	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol names and keys of this wire.
const (
	// Version is the protocol revision this adapter serves.
	Version = "2026-07-28"
	// ExtensionID is the extension identifier in capabilities.
	ExtensionID = "io.modelcontextprotocol/tasks"
	// MetaProtocolVersion is the per-request protocol version key in _meta.
	MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	// MetaClientCapabilities is the per-request client capabilities key in _meta.
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// Result types of the 2026-07-28 wire.
const (
	ResultTypeComplete = "complete"
	ResultTypeTask     = "task"
)

// TaskFields are the fields every task object of this wire carries.
type TaskFields struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTLMs is the retention in milliseconds; the key is always present.
	TTLMs          int64 `json:"ttlMs"`
	PollIntervalMs int64 `json:"pollIntervalMs,omitempty"`
}

// CreateTaskResult is the task handle a tools/call answers with
// (resultType "task").
type CreateTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	TaskFields
	// EventSource links the task to its output events (the draft Task
	// Event Sources), only for a client that declared Events.
	EventSource *events.TaskEventSource `json:"eventSource,omitempty"`
}

// GetTaskResult is the answer to tasks/get: the task with its outcome or
// outstanding input requests inlined (a DetailedTask).
type GetTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	TaskFields
	Result        json.RawMessage            `json:"result,omitempty"`
	Error         *task.Error                `json:"error,omitempty"`
	InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
}

// AckResult is the empty acknowledgement of tasks/update and tasks/cancel.
type AckResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// Ack returns the acknowledgement {"resultType":"complete"}.
func Ack() *AckResult { return &AckResult{ResultType: ResultTypeComplete} }

// GetTaskParams are the params of tasks/get.
type GetTaskParams struct {
	mcp.ParamsBase
	TaskID       string `json:"taskId"`
	RequestState string `json:"requestState,omitempty"`
}

// UpdateTaskParams are the params of tasks/update.
type UpdateTaskParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	RequestState   string                     `json:"requestState,omitempty"`
}

// CancelTaskParams are the params of tasks/cancel.
type CancelTaskParams struct {
	mcp.ParamsBase
	TaskID       string `json:"taskId"`
	RequestState string `json:"requestState,omitempty"`
}

func fields(t *task.Task) TaskFields {
	return TaskFields{
		TaskID:         string(t.ID),
		Status:         string(t.Status),
		StatusMessage:  t.StatusMessage,
		CreatedAt:      task.FormatTime(t.CreatedAt),
		LastUpdatedAt:  task.FormatTime(t.LastUpdatedAt),
		TTLMs:          t.TTL.Milliseconds(),
		PollIntervalMs: max(t.PollInterval, time.Millisecond).Milliseconds(),
	}
}

// Handle translates a task into its handle.
// ToolResult is a complete tools/call answer that mcptask writes itself,
// not the go-sdk's tool handler (which marks its own answers): the tool
// result with resultType "complete".
type ToolResult struct {
	mcp.ResultBase
	ResultType        string          `json:"resultType"`
	Content           json.RawMessage `json:"content"`
	StructuredContent any             `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
}

// Complete returns r as a complete answer of this wire.
func Complete(r *mcp.CallToolResult) (*ToolResult, error) {
	content := r.Content
	if content == nil {
		content = []mcp.Content{}
	}
	b, err := json.Marshal(content)
	if err != nil {
		return nil, err
	}
	out := &ToolResult{ResultType: ResultTypeComplete, Content: b, StructuredContent: r.StructuredContent, IsError: r.IsError}
	out.Meta = r.Meta
	return out, nil
}

func Handle(t *task.Task) *CreateTaskResult {
	return &CreateTaskResult{ResultType: ResultTypeTask, TaskFields: fields(t)}
}

// Detailed translates a task into a tasks/get answer.
func Detailed(t *task.Task) *GetTaskResult {
	r := &GetTaskResult{ResultType: ResultTypeComplete, TaskFields: fields(t)}
	switch t.Status {
	case task.Completed:
		// The stored result is the plain CallToolResult: on this wire it
		// says resultType too.
		r.Result = wire.WithResultType(t.Result, ResultTypeComplete)
	case task.Failed:
		r.Error = t.Error
		if r.Error == nil {
			r.Error = &task.Error{Code: task.CodeInternalError, Message: "the task failed"}
		}
	case task.InputRequired:
		r.InputRequests = t.InputRequests
	}
	return r
}
