package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcptask/mcptask/wire/ext2026"
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
	// The edge takes either shape for a handle (see wrapTaskHandle), so
	// the shape, not the wire, says how to read it.
	var st *TaskStatus
	var err error
	if probe.ResultType == ext2026.ResultTypeTask {
		st, err = handle2026(raw)
	} else {
		st, err = handle2025(probe.Task)
	}
	if err != nil {
		return nil, err
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

// isNotFound reports whether err is the server's "no such task" answer:
// -32602 Invalid params, what both wires answer for an unknown or expired
// task, with a message that says so. Other -32602 answers (an answer
// that does not fit its question, a bad cursor) are the server's own
// words about the request, not about the task's existence.
func isNotFound(err error) bool {
	we, ok := rpcError(err)
	if !ok || we.Code != jsonrpc.CodeInvalidParams {
		return false
	}
	msg := strings.ToLower(we.Message)
	for _, s := range []string{"not found", "unknown task", "no such task", "does not exist", "expired", "not exist"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
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
