package mcptask

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/mcptask/mcptask/task"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport wraps a go-sdk transport (e.g. mcp.StdioTransport) so that the
// 2025-11-25 `task` parameter of tools/call reaches the tasks middleware:
// the go-sdk drops params fields it does not know. The HTTP handler of
// [Server.Handler] does the same by itself. Prefer [Server.Run], which also
// sends notifications/tasks/status.
func Transport(t mcp.Transport) mcp.Transport { return &taskTransport{Transport: t} }

// Run serves one client on t (e.g. &mcp.StdioTransport{}) until the client
// disconnects or ctx is done. Besides carrying the 2025-11-25 `task`
// parameter (see [Transport]), the connection receives a
// notifications/tasks/status at each status change of the 2025-11-25 tasks
// created on it.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	tt := &taskTransport{Transport: t}
	ss, err := s.mcp.Connect(ctx, tt, nil)
	if err != nil {
		return err
	}
	conn := tt.conn
	s.conns.Store(ss, conn)
	defer func() {
		s.conns.Delete(ss)
		conn.close()
		s.targets.Range(func(id, c any) bool {
			if c == conn {
				s.targets.Delete(id)
			}
			return true
		})
	}()
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case <-ctx.Done():
		ss.Close()
		<-done
		return ctx.Err()
	case err := <-done:
		return err
	}
}

type taskTransport struct {
	mcp.Transport
	conn *taskConn
}

func (t *taskTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.conn = newTaskConn(c)
	return t.conn, nil
}

// taskConn lifts the task parameter of incoming tools/call requests and can
// interleave task status notifications with the go-sdk's own writes.
type taskConn struct {
	mcp.Connection
	wmu     sync.Mutex // serialises writes: the go-sdk's and the notifier's
	out     chan *jsonrpc.Request
	stop    chan struct{}
	stopped sync.Once
}

func newTaskConn(c mcp.Connection) *taskConn {
	tc := &taskConn{Connection: c, out: make(chan *jsonrpc.Request, 64), stop: make(chan struct{})}
	go tc.notifier()
	return tc
}

func (c *taskConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.Method == "tools/call" {
		if params, lifted := v1.LiftTaskParams(req.Params); lifted {
			req.Params = params
		}
	}
	return msg, err
}

func (c *taskConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.Connection.Write(ctx, msg)
}

// notify queues a notification; it never blocks. Status notifications are
// advisory (clients must keep polling), so one that finds the queue full is
// dropped.
func (c *taskConn) notify(method string, params any) {
	b, err := json.Marshal(params)
	if err != nil {
		return
	}
	select {
	case c.out <- &jsonrpc.Request{Method: method, Params: b}:
	default:
	}
}

func (c *taskConn) notifier() {
	for {
		select {
		case <-c.stop:
			return
		case n := <-c.out:
			_ = c.Write(context.Background(), n)
		}
	}
}

func (c *taskConn) close() { c.stopped.Do(func() { close(c.stop) }) }

// watchStatus arranges for status notifications of a task created by req,
// if req's session runs on a connection of [Server.Run].
func (s *Server) watchStatus(req mcp.Request, created *task.Task) {
	c, ok := s.conns.Load(req.GetSession())
	if !ok {
		return
	}
	s.targets.Store(created.ID, c)
	// The task may have changed before it was registered.
	if t, err := s.eng.Get(context.Background(), created.Owner, created.ID); err == nil && !t.LastUpdatedAt.Equal(created.LastUpdatedAt) {
		s.onTaskChange(t)
	}
}

// onTaskChange sends notifications/tasks/status for a watched task.
func (s *Server) onTaskChange(t *task.Task) {
	c, ok := s.targets.Load(t.ID)
	if !ok {
		return
	}
	if t.Status.Terminal() {
		s.targets.Delete(t.ID)
	}
	c.(*taskConn).notify("notifications/tasks/status", v1.FromTask(t))
}
