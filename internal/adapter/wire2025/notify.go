package wire2025

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Serve serves one client of srv on t (e.g. &mcp.StdioTransport{}) until
// the client disconnects or ctx is done. The connection carries the
// `task` parameter of tools/call across the go-sdk (which drops params
// fields it does not know) and receives a notifications/tasks/status at
// each status change of the tasks created on it.
func (w *Wire) Serve(ctx context.Context, srv *mcp.Server, t mcp.Transport) error {
	tt := &transport{Transport: t}
	ss, err := srv.Connect(ctx, tt, nil)
	if err != nil {
		return err
	}
	c := tt.conn
	w.conns.Store(ss, c)
	defer func() {
		w.conns.Delete(ss)
		c.stop()
		w.targets.Range(func(id, target any) bool {
			if target == c {
				w.targets.Delete(id)
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

// transport wraps a go-sdk transport with [conn].
type transport struct {
	mcp.Transport
	conn *conn
}

func (t *transport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.conn = newConn(c)
	return t.conn, nil
}

// conn lifts the task parameter of incoming tools/call requests and
// interleaves task status notifications with the go-sdk's own writes. Its
// notifier goroutine lives as long as the connection: it stops when the
// connection is closed (by either side) or its reading fails.
type conn struct {
	mcp.Connection
	wmu     sync.Mutex // serialises writes: the go-sdk's and the notifier's
	out     chan *jsonrpc.Request
	done    chan struct{}
	stopped sync.Once
}

func newConn(c mcp.Connection) *conn {
	tc := &conn{Connection: c, out: make(chan *jsonrpc.Request, 64), done: make(chan struct{})}
	go tc.notifier()
	return tc
}

func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		c.stop() // the connection is over: nothing more can be written
		return msg, err
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == wire.MethodToolsCall {
		if params, lifted := v1.LiftTaskParams(req.Params); lifted {
			req.Params = params
		}
	}
	return msg, nil
}

func (c *conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.Connection.Write(ctx, msg)
}

// Close stops the notifier and closes the connection.
func (c *conn) Close() error {
	c.stop()
	return c.Connection.Close()
}

// notify queues a notification; it never blocks. Status notifications are
// advisory (clients must keep polling), so one that finds the queue full,
// or the connection closed, is dropped.
func (c *conn) notify(method string, params any) {
	b, err := json.Marshal(params)
	if err != nil {
		return
	}
	select {
	case <-c.done:
	case c.out <- &jsonrpc.Request{Method: method, Params: b}:
	default:
	}
}

func (c *conn) notifier() {
	for {
		select {
		case <-c.done:
			return
		case n := <-c.out:
			_ = c.Write(context.Background(), n)
		}
	}
}

func (c *conn) stop() { c.stopped.Do(func() { close(c.done) }) }

// watchStatus arranges for status notifications of a task created by req,
// if req's session runs on a connection of [Wire.Serve].
func (w *Wire) watchStatus(req mcp.Request, created *task.Task) {
	c, ok := w.conns.Load(req.GetSession())
	if !ok {
		return
	}
	w.targets.Store(created.ID, c)
	// The task may have changed before it was registered.
	if t, err := w.c.Engine().Get(context.Background(), created.Owner, created.ID); err == nil && !t.LastUpdatedAt.Equal(created.LastUpdatedAt) {
		w.OnTaskChange(t)
	}
}

// OnTaskChange sends notifications/tasks/status for a watched task; the
// owner of the wire registers it with the engine (engine.OnChange).
func (w *Wire) OnTaskChange(t *task.Task) {
	c, ok := w.targets.Load(t.ID)
	if !ok {
		return
	}
	if t.Status.Terminal() {
		w.targets.Delete(t.ID)
	}
	c.(*conn).notify(wire.MethodTaskStatus, v1.FromTask(t))
}
