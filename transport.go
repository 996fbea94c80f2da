package mcptask

import (
	"context"

	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport wraps a go-sdk transport (e.g. mcp.StdioTransport) so that the
// 2025-11-25 `task` parameter of tools/call reaches the tasks middleware:
// the go-sdk drops params fields it does not know. Serve a stdio server with
// srv.Run(ctx, mcptask.Transport(&mcp.StdioTransport{})). The HTTP handler of
// [Server.Handler] does the same by itself.
func Transport(t mcp.Transport) mcp.Transport { return &taskTransport{t} }

type taskTransport struct{ mcp.Transport }

func (t *taskTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &taskConn{c}, nil
}

type taskConn struct{ mcp.Connection }

func (c *taskConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.Method == "tools/call" {
		if params, lifted := v1.LiftTaskParams(req.Params); lifted {
			req.Params = params
		}
	}
	return msg, err
}
