// Package faultproxy holds proxies for fault-injection tests, on loopback.
// [Proxy] sits between an MCP client and a server and loses the replies
// the test chooses, after the server has handled the request, as a
// network or a proxy failing at the worst moment does. [TCP] sits in front
// of any TCP server (PostgreSQL, say) and cuts its connections and refuses
// new ones on demand, as a restart of that server does.
package faultproxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
)

// Proxy forwards HTTP to one server. Requests pass untouched but for the
// JSON-RPC method chosen by [Proxy.LoseReplies]: each such request reaches
// the server, which answers it in full, and then the client's connection
// is cut without a byte of that answer.
type Proxy struct {
	// URL is the proxy's address, with the target's path: give it to the
	// client instead of the server's.
	URL string

	hs      *httptest.Server
	method  atomic.Pointer[string]
	unsent  atomic.Bool            // lose the requests themselves, unforwarded
	lose    atomic.Int64           // replies (or requests) still to lose
	match   atomic.Pointer[string] // if set, only requests whose body holds it are lost
	seen    atomic.Int64           // requests of the method that reached the server
	dropped atomic.Int64           // replies lost
	down    atomic.Bool            // every request is cut, unanswered and unforwarded
	cut     atomic.Int64           // requests cut while down
}

// New starts a proxy in front of target (an http:// URL on loopback).
func New(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	p := &Proxy{}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	rp.FlushInterval = -1 // event streams pass at once
	p.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.down.Load() {
			p.cut.Add(1)
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		var body []byte
		if r.Method == http.MethodPost {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		var msg struct {
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		m := p.method.Load()
		ok := m != nil && json.Unmarshal(body, &msg) == nil
		if ok && msg.Method == "" && (msg.Result != nil || msg.Error != nil) {
			msg.Method = Response
		}
		if sub := p.match.Load(); !ok || msg.Method != *m || sub != nil && !bytes.Contains(body, []byte(*sub)) {
			rp.ServeHTTP(w, r)
			return
		}
		if p.lose.Add(-1) < 0 {
			p.lose.Add(1)
			p.seen.Add(1)
			rp.ServeHTTP(w, r)
			return
		}
		if p.unsent.Load() {
			// Lose the request itself: the server never sees it.
			p.dropped.Add(1)
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		// Deliver the request, read the whole answer, and lose it.
		p.seen.Add(1)
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host, out.Host, out.RequestURI = u.Scheme, u.Host, u.Host, ""
		out.Body = io.NopCloser(bytes.NewReader(body))
		if resp, err := http.DefaultTransport.RoundTrip(out); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		p.dropped.Add(1)
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}))
	p.URL = p.hs.URL + u.Path
	return p, nil
}

// Response stands for the method of a JSON-RPC response the client sends
// (its answer to a server's request, e.g. an elicitation) in LoseReplies
// and LoseRequests.
const Response = "(response)"

// LoseReplies makes the proxy lose the answers of the next n requests of
// the JSON-RPC method (n < 0: all of them; 0: none).
func (p *Proxy) LoseReplies(method string, n int64) {
	p.match.Store(nil)
	p.unsent.Store(false)
	p.method.Store(&method)
	if n < 0 {
		n = 1 << 62
	}
	p.lose.Store(n)
}

// LoseRepliesWith is LoseReplies for the requests of method whose body
// contains sub only (e.g. the subscriptions/listen requests naming task
// IDs, and not the go-sdk client's own long-lived one).
func (p *Proxy) LoseRepliesWith(method, sub string, n int64) {
	p.LoseReplies(method, n)
	p.match.Store(&sub)
}

// LoseRequests makes the proxy lose the next n requests of the JSON-RPC
// method themselves (n < 0: all of them; 0: none): each is cut before it
// reaches the server, as a network failing on the way there does.
// Requests that reach the server are counted by [Proxy.Seen] either way.
func (p *Proxy) LoseRequests(method string, n int64) {
	p.LoseReplies(method, n)
	p.unsent.Store(true)
}

// SetDown cuts every request at once, without forwarding it (the server
// seems gone), until SetDown(false).
func (p *Proxy) SetDown(down bool) { p.down.Store(down) }

// CutConnections closes every client connection open now (an event
// stream the server is writing to included), as a network failure does.
func (p *Proxy) CutConnections() { p.hs.CloseClientConnections() }

// Cut returns how many requests were cut while the proxy was down.
func (p *Proxy) Cut() int64 { return p.cut.Load() }

// Seen returns how many requests of the chosen method reached the server.
func (p *Proxy) Seen() int64 { return p.seen.Load() }

// Lost returns how many answers (or, after LoseRequests, requests) the
// proxy lost.
func (p *Proxy) Lost() int64 { return p.dropped.Load() }

// Close stops the proxy and cuts its connections.
func (p *Proxy) Close() {
	p.hs.CloseClientConnections()
	p.hs.Close()
}
