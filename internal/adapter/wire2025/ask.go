package wire2025

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Input requests outside tasks/result.
//
// The revision's flow has the requestor call tasks/result when it sees
// input_required, and receive the task's requests on that stream
// (Wire.result). Some clients only poll tasks/get and call tasks/result
// once the task is terminal (the TypeScript SDK v2 with ext-tasks): they
// would never see the question. The revision lets the server use any
// stream ("clients SHOULD expect messages to be delivered on any SSE
// stream, including the HTTP GET stream"), so while a task followed by a
// session is input_required and no tasks/result of that session waits on
// it, each pending request is also sent once on the session's own
// channel: the standalone GET stream of a Streamable HTTP session, or the
// connection of a stdio one ([Wire.Serve]). Its answer is delivered as on
// the tasks/result stream. Per session, a request is asked on one path at
// a time (sessionPush.claim): never twice to one client. A request asked
// on a GET stream that closes before it is answered is asked again when
// the session opens its GET stream again; one whose answer was refused is
// asked again after a pause, as on tasks/result.
//
// Nothing about a task goes on the session's channel, neither its status
// notifications nor its questions, until the client has shown it knows
// the task (a tasks/get or tasks/result naming it), or askGrace after its
// creation (Wire.follow). The channel is not the stream the
// CreateTaskResult goes on: a status change or a question at once (a
// tool that asks before anything else) could reach the client before it
// has read the task's ID, and a client that cannot tie them to a task it
// knows drops the notification and answers the question for the user
// (ext-tasks 0.2.2 answers "cancel"). The follow then starts from the
// state the client has, and sends what changed since.

// askState is the state of one input request of a task on one session.
type askState struct {
	answered bool               // delivered: never asked again
	cancel   context.CancelFunc // stops the ask in flight (on the session's channel, or a tasks/result stream)
}

// claim marks the input request key of task id asked, with cancel to stop
// the ask, and returns its state; nil when the request is being asked or
// was answered on this session.
func (p *sessionPush) claim(id task.ID, key string, cancel context.CancelFunc) *askState {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asks[id] == nil {
		p.asks[id] = map[string]*askState{}
	}
	if _, busy := p.asks[id][key]; busy {
		return nil
	}
	a := &askState{cancel: cancel}
	p.asks[id][key] = a
	return a
}

// settle ends the ask a of key: answered keeps the request claimed for
// good, else it may be asked again. An ask superseded meanwhile (another
// one claimed the request since) changes nothing.
func (p *sessionPush) settle(id task.ID, key string, a *askState, answered bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asks[id][key] != a {
		return
	}
	if answered {
		p.asks[id][key] = &askState{answered: true}
		return
	}
	delete(p.asks[id], key)
}

// cancelAsks stops the asks of task id in flight on the session (the
// task left input_required, or ended, or a new tasks/result takes them
// over); the requests not answered may be asked again.
func (p *sessionPush) cancelAsks(id task.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, a := range p.asks[id] {
		if a.cancel != nil {
			a.cancel()
		}
		if !a.answered {
			delete(p.asks[id], key)
		}
	}
}

// waitResult records a tasks/result of the session waiting on task id;
// the func it returns ends the record.
func (p *sessionPush) waitResult(id task.ID) func() {
	p.mu.Lock()
	p.results[id]++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.results[id]--; p.results[id] <= 0 {
			delete(p.results, id)
		}
	}
}

// askGrace is how long a new task's notifications and questions wait on
// the session's channel for the client to show it knows the task: long
// against a client reading two streams at once (the race it closes is
// of a few milliseconds), short against a person's wait, and shorter
// than a poll interval: a client that follows the notifications polls a
// pollInterval after the last one, and a notification held until its
// poll was due would put that poll off by a whole interval.
const askGrace = 100 * time.Millisecond

// inputView is what an ask reads of its task.
var inputView = store.ViewOptions{InputRequests: true}

