package mcptask

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tasks methods.
const (
	methodGet    = "tasks/get"
	methodUpdate = "tasks/update"
	methodCancel = "tasks/cancel"
)

// addMethods registers the tasks/* methods on the mcp.Server.
func (s *Server) addMethods() error {
	if err := mcp.AddReceivingCustomMethod(s.mcp, methodGet, s.tasksGet); err != nil {
		return err
	}
	if err := mcp.AddReceivingCustomMethod(s.mcp, methodUpdate, s.tasksUpdate); err != nil {
		return err
	}
	return mcp.AddReceivingCustomMethod(s.mcp, methodCancel, s.tasksCancel)
}

// gate checks the capability and parses the task ID, in the order the wire
// requires: capability first, then the ID.
func (s *Server) gate(ctx context.Context, method string, meta map[string]any, rawID string) (owner string, id task.ID, err error) {
	if !ext2026.Declares(meta) {
		return "", "", ext2026.MissingCapability(method)
	}
	id, err = task.ParseID(rawID)
	if err != nil {
		return "", "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	if req, ok := ctx.Value(requestKey{}).(mcp.Request); ok {
		owner = s.owner(ctx, req)
	}
	return owner, id, nil
}

func (s *Server) tasksGet(ctx context.Context, _ *mcp.ServerSession, p *ext2026.GetTaskParams) (*ext2026.GetTaskResult, error) {
	owner, id, err := s.gate(ctx, methodGet, p.GetMeta(), p.TaskID)
	if err != nil {
		return nil, err
	}
	t, err := s.eng.Get(ctx, owner, id)
	if err != nil {
		return nil, s.rpcError(id, err)
	}
	return ext2026.Detailed(t), nil
}

func (s *Server) tasksUpdate(ctx context.Context, _ *mcp.ServerSession, p *ext2026.UpdateTaskParams) (*ext2026.AckResult, error) {
	owner, id, err := s.gate(ctx, methodUpdate, p.GetMeta(), p.TaskID)
	if err != nil {
		return nil, err
	}
	_, ignored, err := s.eng.Respond(ctx, owner, id, p.InputResponses)
	var term *engine.ErrTerminal
	if errors.As(err, &term) {
		// The task needs no input any more (it ended, possibly just after
		// the client's last answer): the answers are ignored, as answers
		// to unknown keys are.
		return ext2026.Ack(), nil
	}
	if err != nil {
		return nil, s.rpcError(id, err)
	}
	if len(ignored) > 0 {
		s.log.Debug("tasks/update ignored answers for unknown or answered input requests", "task", id, "keys", ignored)
	}
	return ext2026.Ack(), nil
}

func (s *Server) tasksCancel(ctx context.Context, _ *mcp.ServerSession, p *ext2026.CancelTaskParams) (*ext2026.AckResult, error) {
	owner, id, err := s.gate(ctx, methodCancel, p.GetMeta(), p.TaskID)
	if err != nil {
		return nil, err
	}
	_, err = s.eng.Cancel(ctx, owner, id)
	var term *engine.ErrTerminal
	if err != nil && !errors.As(err, &term) { // cancelling a finished task is an idempotent no-op
		return nil, s.rpcError(id, err)
	}
	return ext2026.Ack(), nil
}

// rpcError translates an engine error into a JSON-RPC error.
func (s *Server) rpcError(id task.ID, err error) error {
	var term *engine.ErrTerminal
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task %q not found: it does not exist or has expired", id)}
	case errors.As(err, &term):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task %q is already %s", id, term.Status)}
	case errors.Is(err, engine.ErrClosed):
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server is shutting down"}
	}
	s.log.Error("task operation failed", "task", id, "err", err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error while accessing the task"}
}
