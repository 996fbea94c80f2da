package mcptask

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// metaRerun marks an in-process re-run of a task's tool call. Its value is
// "<nonce>:<taskID>"; the nonce is secret to the process, so a client cannot
// forge a re-run.
const metaRerun = wire.MetaRerun

// recoverTask is the engine's recovery policy: a task of a tool declared
// Rerunnable is run again; any other task is failed by the engine.
func (s *Server) recoverTask(_ context.Context, t *task.Task) engine.Work {
	if !s.toolOptions(t.Tool).Rerunnable || len(t.Request) == 0 {
		return nil
	}
	return func(ctx context.Context) (json.RawMessage, error) { return s.rerun(ctx, t) }
}

// rerun calls the task's tool again through an in-memory client session, so
// the call takes the server's full path (argument validation, typed
// handlers, middleware) and the handler runs attached to the existing task.
func (s *Server) rerun(ctx context.Context, t *task.Task) (json.RawMessage, error) {
	var params mcp.CallToolParamsRaw
	if err := json.Unmarshal(t.Request, &params); err != nil {
		return nil, &task.Error{Code: task.CodeInternalError, Message: "cannot decode the stored call to re-run it: " + err.Error()}
	}
	meta := mcp.Meta{metaRerun: s.nonce + ":" + string(t.ID)}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.mcp.Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	defer ss.Close()
	client := mcp.NewClient(&mcp.Implementation{Name: "mcptask-rerun", Version: "1"}, nil)
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: params.Name, Arguments: params.Arguments})
	if err != nil {
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			return nil, &task.Error{Code: je.Code, Message: je.Message, Data: je.Data}
		}
		return nil, err
	}
	if m := res.GetMeta(); m != nil {
		delete(m, "io.modelcontextprotocol/serverInfo")
		if len(m) == 0 {
			res.SetMeta(nil)
		}
	}
	return resultJSON(res)
}

// rerunTarget returns the task a re-run call belongs to, if meta marks one.
func (s *Server) rerunTarget(meta map[string]any) (task.ID, bool) {
	v, _ := meta[metaRerun].(string)
	nonce, id, ok := strings.Cut(v, ":")
	if !ok || nonce != s.nonce {
		return "", false
	}
	return task.ID(id), true
}

// runAttached runs a re-run call attached to its task.
func (s *Server) runAttached(ctx context.Context, id task.ID, next mcp.MethodHandler, method string, req mcp.Request) (mcp.Result, error) {
	actx, cancel, ok := s.eng.Attach(ctx, id)
	defer cancel()
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no re-run of that task is in progress"}
	}
	return next(actx, method, req)
}
