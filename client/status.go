package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/wire/ext2026"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The task statuses.
const (
	statusWorking       = "working"
	statusInputRequired = "input_required"
	statusCompleted     = "completed"
	statusFailed        = "failed"
	statusCancelled     = "cancelled"
)

func knownStatus(s string) bool {
	switch s {
	case statusWorking, statusInputRequired, statusCompleted, statusFailed, statusCancelled:
		return true
	}
	return false
}

// parseTime reads a task timestamp; an unreadable one is the zero time.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// validate checks the fields every task snapshot must have.
func (s *TaskStatus) validate(what string) error {
	if s.ID == "" {
		return fmt.Errorf("the server's %s has no taskId", what)
	}
	if !knownStatus(s.Status) {
		return fmt.Errorf("the server's %s for task %s has an unknown status %q", what, s.ID, s.Status)
	}
	return nil
}

// status2026 translates a task of the 2026-07-28 wire.
func status2026(f ext2026.TaskFields) *TaskStatus {
	return &TaskStatus{
		ID:            f.TaskID,
		Status:        f.Status,
		StatusMessage: f.StatusMessage,
		CreatedAt:     parseTime(f.CreatedAt),
		LastUpdatedAt: parseTime(f.LastUpdatedAt),
		TTL:           time.Duration(max(f.TTLMs, 0)) * time.Millisecond,
		PollInterval:  time.Duration(max(f.PollIntervalMs, 0)) * time.Millisecond,
	}
}

// status2025 translates a task of the 2025-11-25 wire.
func status2025(t v1.Task) *TaskStatus {
	s := &TaskStatus{
		ID:            t.TaskID,
		Status:        t.Status,
		StatusMessage: t.StatusMessage,
		CreatedAt:     parseTime(t.CreatedAt),
		LastUpdatedAt: parseTime(t.LastUpdatedAt),
		PollInterval:  time.Duration(max(t.PollInterval, 0)) * time.Millisecond,
	}
	if t.TTL != nil {
		s.TTL = time.Duration(max(*t.TTL, 0)) * time.Millisecond
	}
	return s
}

// parseHandle decodes the task handle a tools/call answered with (the raw
// result the edge kept).
func parseHandle(raw json.RawMessage) (*TaskStatus, error) {
	var probe struct {
		ResultType string          `json:"resultType"`
		Task       json.RawMessage `json:"task"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("the server's task handle is not valid JSON: %v", err)
	}
	var st *TaskStatus
	if probe.ResultType == ext2026.ResultTypeTask {
		var h ext2026.CreateTaskResult
		if err := json.Unmarshal(raw, &h); err != nil {
			return nil, fmt.Errorf("the server's task handle is not valid: %v", err)
		}
		st = status2026(h.TaskFields)
	} else {
		var t v1.Task
		if err := json.Unmarshal(probe.Task, &t); err != nil {
			return nil, fmt.Errorf("the server's task handle is not valid: %v", err)
		}
		st = status2025(t)
	}
	if err := st.validate("task handle"); err != nil {
		return nil, err
	}
	return st, nil
}

// rpcError returns the JSON-RPC error in err, if any.
func rpcError(err error) (*jsonrpc.Error, bool) {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we, true
	}
	return nil, false
}

// isNotFound reports whether err is the server's "no such task" answer
// (-32602 Invalid params, what both wires answer for an unknown or expired
// task).
func isNotFound(err error) bool {
	we, ok := rpcError(err)
	return ok && we.Code == jsonrpc.CodeInvalidParams
}

// notFound wraps ErrTaskNotFound with the task and the server's words.
func notFound(id string, err error) error {
	msg := ""
	if we, ok := rpcError(err); ok {
		msg = we.Message
	}
	if msg == "" {
		return fmt.Errorf("task %s: %w", id, ErrTaskNotFound)
	}
	return fmt.Errorf("task %s: %w (%s)", id, ErrTaskNotFound, msg)
}

// taskError builds the *TaskError of a failed task.
func taskError(id string, code int64, message string, data json.RawMessage) *TaskError {
	if message == "" {
		message = "the task failed without an error message"
	}
	te := &TaskError{TaskID: id, Code: code, Message: message}
	if len(data) > 0 {
		te.Data = append([]byte(nil), data...)
	}
	return te
}
