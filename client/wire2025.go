package client

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The 2025-11-25 wire: tasks/get and tasks/cancel answer the task flat,
// tasks/result blocks until the task ends and returns exactly what the
// plain call would have (or its JSON-RPC error); while it blocks, the
// server sends the task's input requests as elicitation/create or
// sampling/createMessage requests with the related-task _meta, which reach
// the go-sdk client's handlers (elicitFromServer, sampleFromServer).

// decode2025 decodes a flat task answer.
func decode2025(raw json.RawMessage, method, id string) (*TaskStatus, error) {
	var t v1.TaskResult
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("the server's %s answer is not a task: %v", method, err)
	}
	st := status2025(t.Task)
	if err := st.validate(method + " answer"); err != nil {
		return nil, err
	}
	if st.ID != id {
		return nil, fmt.Errorf("the server answered %s for task %s with task %s", method, id, st.ID)
	}
	return st, nil
}

func (c *clientImpl) get2025(ctx context.Context, id string) (*TaskStatus, error) {
	raw, err := c.custom(ctx, methodTasksGet, &taskParams{TaskID: id})
	if err != nil {
		return nil, err
	}
	return decode2025(raw, methodTasksGet, id)
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
// is in flight (or the one in the map was refused by a rate limit). Each join must be matched by a leave.
func (c *clientImpl) joinResult(id string) *resultCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rc := c.results[id]; rc != nil && !rc.refused() {
		rc.refs++
		return rc
	}
	ctx, cancel := context.WithCancel(context.Background())
	rc := &resultCall{done: make(chan struct{}), cancel: cancel, refs: 1}
	c.results[id] = rc
	go func() {
		defer close(rc.done)
		raw, err := c.custom(ctx, methodTasksResult, &taskParams{TaskID: id})
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
func (c *clientImpl) leave(id string, rc *resultCall) {
	c.mu.Lock()
	rc.refs--
	last := rc.refs == 0
	if last && c.results[id] == rc {
		delete(c.results, id)
	}
	c.mu.Unlock()
	if last {
		rc.cancel()
		<-rc.done // prompt: a cancelled call returns at once
	}
}

func (w *waiter) wait2025() (*mcp.CallToolResult, error) {
	c := w.c
	var rc *resultCall
	defer func() {
		if rc != nil {
			c.leave(w.id, rc)
		}
	}()
	var wake <-chan struct{}
	// retry replaces an ended tasks/result call that a rate limit
	// refused by a new one, after pausing as the server asked. The new
	// call goes out before the next poll: with a tight budget, polls must
	// not take every token that tasks/result needs.
	retry := func() (bool, error) {
		d, limited := rateLimited(rc.err)
		if !limited {
			return false, nil
		}
		c.leave(w.id, rc)
		rc, wake = nil, nil
		if err := w.backOff(d); err != nil {
			return true, err
		}
		rc = c.joinResult(w.id)
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
				return w.outcome2025(rc)
			default:
			}
		}
		st, err := c.get2025(w.dctx, w.id)
		if err != nil {
			if d, ok := rateLimited(err); ok {
				if err := w.backOff(d); err != nil {
					return nil, err
				}
				continue
			}
			return nil, w.fail("polling", err)
		}
		w.seen(st)
		switch st.Status {
		case statusCancelled:
			return nil, fmt.Errorf("task %s: %w", w.id, ErrCancelled)
		case statusInputRequired, statusCompleted, statusFailed:
			// tasks/result delivers the input requests to the handlers,
			// then the outcome.
			if rc == nil {
				rc = c.joinResult(w.id)
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
				return w.outcome2025(rc)
			case <-w.dctx.Done():
				return nil, w.cut()
			}
		}
		if err := w.pause(wake); err != nil {
			return nil, err
		}
	}
}

// outcome2025 turns the end of tasks/result into Wait's answer. A result
// is the task's result (also one with isError, which this wire shows as
// failed). An error is checked against the task's status: the JSON-RPC
// error of a failed task is its *TaskError.
func (w *waiter) outcome2025(rc *resultCall) (*mcp.CallToolResult, error) {
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
		st, err = w.c.get2025(w.dctx, w.id)
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

func (c *clientImpl) cancel2025(ctx context.Context, id string) (*TaskStatus, error) {
	if _, _, cancel := c.e.serverTasks(); !cancel {
		return nil, fmt.Errorf("tasks/cancel: the server's tasks capability does not offer it: %w", ErrUnsupported)
	}
	raw, err := c.custom(ctx, methodTasksCancel, &taskParams{TaskID: id})
	if err != nil {
		if !isNotFound(err) {
			return nil, fmt.Errorf("task %s: tasks/cancel: %w", id, err)
		}
		// -32602: unknown, or already ended (this wire refuses to cancel
		// an ended task). Tell them apart.
		st, gerr := c.get2025(ctx, id)
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
	return decode2025(raw, methodTasksCancel, id)
}

func (c *clientImpl) list2025(ctx context.Context, cursor string) ([]TaskStatus, string, error) {
	if _, list, _ := c.e.serverTasks(); !list {
		return nil, "", fmt.Errorf("tasks/list: the server's tasks capability does not offer it: %w", ErrUnsupported)
	}
	raw, err := c.custom(ctx, methodTasksList, &taskParams{Cursor: cursor})
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
