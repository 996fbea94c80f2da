package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The 2026-07-28 wire pushes a task's changes on a subscriptions/listen
// stream whose params.notifications.taskIds names it: the server's first
// message acknowledges the IDs it agreed, then each notifications/tasks
// carries the task exactly as tasks/get returns it (its state at the time
// of the listen first, then one per change), and the listen's result ends
// the stream once every agreed task has ended. The go-sdk client has no
// such stream (it knows subscriptions/listen without taskIds, and does not
// hand unknown notifications on), so the client opens it itself, on the
// HTTP client the go-sdk uses (bearer token and edge included).

// listenAckTimeout bounds how long a listen waits for its
// acknowledgement.
const listenAckTimeout = 10 * time.Second

// listener opens listen streams on one Streamable HTTP endpoint.
type listener struct {
	hc   *http.Client
	url  string
	wire string
	info *mcp.Implementation
	ids  atomic.Int64
	// unsupported is set once the server answered that it serves no
	// subscriptions/listen: later waits poll without asking again.
	unsupported atomic.Bool
}

// listenStream is an open listen stream agreed for one task.
type listenStream struct {
	notes  *noteSlot     // the latest notifications/tasks params not read yet
	done   chan struct{} // closed when the stream has ended
	cancel context.CancelFunc
	opened time.Time
}

// close ends the stream and waits for its reader to return.
func (ls *listenStream) close() {
	ls.cancel()
	<-ls.done
}

// errNotAgreed is a listen whose acknowledgement did not agree the task.
var errNotAgreed = errors.New("the server did not agree to notify this task")

// open opens a listen stream for task id and returns it once the server
// has agreed the task. The stream lives until close or until ctx is done.
func (l *listener) open(ctx context.Context, id string) (*listenStream, error) {
	rid := l.ids.Add(1)
	meta := map[string]any{
		ext2026.MetaProtocolVersion:          l.wire,
		"io.modelcontextprotocol/clientInfo": l.info,
		ext2026.MetaClientCapabilities: map[string]any{
			"extensions": map[string]any{ext2026.ExtensionID: map[string]any{}},
		},
	}
	body, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": rid, "method": wire.MethodSubscriptionsListen,
		"params": map[string]any{
			"notifications": map[string]any{"taskIds": []string{id}},
			"_meta":         meta,
		},
	})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, l.url, bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", l.wire)
	req.Header.Set("Mcp-Method", wire.MethodSubscriptionsListen)
	// The answer's headers come at once; the acknowledgement is bounded
	// below.
	timer := time.AfterFunc(listenAckTimeout, cancel)
	defer timer.Stop()
	resp, err := l.hc.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		refusal := l.refusal(resp)
		resp.Body.Close()
		cancel()
		return nil, refusal
	}
	ls := &listenStream{notes: newNoteSlot(), done: make(chan struct{}), cancel: cancel, opened: time.Now()}
	acked := make(chan error, 1)
	go ls.read(resp.Body, id, acked)
	select {
	case err = <-acked:
	case <-ls.done:
		err = errors.New("the listen stream ended before its acknowledgement")
	}
	if err != nil {
		ls.close()
		return nil, err
	}
	return ls, nil
}

// refusal is the error of a listen answered otherwise than with a stream;
// it notes a server that serves no subscriptions/listen at all.
func (l *listener) refusal(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var m struct {
		Error *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &m)
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed ||
		(m.Error != nil && m.Error.Code == -32601) {
		l.unsupported.Store(true)
	}
	if m.Error != nil {
		return fmt.Errorf("subscriptions/listen refused (HTTP %d): %s", resp.StatusCode, m.Error.Message)
	}
	return fmt.Errorf("subscriptions/listen answered HTTP %d (%s)", resp.StatusCode, resp.Header.Get("Content-Type"))
}

// read reads the stream until it ends: the acknowledgement (reported on
// acked, nil when it agrees task id), then the task's notifications.
func (ls *listenStream) read(body io.ReadCloser, id string, acked chan<- error) {
	defer close(ls.done)
	defer body.Close()
	var ackOnce sync.Once
	ack := func(err error) { ackOnce.Do(func() { acked <- err }) }
	defer ack(errors.New("the listen stream ended before its acknowledgement"))
	r := bufio.NewReader(body)
	var data [][]byte
	for {
		line, err := r.ReadBytes('\n')
		if t := bytes.TrimRight(line, "\r\n"); len(t) == 0 && err == nil {
			if len(data) > 0 {
				if !ls.message(bytes.Join(data, []byte("\n")), id, ack) {
					return
				}
			}
			data = data[:0]
		} else if v, ok := bytes.CutPrefix(t, []byte("data:")); ok {
			data = append(data, bytes.TrimPrefix(v, []byte(" ")))
		}
		if err != nil {
			return
		}
	}
}

// message handles one message of the stream and reports whether the
// stream goes on.
func (ls *listenStream) message(data []byte, id string, ack func(error)) bool {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &m) != nil {
		return true
	}
	switch {
	case m.Method == wire.MethodSubscriptionsAcknowledged:
		var p struct {
			Notifications struct {
				TaskIDs []string `json:"taskIds"`
			} `json:"notifications"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if !slices.Contains(p.Notifications.TaskIDs, id) {
			ack(errNotAgreed)
			return false
		}
		ack(nil)
	case m.Method == wire.MethodTasks:
		var p struct {
			TaskID string `json:"taskId"`
		}
		if json.Unmarshal(m.Params, &p) == nil && p.TaskID == id {
			ls.notes.put(m.Params)
		}
	case m.Method == "" && len(m.ID) > 0:
		// The listen's result (or error) ends the stream.
		if m.Error != nil {
			ack(fmt.Errorf("subscriptions/listen refused: %s", m.Error.Message))
		}
		return false
	}
	return true
}
