package wire2026

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"

	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/internal/push"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// listenMessage is the part of a subscriptions/listen request read here;
// the go-sdk decodes the rest (and drops taskIds, which it does not know).
type listenMessage struct {
	JSONRPC string                     `json:"jsonrpc"`
	ID      json.RawMessage            `json:"id"`
	Method  string                     `json:"method"`
	Params  map[string]json.RawMessage `json:"params"`
}

// ServeListen serves a subscriptions/listen request whose
// params.notifications names taskIds, and reports whether it did (false:
// the request is not one, and nothing was written). body is the request's
// body, already read; sdk is the go-sdk's stateless handler.
//
// The stream is the go-sdk's (which serves the notification types it
// knows) with this wire's part spliced in: the acknowledgement also lists
// the task IDs agreed (the requester's own, up to the per-stream cap;
// another requester's ID is not agreed, exactly like an unknown one), and
// each change of an agreed task is sent as notifications/tasks carrying
// the task as tasks/get returns it and the stream's subscription ID in
// _meta, starting with its state at the time of the request. The stream
// ends with the listen's result when every agreed task has ended and the
// go-sdk's part has nothing left, when the server shuts down
// ([Wire.Close]), or when the client goes away.
func (w *Wire) ServeListen(rw http.ResponseWriter, r *http.Request, body []byte, sdk http.Handler) bool {
	var msg listenMessage
	if json.Unmarshal(body, &msg) != nil || msg.Method != wire.MethodSubscriptionsListen || len(msg.ID) == 0 {
		return false
	}
	var notes map[string]json.RawMessage
	if json.Unmarshal(msg.Params["notifications"], &notes) != nil {
		return false
	}
	rawIDs, ok := notes["taskIds"]
	if !ok {
		return false
	}
	var meta map[string]any
	_ = json.Unmarshal(msg.Params["_meta"], &meta)
	ctx := r.Context()
	if !ext2026.Declares(meta) {
		writeError(rw, msg.ID, http.StatusBadRequest, ext2026.MissingCapability("task notifications on subscriptions/listen"))
		return true
	}
	var ids []string
	if err := json.Unmarshal(rawIDs, &ids); err != nil {
		writeError(rw, msg.ID, http.StatusBadRequest, adapter.InvalidParams("params.notifications.taskIds must be an array of task IDs"))
		return true
	}
	req := &mcp.ServerRequest[*mcp.SubscriptionsListenParams]{
		Params: &mcp.SubscriptionsListenParams{Meta: meta},
		Extra:  &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(ctx), Header: r.Header},
	}
	if err := w.c.AllowRequest(ctx, wire.MethodSubscriptionsListen, req); err != nil {
		writeError(rw, msg.ID, http.StatusOK, err)
		return true
	}
	owner := w.c.Requester(ctx, req)
	release, err := w.acquireStream(ctx, owner)
	if err != nil {
		writeError(rw, msg.ID, http.StatusOK, err)
		return true
	}
	defer release()
	agreed := w.agree(ctx, owner, ids)

	// The go-sdk serves the request without taskIds.
	delete(notes, "taskIds")
	msg.Params["notifications"], _ = json.Marshal(notes)
	stripped, err := json.Marshal(msg)
	if err != nil {
		return false
	}
	w.stream(rw, r, sdk, stripped, msg.ID, owner, agreed)
	return true
}

// agree returns the task IDs of ids that owner may follow, without
// duplicates, up to the per-stream cap. A refused ID is audited as a
// denied lookup, like tasks/get of it.
func (w *Wire) agree(ctx context.Context, owner task.Owner, ids []string) []task.ID {
	agreed := []task.ID{}
	for _, raw := range ids {
		if len(agreed) == w.push.MaxTasksPerStream {
			break
		}
		id, err := task.ParseID(raw)
		if err != nil || slices.Contains(agreed, id) {
			continue
		}
		if _, err := w.c.Engine().Get(ctx, owner, id); err != nil {
			_ = w.c.EngineError(ctx, wire.MethodSubscriptionsListen, owner, id, err)
			continue
		}
		agreed = append(agreed, id)
	}
	return agreed
}

