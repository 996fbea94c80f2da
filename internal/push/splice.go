package push

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"sync"
)

// ErrNoStream is returned by [Splice.Event] when the response is not (or
// no longer) an open event stream.
var ErrNoStream = errors.New("push: no open event stream")

// A Splice is the http.ResponseWriter given to a handler that answers
// with server-sent events (the go-sdk's Streamable HTTP handler): what the
// handler writes goes to the real response, and [Splice.Event] writes
// further events between the handler's own. Each of the go-sdk's events is
// one Write, so the two never interleave inside an event.
//
// A Splice forwards a handler's response that is not an event stream (an
// error, a JSON answer) untouched and refuses events for it.
type Splice struct {
	w http.ResponseWriter

	// Filter, if set, sees the data of each event the handler writes
	// and returns what to write instead (nil: hold the event back).
	Filter func(data []byte) []byte

	mu      sync.Mutex
	wrote   bool
	stream  bool // the response is an open text/event-stream
	closed  bool
	started chan struct{}
}

// NewSplice returns a Splice writing to w.
func NewSplice(w http.ResponseWriter) *Splice {
	return &Splice{w: w, started: make(chan struct{})}
}

// Header returns the real response's header.
func (s *Splice) Header() http.Header { return s.w.Header() }

// WriteHeader writes the real response's status.
func (s *Splice) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeHeaderLocked(code)
}

func (s *Splice) writeHeaderLocked(code int) {
	if s.wrote {
		return
	}
	s.wrote = true
	ct := s.w.Header().Get("Content-Type")
	s.stream = code == http.StatusOK && strings.HasPrefix(ct, "text/event-stream")
	s.w.WriteHeader(code)
	close(s.started)
}

// Write writes the handler's bytes: an event of an event stream passes
// through Filter.
func (s *Splice) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeHeaderLocked(http.StatusOK)
	if s.closed {
		return 0, ErrNoStream
	}
	out := p
	if s.stream && s.Filter != nil {
		if data, ok := eventData(p); ok {
			data = s.Filter(data)
			if data == nil {
				return len(p), nil
			}
			out = replaceData(p, data)
		}
	}
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush flushes the real response.
func (s *Splice) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = http.NewResponseController(s.w).Flush()
}

// Unwrap returns the real response, for http.ResponseController.
func (s *Splice) Unwrap() http.ResponseWriter { return s.w }

// Started is closed once the handler has written its response's status.
func (s *Splice) Started() <-chan struct{} { return s.started }

// Streaming reports whether the response is an open event stream that
// [Splice.Event] may write to.
func (s *Splice) Streaming() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream && !s.closed
}

// Begin writes and flushes the response's status now if the handler has set its
// headers for an event stream but written nothing yet (the go-sdk answers
// a POST so, with the status going out with its first event), so that
// events may be written before the handler's first. Call it only once the
// handler is known to have set its headers (e.g. from the handler of the
// request, which the go-sdk runs after setting them): the header map is
// the handler's until then.
func (s *Splice) Begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.wrote && !s.closed && strings.HasPrefix(s.w.Header().Get("Content-Type"), "text/event-stream") {
		s.writeHeaderLocked(http.StatusOK)
		// Sent now: the client knows its stream is open even if no event
		// comes before the answer (its questions may go on another
		// stream).
		_ = http.NewResponseController(s.w).Flush()
	}
}

// Event writes one message event carrying data (a JSON-RPC message) and
// flushes it.
func (s *Splice) Event(data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stream || s.closed {
		return ErrNoStream
	}
	var b bytes.Buffer
	b.Grow(len(data) + 24)
	b.WriteString("event: message\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	if _, err := s.w.Write(b.Bytes()); err != nil {
		s.closed = true
		return err
	}
	if err := http.NewResponseController(s.w).Flush(); err != nil {
		s.closed = true
		return err
	}
	return nil
}

// Close refuses every later write: the handler serving the response is
// about to return.
func (s *Splice) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
}

// eventData returns the data of one server-sent event (a single data line,
// as the go-sdk writes them).
func eventData(ev []byte) ([]byte, bool) {
	for line := range bytes.SplitSeq(ev, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			return d, true
		}
	}
	return nil, false
}

// replaceData returns the event ev with its data line replaced by data.
func replaceData(ev, data []byte) []byte {
	var b bytes.Buffer
	for line := range bytes.SplitSeq(bytes.TrimRight(ev, "\n"), []byte("\n")) {
		if bytes.HasPrefix(line, []byte("data: ")) {
			b.WriteString("data: ")
			b.Write(data)
		} else {
			b.Write(line)
		}
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes()
}
