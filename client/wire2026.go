package client

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The 2026-07-28 wire: tasks/get (with the outcome or the input requests
// inlined), tasks/update, tasks/cancel. The go-sdk adds the per-request
// _meta (protocol version, client info, capabilities with the extension)
// to these custom methods itself.

// get2026 fetches a task's detailed state.
func (c *clientImpl) get2026(ctx context.Context, id string) (*ext2026.GetTaskResult, *TaskStatus, error) {
	raw, err := c.custom(ctx, methodTasksGet, &taskParams{TaskID: id})
	if err != nil {
		return nil, nil, err
	}
	var g ext2026.GetTaskResult
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, nil, fmt.Errorf("the server's tasks/get answer is not a task: %v", err)
	}
	st := status2026(g.TaskFields)
	if err := st.validate("tasks/get answer"); err != nil {
		return nil, nil, err
	}
	if st.ID != id {
		return nil, nil, fmt.Errorf("the server answered tasks/get for task %s with task %s", id, st.ID)
	}
	return &g, st, nil
}

func (w *waiter) wait2026() (*mcp.CallToolResult, error) {
	c := w.c
	for {
		if err := w.cut(); err != nil {
			return nil, err
		}
		g, st, err := c.get2026(w.dctx, w.id)
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
		case statusCompleted:
			if len(g.Result) == 0 || string(g.Result) == "null" {
				return nil, fmt.Errorf("task %s: the server reports it completed but sent no result", w.id)
			}
			var res mcp.CallToolResult
			if err := json.Unmarshal(g.Result, &res); err != nil {
				return nil, fmt.Errorf("task %s: the server's result is not a tool result: %v", w.id, err)
			}
			return &res, nil
		case statusFailed:
			if g.Error == nil {
				return nil, taskError(w.id, -32603, "", nil)
			}
			return nil, taskError(w.id, g.Error.Code, g.Error.Message, g.Error.Data)
		case statusCancelled:
			return nil, fmt.Errorf("task %s: %w", w.id, ErrCancelled)
		case statusInputRequired:
			if err := w.answer2026(g.InputRequests); err != nil {
				return nil, err
			}
		}
		if err := w.pause(nil); err != nil {
			return nil, err
		}
	}
}

// answer2026 hands each input request not answered yet to the host's
// handlers and sends the answers with tasks/update.
func (w *waiter) answer2026(requests map[string]json.RawMessage) error {
	c := w.c
	keys := make([]string, 0, len(requests))
	for k := range requests {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	keys = c.claim(w.id, keys)
	if len(keys) == 0 {
		return nil
	}
	answers := map[string]json.RawMessage{}
	var answered []string
	release := func() { c.unclaim(w.id, keys) }
	for _, k := range keys {
		a, err := c.answerInput(w.dctx, w.id, k, requests[k])
		if err != nil {
			release()
			if cut := w.cut(); cut != nil {
				return cut
			}
			return fmt.Errorf("task %s: answering input request %s: %w", w.id, k, err)
		}
		if a != nil {
			answers[k] = a
			answered = append(answered, k)
		}
	}
	if len(answers) == 0 {
		return nil
	}
	if _, err := c.custom(w.dctx, methodTasksUpdate, &taskParams{TaskID: w.id, InputResponses: answers}); err != nil {
		c.unclaim(w.id, answered)
		return w.fail("sending the answers to its input requests", err)
	}
	c.log.Info("answered a task's input requests", "task", w.id, "keys", answered)
	return nil
}

// answerInput answers one input request ({"method":..., "params":...})
// with the host's handlers. It returns nil (no answer) for requests it
// cannot answer, which it logs.
func (c *clientImpl) answerInput(ctx context.Context, id, key string, raw json.RawMessage) (json.RawMessage, error) {
	var req struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		c.log.Warn("ignoring a malformed input request", "task", id, "key", key, "err", err)
		return nil, nil
	}
	var answer any
	switch req.Method {
	case "elicitation/create":
		var p mcp.ElicitParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			c.log.Warn("ignoring a malformed elicitation request", "task", id, "key", key, "err", err)
			return nil, nil
		}
		if c.opts.Elicit == nil {
			c.log.Info("declining an elicitation: no Elicit handler", "task", id, "key", key)
			answer = &mcp.ElicitResult{Action: "decline"}
			break
		}
		res, err := c.opts.Elicit(ctx, id, &p)
		if err != nil {
			return nil, err
		}
		if res == nil {
			return nil, fmt.Errorf("the Elicit handler returned no result")
		}
		answer = res
	case "sampling/createMessage":
		if c.opts.Sample == nil {
			c.log.Warn("cannot answer a sampling request: no Sample handler", "task", id, "key", key)
			return nil, nil
		}
		var p mcp.CreateMessageParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			c.log.Warn("ignoring a malformed sampling request", "task", id, "key", key, "err", err)
			return nil, nil
		}
		res, err := c.opts.Sample(ctx, id, &p)
		if err != nil {
			return nil, err
		}
		if res == nil {
			return nil, fmt.Errorf("the Sample handler returned no result")
		}
		answer = res
	default:
		c.log.Warn("cannot answer an input request of an unknown kind", "task", id, "key", key, "method", req.Method)
		return nil, nil
	}
	b, err := json.Marshal(answer)
	if err != nil {
		return nil, err
	}
	return b, nil
}
