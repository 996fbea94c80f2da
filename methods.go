package mcptask

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire/ext2026"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tasks methods.
const (
	methodGet    = "tasks/get"
	methodUpdate = "tasks/update"
	methodCancel = "tasks/cancel"
	methodResult = "tasks/result"
	methodList   = "tasks/list"
)

func isTasksMethod(m string) bool {
	switch m {
	case methodGet, methodUpdate, methodCancel, methodResult, methodList:
		return true
	}
	return false
}

// addMethods registers the tasks/* methods on the mcp.Server. Each serves
// both wires: a request whose _meta names the 2026-07-28 protocol gets the
// extension's answer, any other the 2025-11-25 one.
func (s *Server) addMethods() error {
	return errors.Join(
		mcp.AddReceivingCustomMethod(s.mcp, methodGet, s.tasksGet),
		mcp.AddReceivingCustomMethod(s.mcp, methodUpdate, s.tasksUpdate),
		mcp.AddReceivingCustomMethod(s.mcp, methodCancel, s.tasksCancel),
		mcp.AddReceivingCustomMethod(s.mcp, methodResult, s.tasksResult),
		mcp.AddReceivingCustomMethod(s.mcp, methodList, s.tasksList),
	)
}

// gate checks the capability and parses the task ID, in the order the 2026
// wire requires: capability first, then the ID.
func (s *Server) gate(ctx context.Context, method string, meta map[string]any, rawID string) (owner task.Owner, id task.ID, err error) {
	if !ext2026.Declares(meta) {
		return "", "", ext2026.MissingCapability(method)
	}
	if id, err = parseID(rawID); err != nil {
		return "", "", err
	}
	return s.requesterOf(ctx), id, nil
}

func (s *Server) tasksGet(ctx context.Context, _ *mcp.ServerSession, p *ext2026.GetTaskParams) (mcp.Result, error) {
	if p == nil { // params absent or null: the go-sdk passes a nil pointer
		p = &ext2026.GetTaskParams{}
	}
	if !ext2026.UsesWire(p.GetMeta()) {
		return s.get2025(ctx, p.TaskID)
	}
	owner, id, err := s.gate(ctx, methodGet, p.GetMeta(), p.TaskID)
	if err != nil {
		return nil, err
	}
	t, err := s.eng.Get(ctx, owner, id)
	if err != nil {
		return nil, s.rpcError(ctx, methodGet, id, err)
	}
	s.auditOutcome(ctx, methodGet, t)
	return ext2026.Detailed(s.pollInterval(owner, t)), nil
}

func (s *Server) tasksUpdate(ctx context.Context, _ *mcp.ServerSession, p *ext2026.UpdateTaskParams) (mcp.Result, error) {
	if p == nil { // params absent or null: the go-sdk passes a nil pointer
		p = &ext2026.UpdateTaskParams{}
	}
	if !ext2026.UsesWire(p.GetMeta()) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("tasks/update belongs to the %s tasks extension; on %s, answer the server's requests during tasks/result", ext2026.Version, v1.Version)}
	}
	owner, id, err := s.gate(ctx, methodUpdate, p.GetMeta(), p.TaskID)
	if err != nil {
		return nil, err
	}
	_, ignored, err := s.eng.Respond(ctx, owner, id, p.InputResponses)
	var term *engine.TerminalError
	if errors.As(err, &term) {
		// The task needs no input any more (it ended, possibly just after
		// the client's last answer): the answers are ignored, as answers
		// to unknown keys are.
		return ext2026.Ack(), nil
	}
	if err != nil {
		return nil, s.rpcError(ctx, methodUpdate, id, err)
	}
	if len(ignored) > 0 {
		s.log.Debug("tasks/update ignored answers for unknown or answered input requests", "task", id, "keys", ignored)
	}
	return ext2026.Ack(), nil
}

func (s *Server) tasksCancel(ctx context.Context, _ *mcp.ServerSession, p *ext2026.CancelTaskParams) (mcp.Result, error) {
	if p == nil { // params absent or null: the go-sdk passes a nil pointer
		p = &ext2026.CancelTaskParams{}
	}
	if !ext2026.UsesWire(p.GetMeta()) {
		return s.cancel2025(ctx, p.TaskID)
	}
	owner, id, err := s.gate(ctx, methodCancel, p.GetMeta(), p.TaskID)
	if err != nil {
		return nil, err
	}
	_, err = s.eng.Cancel(ctx, owner, id)
	var term *engine.TerminalError
	if err != nil && !errors.As(err, &term) { // cancelling a finished task is an idempotent no-op here
		return nil, s.rpcError(ctx, methodCancel, id, err)
	}
	return ext2026.Ack(), nil
}

func (s *Server) tasksResult(ctx context.Context, ss *mcp.ServerSession, p *v1.TaskIDParams) (mcp.Result, error) {
	if p == nil { // params absent or null: the go-sdk passes a nil pointer
		p = &v1.TaskIDParams{}
	}
	if ext2026.UsesWire(p.GetMeta()) {
		return nil, removedOn2026(methodResult)
	}
	return s.result2025(ctx, ss, p.TaskID)
}

func (s *Server) tasksList(ctx context.Context, _ *mcp.ServerSession, p *v1.ListTasksParams) (mcp.Result, error) {
	if p == nil { // params absent or null: the go-sdk passes a nil pointer
		p = &v1.ListTasksParams{}
	}
	if ext2026.UsesWire(p.GetMeta()) {
		return nil, removedOn2026(methodList)
	}
	return s.list2025(ctx, p.Cursor)
}

// rpcError translates an engine error of a request for the task id by
// method into a JSON-RPC error. A task the requester may not see, whatever
// the reason, is answered as an unknown task; the audit trail gets the
// reason.
func (s *Server) rpcError(ctx context.Context, method string, id task.ID, err error) error {
	var term *engine.TerminalError
	switch {
	case errors.Is(err, engine.ErrNotFound):
		s.auditDenied(ctx, method, id, err)
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task %q not found: it does not exist or has expired", id)}
	case errors.As(err, &term):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task %q is already %s", id, term.Status)}
	case errors.Is(err, engine.ErrClosed):
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server is shutting down"}
	}
	s.log.Error("task operation failed", "task", id, "err", err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error while accessing the task"}
}
