package client

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Two edges carry the edge (edge.go) to the messages:
//
//   - Streamable HTTP ([Dial]): an http.RoundTripper under the go-sdk's
//     StreamableClientTransport. It rewrites request bodies, sets Mcp-Name
//     on tasks/* requests (the SDK sets it only for tools/call,
//     prompts/get and resources/read), and rewrites the JSON or SSE bodies
//     of the answers. Working below the SDK's own connection keeps all of
//     it intact (session state, protocol version header, standalone SSE
//     stream, reconnection), which a Connection wrapper would not: the SDK
//     tells its HTTP connection about the negotiated session through an
//     unexported interface that a wrapper cannot forward.
//   - Any other mcp.Transport ([Connect]): a Connection wrapper.

// edgeTransport wraps an mcp.Transport so that its connection passes every
// message through the edge.
type edgeTransport struct {
	inner mcp.Transport
	e     *edge
}

func (t *edgeTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &edgeConn{Connection: c, e: t.e}, nil
}

type edgeConn struct {
	mcp.Connection
	e *edge
}

func (c *edgeConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, err
		}
		if params, ok := statusNoteMsg(msg); ok {
			// A task notification is the client's, not the go-sdk's,
			// which knows no such method.
			c.e.hub.deliver(params)
			continue
		}
		if resp, ok := msg.(*jsonrpc.Response); ok {
			out, _ := c.e.incoming(resp)
			return out, nil
		}
		return msg, nil
	}
}

func (c *edgeConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok {
		msg, _ = c.e.outgoing(req)
	}
	return c.Connection.Write(ctx, msg)
}

// edgeRoundTripper is the edge of Streamable HTTP.
type edgeRoundTripper struct {
	base http.RoundTripper
	e    *edge
}

func (rt *edgeRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	// watch says whether the answer may hold a response the edge tracks:
	// that of this request, or (on a GET, which resumes a broken stream or
	// opens the standalone one) that of any tracked call.
	watch := req.Method == http.MethodGet && rt.e.expecting()
	if req.Method == http.MethodPost && req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		name := ""
		if msg, err := jsonrpc.DecodeMessage(body); err == nil {
			if r, ok := msg.(*jsonrpc.Request); ok {
				name = taskIDParam(r)
				watch = rt.e.tracks(r)
				if out, changed := rt.e.outgoing(r); changed {
					if b, err := jsonrpc.EncodeMessage(out); err == nil {
						body = b
					}
				}
			}
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		if name != "" && validHeaderValue(name) {
			// SEP-2243 routing: the server (or a gateway in front of it)
			// routes and checks tasks/* requests by the task ID.
			req.Header.Set("Mcp-Name", name)
		}
	}
	// A GET asking for an event stream opens a path of the server's
	// task notifications (the standalone stream, or a resumed one).
	stream := req.Method == http.MethodGet && strings.Contains(req.Header.Get("Accept"), "text/event-stream")
	if stream {
		rt.e.hub.update(func() { rt.e.hub.opening++ })
	}
	resp, err := rt.base.RoundTrip(req)
	if stream {
		up := err == nil && resp.StatusCode == http.StatusOK && resp.Body != nil &&
			mediaType(resp.Header.Get("Content-Type")) == "text/event-stream"
		rt.e.hub.update(func() {
			rt.e.hub.opening--
			if up {
				rt.e.hub.streams++
			}
		})
		if up {
			resp.Body = &trackedBody{ReadCloser: resp.Body, down: func() {
				rt.e.hub.update(func() { rt.e.hub.streams-- })
			}}
		}
	}
	if err != nil || resp.Body == nil {
		return resp, err
	}
	ct := mediaType(resp.Header.Get("Content-Type"))
	if ct == "text/event-stream" {
		resp.Body = &sseRewriter{src: bufio.NewReader(resp.Body), closer: resp.Body, rewrite: rt.e.streamRewrite(watch)}
		return resp, nil
	}
	if !watch {
		return resp, nil
	}
	switch ct {
	case "application/json":
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		body = rt.e.incomingRaw(body)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Del("Content-Length")
	}
	return resp, nil
}

// streamRewrite returns the rewrite of an event stream's events: every
// stream may carry task notifications, which the edge takes (dropping them
// from the stream); watch says whether the stream may hold a response the
// edge tracks.
func (e *edge) streamRewrite(watch bool) func([]byte) []byte {
	return func(data []byte) []byte {
		if params, ok := statusNote(data); ok {
			e.hub.deliver(params)
			return nil
		}
		if watch {
			return e.incomingRaw(data)
		}
		return data
	}
}

// mediaType returns the media type of a Content-Type header, "" if none.
func mediaType(header string) string {
	ct, _, _ := mime.ParseMediaType(header)
	return ct
}

// validHeaderValue reports whether s can be sent as a header value as is.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return s != ""
}

// sseRewriter passes a text/event-stream body through, event by event,
// rewriting the data of each event with rewrite, or dropping the event
// when rewrite returns nil. Events are handed on as
// soon as they are complete, so long-lived streams (a tasks/result that
// carries elicitation requests) flow unchanged.
type sseRewriter struct {
	src     *bufio.Reader
	closer  io.Closer
	rewrite func([]byte) []byte
	out     bytes.Buffer
	event   [][]byte // raw lines of the event being read, with line ends
	err     error
}

func (s *sseRewriter) Read(p []byte) (int, error) {
	for s.out.Len() == 0 && s.err == nil {
		s.step()
	}
	if s.out.Len() > 0 {
		return s.out.Read(p)
	}
	return 0, s.err
}

func (s *sseRewriter) Close() error { return s.closer.Close() }

// step reads one line and emits an event when it ends.
func (s *sseRewriter) step() {
	line, err := s.src.ReadBytes('\n')
	if len(line) > 0 {
		if len(bytes.TrimRight(line, "\r\n")) == 0 && err == nil {
			if s.flush() {
				s.out.Write(line)
			}
		} else {
			s.event = append(s.event, line)
		}
	}
	if err != nil {
		// An unfinished event is handed on as it came.
		for _, l := range s.event {
			s.out.Write(l)
		}
		s.event = nil
		s.err = err
	}
}

// flush emits the current event, its data rewritten when rewrite changes
// it, and reports whether it did (false: rewrite dropped it).
func (s *sseRewriter) flush() bool {
	defer func() { s.event = s.event[:0] }()
	var data [][]byte
	for _, l := range s.event {
		l = bytes.TrimRight(l, "\r\n")
		if v, ok := bytes.CutPrefix(l, []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(v, []byte(" ")))
		}
	}
	if len(data) > 0 {
		joined := bytes.Join(data, []byte("\n"))
		out := s.rewrite(joined)
		if out == nil {
			return false
		}
		if !bytes.Equal(out, joined) {
			for _, l := range s.event {
				if !bytes.HasPrefix(l, []byte("data:")) {
					s.out.Write(l)
				}
			}
			s.out.WriteString("data: ")
			s.out.Write(out)
			s.out.WriteString("\n")
			return true
		}
	}
	for _, l := range s.event {
		s.out.Write(l)
	}
	return true
}
