package adapter

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectInMemory connects a client named name to srv in memory, and
// returns both ends.
func connectInMemory(ctx context.Context, srv *mcp.Server, name string) (*mcp.ServerSession, *mcp.ClientSession, error) {
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		return nil, nil, err
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		ss.Close()
		return nil, nil, err
	}
	return ss, cs, nil
}

// OwnSession is a session of the server's own, on which the work of the
// tasks the fast lane creates, and re-runs, call their tools: an
// in-memory client connected at the first use, and again at the next use
// after it closed or could not connect. The zero value is ready.
type OwnSession struct {
	mu     sync.Mutex
	ss     *mcp.ServerSession
	cs     *mcp.ClientSession
	closed bool // by Close: no other is connected
}

// Get returns the session of srv, connecting one if there is none; nil if
// it could not be connected.
func (o *OwnSession) Get(srv *mcp.Server) *mcp.ServerSession {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ss != nil || o.closed {
		return o.ss
	}
	ss, cs, err := connectInMemory(context.Background(), srv, "mcptask-lane")
	if err != nil {
		return nil
	}
	o.ss, o.cs = ss, cs
	go func() {
		// Closed by anyone (the program closing the server's sessions,
		// say): the next use connects another.
		_ = ss.Wait()
		o.mu.Lock()
		if o.ss == ss {
			o.ss, o.cs = nil, nil
		}
		o.mu.Unlock()
		cs.Close()
	}()
	return ss
}

// Connected reports whether ss is the session connected now.
func (o *OwnSession) Connected(ss *mcp.ServerSession) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ss == ss
}

// Close closes the session, if one is connected; none is connected
// afterwards.
func (o *OwnSession) Close() {
	o.mu.Lock()
	ss, cs := o.ss, o.cs
	o.ss, o.cs, o.closed = nil, nil, true
	o.mu.Unlock()
	if cs != nil {
		cs.Close()
		ss.Close()
	}
}
