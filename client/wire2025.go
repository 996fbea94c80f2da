package client

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/mcptask/mcptask/wire"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The 2025-11-25 wire: a tools/call asks for a task with params.task (set
// by the edge), tasks/get and tasks/cancel answer the task flat,
// tasks/result blocks until the task ends and returns exactly what the
// plain call would have (or its JSON-RPC error); while it blocks, the
// server sends the task's input requests as elicitation/create or
// sampling/createMessage requests with the related-task _meta, which reach
// the go-sdk client's handlers (elicitFromServer, sampleFromServer).

// wire2025 is the strategy of the 2025-11-25 wire.
type wire2025 struct {
	c *clientImpl

	mu      sync.Mutex
	results map[string]*resultCall // task ID → tasks/result in flight
}

func newWire2025(c *clientImpl) *wire2025 {
	return &wire2025{c: c, results: map[string]*resultCall{}}
}

// tasksSupported reads the server's tasks capability (recorded by the edge
// from the initialize result).
func (s *wire2025) tasksSupported() bool {
	call, _, _ := s.c.e.serverTasks()
	return call
}

func (s *wire2025) taskSupport(tool string) string {
	support, _ := s.c.e.toolSupport(tool)
	return support
}

// prepareCall asks for a task (params.task, through the edge) when the
// server and the tool support it.
func (s *wire2025) prepareCall(ctx context.Context, params *mcp.CallToolParams) (string, bool, error) {
	if call, _, _ := s.c.e.serverTasks(); !call {
		return "the server has no tasks capability for tools/call", false, nil
	}
	support, err := s.toolSupport(ctx, params.Name)
	if err != nil {
		return "", false, err
	}
	switch support {
	case "optional", "required":
	case "":
		return fmt.Sprintf("the tool %q declares no execution.taskSupport", params.Name), false, nil
	default:
		return fmt.Sprintf("the tool %q does not support tasks (execution.taskSupport %q)", params.Name, support), false, nil
	}
	tk := map[string]any{}
	if s.c.opts.TTL > 0 {
		tk["ttl"] = max(s.c.opts.TTL.Milliseconds(), 1)
	}
	params.Meta = mcp.Meta{metaTaskRequest: tk}
	// A task-augmented call is answered with a task (or refused): with a
	// server that honours keys, re-sending it with its key is safe.
	return "", s.c.idempotent, nil
}

// toolSupport returns a tool's execution.taskSupport, listing the tools
// first when the client has not seen it yet.
func (s *wire2025) toolSupport(ctx context.Context, name string) (string, error) {
	if support, ok := s.c.e.toolSupport(name); ok {
		return support, nil
	}
	for _, err := range s.c.session().Tools(ctx, nil) {
		if err != nil {
			return "", fmt.Errorf("listing the tools to learn whether %s supports tasks: %w", name, err)
		}
	}
	support, _ := s.c.e.toolSupport(name)
	return support, nil
}

// status2025 translates a task of the 2025-11-25 wire.
func status2025(t v1.Task) *TaskStatus {
	s := &TaskStatus{
		ID:            t.TaskID,
		Status:        t.Status,
		StatusMessage: t.StatusMessage,
		CreatedAt:     parseTime(t.CreatedAt),
		LastUpdatedAt: parseTime(t.LastUpdatedAt),
		PollInterval:  time.Duration(max(t.PollInterval, 0)) * time.Millisecond,
	}
	if t.TTL != nil {
		s.TTL = time.Duration(max(*t.TTL, 0)) * time.Millisecond
	}
	return s
}

// handle2025 decodes the `task` of a task handle of the 2025-11-25 shape
// ({"task": {...}}).
func handle2025(task json.RawMessage) (*TaskStatus, error) {
	var t v1.Task
	if err := json.Unmarshal(task, &t); err != nil {
		return nil, fmt.Errorf("the server's task handle is not valid: %v", err)
	}
	return status2025(t), nil
}

