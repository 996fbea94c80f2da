package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The go-sdk hands an upstream's notifications to a handler queue of
// their own, and its answers straight to the call that waits for them: a
// log message the upstream sent just before its answer may be handled
// after the call ended, when it belongs to no call and is dropped (the
// task lost its last log lines). So each session counts the log and
// progress notifications as they come off its connection, before the
// go-sdk sees them, and as its handlers take them; a call ends once every
// notification read before its answer was handled (notes.settle).

// settleTimeout bounds the wait of notes.settle: a notification the
// go-sdk never hands to a handler (one whose params do not decode, say)
// holds a call up that long, once.
const settleTimeout = 2 * time.Second

// notes counts a session's log and progress notifications.
type notes struct {
	mu      sync.Mutex
	read    int64         // taken off the connection
	handled int64         // taken by a handler
	changed chan struct{} // closed (and replaced) when handled grows
}

// counted reports whether the go-sdk hands method to a handler of the
// session whose notifications notes counts.
func counted(method string) bool {
	return method == "notifications/message" || method == "notifications/progress"
}

// sawRead counts a notification taken off the connection.
func (n *notes) sawRead() {
	n.mu.Lock()
	n.read++
	n.mu.Unlock()
}

// sawHandled counts a notification a handler took.
func (n *notes) sawHandled() {
	n.mu.Lock()
	n.handled++
	if n.changed != nil {
		close(n.changed)
		n.changed = nil
	}
	n.mu.Unlock()
}

// settle waits until every notification read so far was handled, ctx is
// done, or settleTimeout passed (then the count starts again from here).
func (n *notes) settle(ctx context.Context) {
	var timeout <-chan time.Time
	n.mu.Lock()
	defer n.mu.Unlock()
	target := n.read
	for n.handled < target {
		if n.changed == nil {
			n.changed = make(chan struct{})
		}
		ch := n.changed
		if timeout == nil {
			t := time.NewTimer(settleTimeout)
			defer t.Stop()
			timeout = t.C
		}
		n.mu.Unlock()
		select {
		case <-ch:
			n.mu.Lock()
		case <-ctx.Done():
			n.mu.Lock()
			return
		case <-timeout:
			n.mu.Lock()
			n.handled = max(n.handled, target)
			return
		}
	}
}

// countingTransport is a stdio upstream's transport whose connection
// counts the notifications it reads (see notes).
type countingTransport struct {
	mcp.Transport
	n *notes
}

func (t countingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return countingConn{Connection: c, n: t.n}, nil
}

type countingConn struct {
	mcp.Connection
	n *notes
}

func (c countingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if r, ok := m.(*jsonrpc.Request); ok && err == nil && !r.ID.IsValid() && counted(r.Method) {
		c.n.sawRead()
	}
	return m, err
}

// countingBody is the body of an HTTP upstream's event stream: it counts
// the notifications of the events the go-sdk reads from it (see notes).
// An event is counted when its ending blank line is read, before the
// go-sdk can parse it. Only the first maxNoteEvent bytes of an event are
// kept, and parsed only if they name a notification counted: an answer,
// however large, costs a scan for line ends.
type countingBody struct {
	io.ReadCloser
	n    *notes
	line []byte // the part of a line read so far, up to maxNoteEvent
	size int    // the length of that part, kept or not
	data []byte // the data lines of the current event, up to maxNoteEvent
	over bool   // the current event is longer than maxNoteEvent
}

// maxNoteEvent bounds the events countingBody counts: a log message or
// progress notification longer is not counted (its call may end before
// it is handled, as without the count).
const maxNoteEvent = 64 << 10

func (b *countingBody) Read(p []byte) (int, error) {
	k, err := b.ReadCloser.Read(p)
	b.scan(p[:k])
	return k, err
}

func (b *countingBody) scan(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			b.keep(p)
			return
		}
		b.keep(p[:i])
		p = p[i+1:]
		line := bytes.TrimSuffix(b.line, []byte("\r"))
		switch {
		case b.size == 0 || b.size == 1 && len(line) == 0:
			b.event() // a blank line (or "\r") ends the event
		case b.over:
		case bytes.HasPrefix(line, []byte("data:")):
			b.data = append(b.data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
			b.data = append(b.data, '\n')
			b.over = len(b.data) > maxNoteEvent
		}
		b.line, b.size = b.line[:0], 0
	}
}

// keep adds p to the line being read, unless the event is too long to
// be counted.
func (b *countingBody) keep(p []byte) {
	b.size += len(p)
	if b.over {
		return
	}
	if len(b.line)+len(p) > maxNoteEvent {
		b.over = true
		return
	}
	b.line = append(b.line, p...)
}

func (b *countingBody) event() {
	defer func() { b.data, b.over = b.data[:0], false }()
	if b.over || !bytes.Contains(b.data, []byte(`"notifications/`)) {
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(b.data, &m) == nil && m.ID == nil && counted(m.Method) {
		b.n.sawRead()
	}
}

// eventStream reports whether an HTTP answer's Content-Type is an event
// stream.
func eventStream(contentType string) bool {
	mt, _, _ := bytes.Cut([]byte(contentType), []byte(";"))
	return string(bytes.TrimSpace(mt)) == "text/event-stream"
}