// askOnSession sends the pending input requests of task id, which the
// session ss follows, on the session's own channel, unless a tasks/result
// of the session waits on the task (it asks them) or the session has no
// channel open. Each answer is delivered to the task as on tasks/result.
func (w *Wire) askOnSession(ss *mcp.ServerSession, id task.ID) {
	p := w.session(ss)
	p.mu.Lock()
	owner, followed := p.followed[id]
	waiting := p.results[id] > 0
	_, unseen := p.unseen[id]
	p.mu.Unlock()
	if !followed || waiting || unseen || p.ctx.Err() != nil {
		return
	}
	closed, ok := w.channelOf(ss)
	if !ok {
		return
	}
	v, err := w.c.Engine().View(p.ctx, owner, id, inputView)
	if err != nil || v.Task.Status != task.InputRequired {
		return
	}
	for key, req := range v.Task.InputRequests {
		if !canAnswer(ss, req) {
			continue
		}
		ctx, cancel := context.WithCancel(p.ctx)
		a := p.claim(id, key, cancel)
		if a == nil {
			cancel()
			continue
		}
		go func() {
			select {
			case <-closed: // the stream the request went on is gone
				cancel()
			case <-ctx.Done():
			}
		}()
		go func() {
			defer cancel()
			switch w.forwardInput(ctx, ss, owner, id, key, req) {
			case forwardDelivered:
				p.settle(id, key, a, true)
			case forwardRefused:
				p.settle(id, key, a, false)
				p.mu.Lock()
				p.refusals[id]++
				n := p.refusals[id]
				p.mu.Unlock()
				time.AfterFunc(resultPoll<<min(n-1, 5), func() { w.askOnSession(ss, id) })
			default: // cancelled: the stream closed, the task moved on
				p.settle(id, key, a, false)
				// A stream opened again before this ask settled found the
				// request claimed and did not ask it: ask it there now
				// (askOnSession finds nothing to ask if the task moved
				// on, or a tasks/result asks it).
				if now, ok := w.channelOf(ss); ok && now != closed && p.ctx.Err() == nil {
					w.askOnSession(ss, id)
				}
			}
		}()
	}
}

// channelOf returns the channel of ss that an unrelated server-to-client
// request goes on, and a channel closed when it closes: the connection of
// a stdio session, or the open standalone GET stream of a Streamable HTTP
// session (the go-sdk writes such requests there).
func (w *Wire) channelOf(ss *mcp.ServerSession) (<-chan struct{}, bool) {
	if c, ok := w.conns.Load(ss); ok {
		return c.(*conn).done, true
	}
	sid := ss.ID()
	if sid == "" {
		return nil, false
	}
	v, ok := w.streams.Load(sid)
	if !ok {
		return nil, false
	}
	set := v.(*streamSet)
	set.mu.Lock()
	defer set.mu.Unlock()
	for _, o := range set.open {
		if o.task == "" && o.sp.Streaming() {
			return o.closed, true
		}
	}
	return nil, false
}

// canAnswer reports whether the client of ss declared the capability the
// input request req needs (elicitation, sampling).
func canAnswer(ss *mcp.ServerSession, req json.RawMessage) bool {
	var r struct {
		Method string `json:"method"`
	}
	init := ss.InitializeParams()
	if json.Unmarshal(req, &r) != nil || init == nil || init.Capabilities == nil {
		return false
	}
	switch r.Method {
	case wire.MethodElicit:
		return init.Capabilities.Elicitation != nil
	case wire.MethodSample:
		return init.Capabilities.Sampling != nil
	}
	return false
}

// askOnStream asks the pending input requests of every task the
// Streamable HTTP session sid follows, once its standalone GET stream has
// opened (again).
func (w *Wire) askOnStream(sid string) {
	w.sessions.Range(func(k, v any) bool {
		ss := k.(*mcp.ServerSession)
		if ss.ID() != sid {
			return true
		}
		p := v.(*sessionPush)
		p.mu.Lock()
		ids := make([]task.ID, 0, len(p.followed))
		for id := range p.followed {
			ids = append(ids, id)
		}
		p.mu.Unlock()
		for _, id := range ids {
			w.askOnSession(ss, id)
		}
		return false
	})
}