// decode2025 decodes a flat task answer.
func decode2025(raw json.RawMessage, method, id string) (*TaskStatus, error) {
	var t v1.TaskResult
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("the server's %s answer is not a task: %v", method, err)
	}
	st := status2025(t.Task)
	st.Operation = operationOf(raw)
	st.Log = logOf(raw)
	st.Correlation = correlationOf(raw)
	st.Links = linksOf(raw)
	st.Outcome = outcomeOf(raw)
	st.Parent = parentOf(raw)
	st.Children = childrenOf(raw)
	if err := st.validate(method + " answer"); err != nil {
		return nil, err
	}
	if st.ID != id {
		return nil, fmt.Errorf("the server answered %s for task %s with task %s", method, id, st.ID)
	}
	return st, nil
}

// getTask sends tasks/get; its errors are the server's, unwrapped.
func (s *wire2025) getTask(ctx context.Context, id string) (*TaskStatus, error) {
	return s.getTaskAs(ctx, id, false)
}

// getTaskAs is getTask, marked as a one-time look (wire.MetaLook) when
// look is set.
func (s *wire2025) getTaskAs(ctx context.Context, id string, look bool) (*TaskStatus, error) {
	raw, err := s.c.custom(ctx, wire.MethodTasksGet, lookParams(id, look))
	if err != nil {
		return nil, err
	}
	return decode2025(raw, wire.MethodTasksGet, id)
}

func (s *wire2025) get(ctx context.Context, id string) (*TaskStatus, error) {
	st, err := s.getTaskAs(ctx, id, true)
	if err != nil {
		return nil, getError(id, err)
	}
	return st, nil
}

// resultCall is one tasks/result in flight, shared by the Waits of a task
// in this client so that the server forwards each input request once.
type resultCall struct {
	done   chan struct{}
	res    *mcp.CallToolResult
	err    error
	cancel context.CancelFunc
	refs   int
}

// refused reports whether the call has ended refused by a rate limit: a
// new Wait must not join it but start another.
func (rc *resultCall) refused() bool {
	select {
	case <-rc.done:
		_, limited := rateLimited(rc.err)
		return limited
	default:
		return false
	}
}

// joinResult returns the tasks/result call of a task, starting it if none
// is in flight (or the one in the map was refused by a rate limit). Each
// join must be matched by a leave.
func (s *wire2025) joinResult(ctx context.Context, id string) *resultCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rc := s.results[id]; rc != nil && !rc.refused() {
		rc.refs++
		return rc
	}
	// The values of the first joiner's context (its trace, for
	// Options.RequestMeta), not its cancellation: leave cancels.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rc := &resultCall{done: make(chan struct{}), cancel: cancel, refs: 1}
	s.results[id] = rc
	go func() {
		defer close(rc.done)
		raw, err := s.c.custom(ctx, wire.MethodTasksResult, &taskParams{TaskID: id})
		if err != nil {
			rc.err = err
			return
		}
		var res mcp.CallToolResult
		if err := json.Unmarshal(raw, &res); err != nil {
			rc.err = fmt.Errorf("the server's tasks/result answer is not a tool result: %v", err)
			return
		}
		rc.res = &res
	}()
	return rc
}

// leave drops a Wait's interest in a tasks/result call; the last one out
// cancels it if it is still running, and waits for it to return.
func (s *wire2025) leave(id string, rc *resultCall) {
	s.mu.Lock()
	rc.refs--
	last := rc.refs == 0
	if last && s.results[id] == rc {
		delete(s.results, id)
	}
	s.mu.Unlock()
	if last {
		rc.cancel()
		<-rc.done // prompt: a cancelled call returns at once
	}
}

// forget has nothing to drop: a task's tasks/result call goes with its
// last Wait.
func (s *wire2025) forget(string) {}

