package faultproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// TCP is a TCP proxy for fault-injection tests: it forwards every
// connection to one target (a database, a server) and, on demand, cuts
// them all and refuses new ones, as a restart of the target or a network
// outage does, for the clients behind this proxy only.
type TCP struct {
	// Addr is the proxy's host:port on loopback: give it to the client
	// instead of the target's.
	Addr string

	target  string
	ln      net.Listener
	down    atomic.Bool
	refused atomic.Int64 // connections refused while down
	cut     atomic.Int64 // live connections cut

	mu    sync.Mutex
	conns map[net.Conn]net.Conn // client side -> target side
	wg    sync.WaitGroup
}

// NewTCP starts a proxy on a free loopback port in front of target
// (host:port).
func NewTCP(target string) (*TCP, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &TCP{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]net.Conn{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *TCP) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if p.down.Load() {
			p.refused.Add(1)
			c.Close()
			continue
		}
		t, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		// Registered under the lock SetDown's CutAll takes, checking down
		// again: a connection accepted while SetDown(true) runs is cut.
		p.mu.Lock()
		if p.down.Load() {
			p.mu.Unlock()
			p.refused.Add(1)
			c.Close()
			t.Close()
			continue
		}
		p.conns[c] = t
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, t, c)
		go p.pipe(t, c, c)
	}
}

// pipe copies from src to dst until either side fails, then closes both.
func (p *TCP) pipe(dst, src net.Conn, client net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, client)
	p.mu.Unlock()
}

// SetDown(true) cuts every live connection and refuses new ones (they
// are accepted and closed at once, as a port nobody listens on would
// refuse them) until SetDown(false).
func (p *TCP) SetDown(down bool) {
	p.down.Store(down)
	if down {
		p.CutAll()
	}
}

// CutAll closes every live connection at once, both ways, without a
// word to either side.
func (p *TCP) CutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, t := range p.conns {
		c.Close()
		t.Close()
		delete(p.conns, c)
		p.cut.Add(1)
	}
}

// Refused returns how many connections were refused while down.
func (p *TCP) Refused() int64 { return p.refused.Load() }

// Cuts returns how many live connections were cut.
func (p *TCP) Cuts() int64 { return p.cut.Load() }

// Close stops the proxy, cuts its connections and waits for its
// goroutines.
func (p *TCP) Close() {
	p.ln.Close()
	p.CutAll()
	p.wg.Wait()
}