// stream runs the listen stream (see ServeListen).
func (w *Wire) stream(rw http.ResponseWriter, r *http.Request, sdk http.Handler, body, rawID json.RawMessage, owner task.Owner, agreed []task.ID) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(w.base, cancel) // shutdown ends the stream
	defer stop()

	sp := push.NewSplice(rw)
	var (
		mu     sync.Mutex
		held   []byte // the go-sdk's answer to the listen, written last
		acked  = make(chan struct{})
		ackOne sync.Once
	)
	sp.Filter = func(data []byte) []byte {
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			return data
		}
		if _, isResp := m["id"]; isResp && m["method"] == nil {
			mu.Lock()
			held = slices.Clone(data)
			mu.Unlock()
			return nil
		}
		var method string
		_ = json.Unmarshal(m["method"], &method)
		if method != wire.MethodSubscriptionsAcknowledged {
			return data
		}
		var params map[string]json.RawMessage
		var notes map[string]any
		if json.Unmarshal(m["params"], &params) == nil && json.Unmarshal(params["notifications"], &notes) == nil {
			if notes == nil {
				notes = map[string]any{}
			}
			notes["taskIds"] = agreed
			params["notifications"], _ = json.Marshal(notes)
			m["params"], _ = json.Marshal(params)
			data, _ = json.Marshal(m)
		}
		ackOne.Do(func() { close(acked) })
		return data
	}

	sdkReq := r.Clone(ctx)
	sdkReq.Body = io.NopCloser(bytes.NewReader(body))
	sdkReq.ContentLength = int64(len(body))
	sdkDone := make(chan struct{})
	go func() {
		defer close(sdkDone)
		sdk.ServeHTTP(sp, sdkReq)
	}()

	select {
	case <-acked:
	case <-sdkDone:
	}
	select {
	case <-acked:
		// The go-sdk may well have answered already (nothing of its own
		// agreed): its answer is held back until the tasks end.
	default:
		// Refused before any acknowledgement (the go-sdk wrote its
		// error), or answered without one.
		mu.Lock()
		defer mu.Unlock()
		if held != nil {
			_ = sp.Event(held)
		}
		sp.Close()
		return
	}

	var followers sync.WaitGroup
	for _, id := range agreed {
		followers.Add(1)
		go func() {
			defer followers.Done()
			_ = push.Follow(ctx, w.c.Engine(), owner, id, w.push, nil, func(t *task.Task) error {
				n, err := w.notification(ctx, owner, t, rawID)
				if err != nil {
					return nil
				}
				return sp.Event(n)
			})
		}()
	}
	followed := make(chan struct{})
	go func() { followers.Wait(); close(followed) }()

	select {
	case <-followed:
		<-sdkDone // its own subscriptions, if any, run until the client goes
	case <-ctx.Done():
	}
	cancel()
	followers.Wait()
	<-sdkDone
	if r.Context().Err() != nil {
		sp.Close()
		return // the client went away: nobody reads the end
	}
	mu.Lock()
	end := held
	mu.Unlock()
	if end == nil {
		end, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: idOf(rawID), Result: listenResult(rawID)})
	}
	_ = sp.Event(end)
	sp.Close()
}

// notification is the notifications/tasks message of t on the stream of
// the listen request rawID: the task as tasks/get answers it, its
// parent and children too (a handed-out outcome is audited the same
// way).
func (w *Wire) notification(ctx context.Context, owner task.Owner, t *task.Task, rawID json.RawMessage) ([]byte, error) {
	w.c.AuditOutcome(ctx, wire.MethodSubscriptionsListen, owner, t)
	res := ext2026.Detailed(w.c.Presented(t))
	res.Meta = w.c.WithTree(ctx, t, w.c.WithEvidence(ctx, owner, t, res.Meta))
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[wire.MetaSubscriptionID] = rawID
	params, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	return jsonrpc.EncodeMessage(&jsonrpc.Request{Method: wire.MethodTasks, Params: params})
}

// listenResult is the result that ends a listen stream.
func listenResult(rawID json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"resultType": ext2026.ResultTypeComplete,
		"_meta":      map[string]any{wire.MetaSubscriptionID: rawID},
	})
	return b
}

// idOf decodes a raw JSON-RPC ID (a string or a number) as the go-sdk
// decodes request IDs.
func idOf(raw json.RawMessage) jsonrpc.ID {
	msg, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":` + string(raw) + `,"result":{}}`))
	if resp, ok := msg.(*jsonrpc.Response); err == nil && ok {
		return resp.ID
	}
	return jsonrpc.ID{}
}

// writeError answers a request with a JSON-RPC error, as application/json
// with the HTTP status the 2026-07-28 wire gives it.
func writeError(rw http.ResponseWriter, rawID json.RawMessage, status int, err error) {
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) {
		jerr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	b, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: idOf(rawID), Error: jerr})
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_, _ = rw.Write(b)
}

// acquireStream counts a stream of owner against the per-requester cap.
func (w *Wire) acquireStream(ctx context.Context, owner task.Owner) (release func(), err error) {
	w.smu.Lock()
	defer w.smu.Unlock()
	if w.push.MaxStreams > 0 && w.streams[owner] >= w.push.MaxStreams {
		return nil, w.c.TooManyStreams(ctx, owner, w.push.MaxStreams)
	}
	w.streams[owner]++
	return func() {
		w.smu.Lock()
		defer w.smu.Unlock()
		if w.streams[owner]--; w.streams[owner] <= 0 {
			delete(w.streams, owner)
		}
	}, nil
}

// Close ends every listen stream, each with its result.
func (w *Wire) Close() { w.stop() }