// wait polls tasks/get and, once the task needs input or has ended, holds
// a tasks/result call open, which delivers the input requests to the
// handlers and then the outcome. Where the server sends status
// notifications and their path is up, one tasks/get (which also makes the
// server notify this session of the task) is followed by the
// notifications, with only a slow safety poll (safetyPoll).
func (s *wire2025) wait(w *waiter) (*mcp.CallToolResult, error) {
	var rc *resultCall
	defer func() {
		if rc != nil {
			s.leave(w.id, rc)
		}
	}()
	var notes *noteSlot // nil: polling only
	if s.pushable() {
		notes = s.c.e.hub.subscribe(w.id)
		defer s.c.e.hub.unsubscribe(w.id, notes)
		if err := s.awaitPath(w); err != nil {
			return nil, err
		}
		s.c.log.Debug("following the task's notifications (tasks/status) while their path is up", "task", w.id)
	}
	// pushed is the state a notification brought, which replaces the
	// next poll; polled is the path's state before the last poll.
	var pushed *TaskStatus
	var polled <-chan struct{}
	var wake <-chan struct{}
	// retry replaces an ended tasks/result call that a rate limit
	// refused by a new one, after pausing as the server asked. The new
	// call goes out before the next poll: with a tight budget, polls must
	// not take every token that tasks/result needs.
	retry := func() (bool, error) {
		d, limited := rateLimited(rc.err)
		if !limited && (rc.err == nil || !lostInTransport(rc.err)) {
			return false, nil
		}
		lost := rc.err
		s.leave(w.id, rc)
		rc, wake = nil, nil
		if limited {
			if err := w.backOff(d); err != nil {
				return true, err
			}
		} else if _, err := w.unanswered(lost); err != nil {
			return true, err // the server stayed silent too long
		}
		rc = s.joinResult(w.ctx, w.id)
		wake = rc.done
		return true, nil
	}
	for {
		if err := w.cut(); err != nil {
			return nil, err
		}
		if rc != nil {
			select {
			case <-rc.done:
				if again, err := retry(); again {
					if err != nil {
						return nil, err
					}
					continue
				}
				return s.outcome(w, rc)
			default:
			}
		}
		st := pushed
		pushed = nil
		if st == nil {
			_, _, polled = s.c.e.hub.path()
			var err error
			st, err = s.getTask(w.dctx, w.id)
			if err != nil {
				if err := w.pollFailed(err); err != nil {
					return nil, err
				}
				continue
			}
			w.answeredNow()
		}
		w.seen(st)
		switch st.Status {
		case statusCancelled:
			return nil, fmt.Errorf("task %s: %w", w.id, ErrCancelled)
		case statusInputRequired, statusCompleted, statusFailed:
			// tasks/result delivers the input requests to the handlers,
			// then the outcome.
			if rc == nil {
				rc = s.joinResult(w.ctx, w.id)
				wake = rc.done
			}
		}
		if st.Terminal() {
			select {
			case <-rc.done:
				if again, err := retry(); again {
					if err != nil {
						return nil, err
					}
					continue
				}
				return s.outcome(w, rc)
			case <-w.dctx.Done():
				return nil, w.cut()
			}
		}
		var err error
		if pushed, err = s.next(w, notes, polled, wake); err != nil {
			return nil, err
		}
	}
}

// pushable reports whether waits follow the server's status
// notifications.
func (s *wire2025) pushable() bool { return s.c.notifies && !s.c.opts.DisablePush }

// awaitPath lets a wait that starts while a GET event stream is being
// opened (right after connecting over Streamable HTTP) wait for it, up to
// pathWait, rather than poll once more.
func (s *wire2025) awaitPath(w *waiter) error {
	t := time.NewTimer(pathWait)
	defer t.Stop()
	for {
		up, opening, changed := s.c.e.hub.path()
		if up || !opening {
			return nil
		}
		select {
		case <-changed:
		case <-t.C:
			return nil
		case <-w.dctx.Done():
			return w.cut()
		}
	}
}

// next waits for what replaces the next poll: a state a notification
// brought (returned), or nil when the wait must poll now (the path of the
// notifications changed since polled, the state before the last poll; the
// safety poll is due; wake fired). Without notifications, or while their
// path is down, it pauses for the poll interval (or until wake) and
// returns nil.
func (s *wire2025) next(w *waiter, notes *noteSlot, polled, wake <-chan struct{}) (*TaskStatus, error) {
	for notes != nil {
		up, _, changed := s.c.e.hub.path()
		if !up || closed(s.c.closing) {
			break
		}
		if changed != polled {
			// The path came up (or changed) after the last poll began: a
			// notification may have been lost in between; poll again.
			return nil, nil
		}
		ev, err := w.awaitPush(notes.ready, changed, wake)
		if err != nil {
			return nil, err
		}
		if raw := notes.take(); raw != nil {
			st, err := decode2025(raw, wire.MethodTaskStatus, w.id)
			switch {
			case err != nil:
				s.c.log.Warn("ignoring a task status notification", "task", w.id, "err", err)
			case w.stale(st):
			default:
				return st, nil
			}
			continue
		}
		if ev == pushNote {
			continue // read already
		}
		return nil, nil
	}
	return nil, w.pause(wake)
}

