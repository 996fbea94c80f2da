package client

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Task notifications pushed by the server spare the polls of a wait:
//
//   - 2025-11-25: a server that advertises wire.ExtensionTaskNotifications
//     sends notifications/tasks/status for the tasks a session created or
//     read, on the connection itself (stdio, any Connect transport) or on
//     the session's standalone GET streams (Streamable HTTP). The edge
//     intercepts them (the go-sdk client knows no such method) and hands
//     them to the waits of their task through the pushHub, which also
//     tracks whether the path they come on is up.
//   - 2026-07-28: each wait opens a subscriptions/listen stream for its
//     task (listen.go).
//
// While notifications flow, a wait polls only every safetyPoll, in case one
// was lost; when the path is down it polls at the server's interval.

// safetyPoll is the pause between two polls of a wait that receives its
// task's notifications: a safety net, not the way the wait learns of
// changes.
func safetyPoll(suggested time.Duration) time.Duration {
	return max(30*time.Second, 10*suggested)
}

// pathWait bounds how long a 2025-11-25 wait over Streamable HTTP waits
// for a standalone GET stream being opened before it starts (polling when
// the stream does not come).
const pathWait = 2 * time.Second

// noteSlot holds the latest notification of one task for one wait: a
// notification carries the whole state, so a newer one replaces an older
// one not read yet.
type noteSlot struct {
	mu    sync.Mutex
	raw   json.RawMessage
	ready chan struct{} // signalled (capacity 1) when raw is set
}

func newNoteSlot() *noteSlot { return &noteSlot{ready: make(chan struct{}, 1)} }

func (s *noteSlot) put(raw json.RawMessage) {
	s.mu.Lock()
	s.raw = raw
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// take returns the latest notification not read yet, nil if none.
func (s *noteSlot) take() json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw := s.raw
	s.raw = nil
	return raw
}

// pushHub delivers the 2025-11-25 status notifications the edge
// intercepts to the waits of their tasks, and tracks the path they come
// on.
type pushHub struct {
	mu   sync.Mutex
	subs map[string]map[*noteSlot]bool // task ID → the slots of its waits
	// always is set when the connection itself carries notifications
	// (Connect); else they come on standalone GET streams (Dial).
	always bool
	// streams counts the open GET event streams; opening those being
	// asked for.
	streams, opening int
	// changed is closed, and replaced, at each change of the path.
	changed chan struct{}
}

func (h *pushHub) init() {
	h.subs = map[string]map[*noteSlot]bool{}
	h.changed = make(chan struct{})
}

// subscribe returns a slot that receives the notifications of task id
// until unsubscribe.
func (h *pushHub) subscribe(id string) *noteSlot {
	s := newNoteSlot()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[id] == nil {
		h.subs[id] = map[*noteSlot]bool{}
	}
	h.subs[id][s] = true
	return s
}

func (h *pushHub) unsubscribe(id string, s *noteSlot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[id], s)
	if len(h.subs[id]) == 0 {
		delete(h.subs, id)
	}
}

// path reports whether notifications can arrive now, whether a GET
// stream is being opened, and a channel closed at the path's next change.
func (h *pushHub) path() (up, opening bool, changed <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.always || h.streams > 0, h.opening > 0, h.changed
}

// update applies fn to the path's state and signals the change.
func (h *pushHub) update(fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn()
	close(h.changed)
	h.changed = make(chan struct{})
}

// deliver hands the params of a notifications/tasks/status to the waits
// of its task.
func (h *pushHub) deliver(params json.RawMessage) {
	var p struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(params, &p) != nil || p.TaskID == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[p.TaskID] {
		s.put(params)
	}
}

// statusNote returns the params of data when it is an encoded
// notifications/tasks/status.
func statusNote(data []byte) (json.RawMessage, bool) {
	if !bytes.Contains(data, []byte(wire.MethodTaskStatus)) {
		return nil, false
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil, false
	}
	return statusNoteMsg(msg)
}

// statusNoteMsg returns the params of msg when it is a
// notifications/tasks/status.
func statusNoteMsg(msg jsonrpc.Message) (json.RawMessage, bool) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.IsCall() || req.Method != wire.MethodTaskStatus {
		return nil, false
	}
	return req.Params, true
}

// trackedBody is the body of an open GET event stream: its end (EOF, an
// error, or Close) sets the path down, once.
type trackedBody struct {
	io.ReadCloser
	once sync.Once
	down func()
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.down)
	}
	return n, err
}

func (b *trackedBody) Close() error {
	b.once.Do(b.down)
	return b.ReadCloser.Close()
}
