package wire2025

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resultPoll is how often a blocked tasks/result re-reads its task, in case
// a change happened where this engine could not see it.
const resultPoll = time.Second

// result blocks until the task is terminal, then returns exactly what the
// plain call would have returned, with the related-task _meta. While it
// waits, it forwards the task's input requests to the client on this
// request's stream and delivers the answers to the task.
func (w *Wire) result(ctx context.Context, r *adapter.Request) (mcp.Result, error) {
	id, err := taskID(r)
	if err != nil {
		return nil, err
	}
	eng := w.c.Engine()
	owner := w.c.Requester(ctx, r.Req)
	forwarded := map[string]bool{}
	// A forward whose answer was refused (e.g. outside the requested
	// schema) is asked again, not before notBefore: a client that answers
	// badly at once is not asked in a tight loop.
	refused := make(chan string, 16)
	notBefore := map[string]time.Time{}
	refusals := map[string]int{}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops forwards still waiting for the client
	w.beginResultStreams(r.Session, id)
	var p *sessionPush
	ended := false
	if r.Session != nil {
		// While this request waits, it asks the task's input requests,
		// not the session's own channel (ask.go): each once per session.
		p = w.session(r.Session)
		done := p.waitResult(id)
		defer func() {
			done()
			if !ended {
				// Given up before the task ended: what it was asking
				// may go on the session's channel now.
				go w.askOnSession(r.Session, id)
			}
		}()
	}
	// The stream this request answers on: when its connection is cut,
	// the go-sdk keeps the request open (for a resumption that may never
	// come), but the requests forwarded on it can no longer be answered
	// there; they are stopped, and asked again by the client's next
	// tasks/result.
	streamGone := w.resultStreamClosed(r.Session, id)
	for {
		changed := eng.Watch(id)
		v, err := eng.View(ctx, owner, id, ResultView)
		if err != nil {
			return nil, w.c.EngineError(ctx, r.Method, owner, id, err)
		}
		t := v.Task
		if t.Status.Terminal() {
			ended = true
			w.c.AuditOutcome(ctx, r.Method, owner, t)
			return finalResult(w.c.Presented(t))
		}
		// Its status notifications go on this request's stream while it
		// is open (ServeResultStream), else on the session's.
		w.follow(r.Req, owner, t, t, true)
		for key, req := range t.InputRequests {
			if forwarded[key] || p == nil || time.Now().Before(notBefore[key]) {
				continue
			}
			fctx, fcancel := context.WithCancel(ctx)
			if a := p.claim(id, key, fcancel); a != nil {
				forwarded[key] = true
				go func() {
					select {
					case <-streamGone:
						fcancel()
					case <-fctx.Done():
					}
				}()
				go func() {
					defer fcancel()
					out := w.forwardInput(fctx, r.Session, owner, id, key, req)
					p.settle(id, key, a, out == forwardDelivered)
					if out == forwardRefused {
						select {
						case refused <- key:
						default:
						}
					}
				}()
			} else {
				fcancel()
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		case key := <-refused:
			forwarded[key] = false
			refusals[key]++
			notBefore[key] = time.Now().Add(resultPoll << min(refusals[key]-1, 5)) // 1 s, doubling to 32 s
		case <-time.After(resultPoll):
		}
	}
}

// ResultView is what tasks/result reads of its task (engine.Engine.View):
// the outcome, and the input requests it forwards while it waits.
var ResultView = store.ViewOptions{Result: true, Error: true, InputRequests: true}

// finalResult is the tasks/result answer of a terminal task.
func finalResult(t *task.Task) (mcp.Result, error) {
	switch t.Status {
	case task.Completed:
		res := &v1.RawResult{JSON: t.Result}
		res.SetMeta(map[string]any{v1.MetaRelatedTask: v1.RelatedTask(t.ID)})
		return res, nil
	case task.Failed:
		return nil, adapter.TaskError(t)
	default: // cancelled
		return nil, adapter.InvalidParams(fmt.Sprintf("task %q was cancelled and has no result", t.ID))
	}
}

// forwardOutcome is how a forwarded input request ended.
type forwardOutcome int

const (
	// forwardDelivered: the client answered and the answer was delivered
	// to the task (or the task had ended meanwhile).
	forwardDelivered forwardOutcome = iota
	// forwardRefused: the request could not be sent, the client answered
	// with an error, or its answer does not fit; it is asked again.
	forwardRefused
	// forwardStopped: the forward's context ended first.
	forwardStopped
)

// forwardInput sends one input request of a task to the client as a
// server-to-client request tied to the task, and delivers the answer. An
// answer that fails (the go-sdk checks it against the requested schema)
// or does not fit the request (adapter.CheckAnswer) is not delivered
// (forwardRefused): the request is asked again. The request goes on the
// stream of the request ctx belongs to (tasks/result), else on the
// session's own channel (ask.go).
func (w *Wire) forwardInput(ctx context.Context, ss *mcp.ServerSession, owner task.Owner, id task.ID, key string, raw json.RawMessage) forwardOutcome {
	var req struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		return forwardRefused
	}
	related := map[string]any{v1.MetaRelatedTask: v1.RelatedTask(id)}
	var answer any
	var err error
	switch req.Method {
	case wire.MethodElicit:
		var p mcp.ElicitParams
		if err = json.Unmarshal(req.Params, &p); err == nil {
			p.Meta = withMeta(p.Meta, related)
			answer, err = ss.Elicit(ctx, &p)
		}
	case wire.MethodSample:
		var p mcp.CreateMessageParams
		if err = json.Unmarshal(req.Params, &p); err == nil {
			p.Meta = withMeta(p.Meta, related)
			answer, err = ss.CreateMessage(ctx, &p)
		}
	default:
		err = fmt.Errorf("cannot forward %q on the %s wire", req.Method, v1.Version)
	}
	var b []byte
	if err == nil {
		b, err = json.Marshal(answer)
	}
	var delivered error
	if err == nil {
		_, _, delivered = w.c.Engine().Respond(context.WithoutCancel(ctx), owner, id, map[string]json.RawMessage{key: b}, adapter.CheckAnswer)
		var bad *engine.AnswerError
		if errors.As(delivered, &bad) {
			err, delivered = bad, nil // the answer does not fit: ask again
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return forwardStopped
		}
		w.c.Log().Warn("forwarding a task's input request; it is asked again", "task", id, "key", key, "method", req.Method, "err", err)
		return forwardRefused
	}
	var term *engine.TerminalError
	if delivered != nil && !errors.As(delivered, &term) {
		w.c.Log().Warn("delivering a task's input", "task", id, "key", key, "err", delivered)
	}
	return forwardDelivered
}

func withMeta(m mcp.Meta, add map[string]any) mcp.Meta {
	if m == nil {
		m = mcp.Meta{}
	}
	for k, v := range add {
		m[k] = v
	}
	return m
}