// outcome turns the end of tasks/result into Wait's answer. A result is
// the task's result (also one with isError, which this wire shows as
// failed). An error is checked against the task's status: the JSON-RPC
// error of a failed task is its *TaskError.
func (s *wire2025) outcome(w *waiter, rc *resultCall) (*mcp.CallToolResult, error) {
	if rc.err == nil {
		return rc.res, nil
	}
	if cut := w.cut(); cut != nil {
		return nil, cut
	}
	we, isRPC := rpcError(rc.err)
	if !isRPC {
		return nil, fmt.Errorf("task %s: tasks/result: %w", w.id, rc.err)
	}
	var st *TaskStatus
	var err error
	for {
		st, err = s.getTask(w.dctx, w.id)
		d, limited := rateLimited(err)
		if !limited {
			break
		}
		if err := w.backOff(d); err != nil {
			return nil, err
		}
	}
	if err != nil {
		return nil, w.fail("polling after tasks/result failed", err)
	}
	w.seen(st)
	switch st.Status {
	case statusFailed:
		return nil, taskError(w.id, we.Code, we.Message, we.Data)
	case statusCancelled:
		return nil, fmt.Errorf("task %s: %w", w.id, ErrCancelled)
	}
	return nil, fmt.Errorf("task %s (%s): tasks/result: %w", w.id, st.Status, rc.err)
}

// cancel sends tasks/cancel where the server's tasks capability offers
// it. This wire refuses to cancel an ended task (-32602, as for an unknown
// one): the ended task's status is then the answer.
func (s *wire2025) cancel(ctx context.Context, id string) (*TaskStatus, error) {
	if _, _, cancel := s.c.e.serverTasks(); !cancel {
		return nil, fmt.Errorf("tasks/cancel: the server's tasks capability does not offer it: %w", ErrUnsupported)
	}
	raw, err := s.c.custom(ctx, wire.MethodTasksCancel, &taskParams{TaskID: id})
	if err != nil {
		if we, ok := rpcError(err); !ok || we.Code != jsonrpc.CodeInvalidParams {
			return nil, fmt.Errorf("task %s: tasks/cancel: %w", id, err)
		}
		// -32602: unknown, or already ended. Tell them apart.
		st, gerr := s.getTask(ctx, id)
		switch {
		case gerr == nil && st.Terminal():
			return st, nil
		case gerr != nil && isNotFound(gerr):
			return nil, notFound(id, gerr)
		case gerr != nil:
			return nil, fmt.Errorf("task %s: tasks/get after tasks/cancel: %w", id, gerr)
		}
		return nil, fmt.Errorf("task %s: tasks/cancel: %w", id, err)
	}
	return decode2025(raw, wire.MethodTasksCancel, id)
}

// deleteAdvertised: the server's tasks capability offers delete.
func (s *wire2025) deleteAdvertised() (bool, string) {
	if !s.c.e.serverDeletes() {
		return false, "the server's tasks capability does not offer delete"
	}
	return true, ""
}

// list sends tasks/list where the server's tasks capability offers it.
func (s *wire2025) list(ctx context.Context, cursor string) ([]TaskStatus, string, error) {
	if _, list, _ := s.c.e.serverTasks(); !list {
		return nil, "", fmt.Errorf("tasks/list: the server's tasks capability does not offer it: %w", ErrUnsupported)
	}
	raw, err := s.c.custom(ctx, wire.MethodTasksList, &taskParams{Cursor: cursor})
	if err != nil {
		return nil, "", fmt.Errorf("tasks/list: %w", err)
	}
	var l v1.ListTasksResult
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, "", fmt.Errorf("the server's tasks/list answer is not a list of tasks: %v", err)
	}
	out := make([]TaskStatus, 0, len(l.Tasks))
	for _, t := range l.Tasks {
		st := status2025(t)
		if err := st.validate("tasks/list answer"); err != nil {
			return nil, "", err
		}
		out = append(out, *st)
	}
	return out, l.NextCursor, nil
}
