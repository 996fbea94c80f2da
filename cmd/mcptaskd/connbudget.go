package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptask/mcptask/internal/httpguard"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// Connection budgets (issue 25, H2): with authentication, the open
// connections of one source IP that no request has authenticated yet, and
// those of one principal, are capped, so that one source (or one token)
// cannot take every connection -max-connections allows and with them
// /healthz and the other clients.
const (
	// defaultConnsPerSource is -max-connections-per-source's default.
	defaultConnsPerSource = 64
	// defaultConnsPerPrincipal is -max-connections-per-principal's default.
	defaultConnsPerPrincipal = 128
	// maxRefusing bounds the connections being refused at once (each is
	// answered 429 and closed within refusalLinger); past it, a connection
	// over its budget is closed without an answer.
	maxRefusing = 256
)

// refusedConnAnswer is the answer to a connection over its source's
// budget.
var refusedConnAnswer = func() string {
	const msg = "too many connections from this source; retry later\n"
	return "HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nRetry-After: 1\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\nContent-Length: " + strconv.Itoa(len(msg)) + "\r\n\r\n" + msg
}()

// connBudget is the listener's accounting: every connection counts
// against one key, "src:IP" until a request on it authenticates, then
// "principal:USERID".
type connBudget struct {
	perSource, perPrincipal int // 0: no cap
	log                     *slog.Logger

	mu   sync.Mutex
	open map[string]int

	refusing atomic.Int32
	refused  atomic.Int64 // refusals since the last log record
	lastLog  atomic.Int64 // unix nanoseconds of the last log record
}

// budgetConn is a connection the budget counts.
type budgetConn struct {
	net.Conn
	b    *connBudget
	mu   sync.Mutex
	key  string // the budget it counts against; "" once closed
	done func() // releases the slot of -max-connections
}

// Close releases the connection's budget and slot, once.
func (c *budgetConn) Close() error {
	c.mu.Lock()
	key := c.key
	c.key = ""
	c.mu.Unlock()
	if key != "" {
		c.b.release(key)
		c.done()
	}
	return c.Conn.Close()
}

// take counts one more connection against key, unless its cap is reached.
func (b *connBudget) take(key string, limit int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if limit > 0 && b.open[key] >= limit {
		return false
	}
	b.open[key]++
	return true
}

func (b *connBudget) release(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open[key]--; b.open[key] <= 0 {
		delete(b.open, key)
	}
}

// noteRefused logs refusals: the first, then at most one record every 10
// seconds with the count, so that a flood does not flood the log.
func (b *connBudget) noteRefused(what string, attrs ...any) {
	n := b.refused.Add(1)
	now := time.Now().UnixNano()
	last := b.lastLog.Load()
	if now-last < int64(10*time.Second) || !b.lastLog.CompareAndSwap(last, now) {
		return
	}
	b.refused.Add(-n)
	b.log.Warn("connection budget: "+what, append(attrs, "refused", n)...)
}

// budgetListener caps the connections served at once (max, 0: no cap:
// past it, connections wait in the kernel's queue, as
// netutil.LimitListener does) and the unauthenticated ones of each
// source IP (past that, a connection is answered 429 with Connection:
// close and closed).
type budgetListener struct {
	net.Listener
	b      *connBudget
	sem    chan struct{} // nil: no cap
	closed chan struct{}
	once   sync.Once
}

func newBudgetListener(ln net.Listener, max int, b *connBudget) *budgetListener {
	l := &budgetListener{Listener: ln, b: b, closed: make(chan struct{})}
	if max > 0 {
		l.sem = make(chan struct{}, max)
	}
	return l
}

// Accept returns the next connection within the budgets.
func (l *budgetListener) Accept() (net.Conn, error) {
	for {
		done := func() {}
		if l.sem != nil {
			select {
			case l.sem <- struct{}{}:
				done = sync.OnceFunc(func() { <-l.sem })
			case <-l.closed:
				return nil, net.ErrClosed
			}
		}
		c, err := l.Listener.Accept()
		if err != nil {
			done()
			return nil, err
		}
		key := "src:" + httpguard.SourceIP(c.RemoteAddr().String())
		if !l.b.take(key, l.b.perSource) {
			done()
			l.b.noteRefused("a connection over its source's budget was refused (-max-connections-per-source)",
				"source", httpguard.SourceIP(c.RemoteAddr().String()), "max", l.b.perSource)
			l.b.refuse(c)
			continue
		}
		return &budgetConn{Conn: c, b: l.b, key: key, done: done}, nil
	}
}

// Close stops Accept.
func (l *budgetListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// refuse answers c 429 and closes it, reading what the client sent for
// up to refusalLinger first (without, the close may reset the connection
// before the client reads the answer).
func (b *connBudget) refuse(c net.Conn) {
	if b.refusing.Add(1) > maxRefusing {
		b.refusing.Add(-1)
		c.Close()
		return
	}
	go func() {
		defer b.refusing.Add(-1)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refusalLinger))
		if _, err := c.Write([]byte(refusedConnAnswer)); err != nil {
			return
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
}

// connKey is the context key of a request's *budgetConn.
type connKey struct{}

// connContext records c in its requests' context (http.Server.ConnContext).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if bc, ok := c.(*budgetConn); ok {
		return context.WithValue(ctx, connKey{}, bc)
	}
	return ctx
}

// principalBudget moves the connection of an authenticated request from
// its source's budget to its principal's; a principal over its budget is
// answered 429 with Connection: close (and the connection closed). It
// goes after the authentication middleware; requests of connections the
// budget does not count (an in-process server) pass.
func (b *connBudget) principalBudget(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(connKey{}).(*budgetConn)
		info := auth.TokenInfoFromContext(r.Context())
		if c == nil || info == nil || info.UserID == "" {
			next.ServeHTTP(w, r)
			return
		}
		key := "principal:" + info.UserID
		c.mu.Lock()
		ok := c.key == key || c.key == ""
		if !ok && b.take(key, b.perPrincipal) {
			b.release(c.key)
			c.key, ok = key, true
		}
		c.mu.Unlock()
		if !ok {
			b.noteRefused("a connection over its principal's budget was refused (-max-connections-per-principal)",
				"user", info.UserID, "max", b.perPrincipal)
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("too many connections of this principal (at most %d); retry later", b.perPrincipal), http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}
