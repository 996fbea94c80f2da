package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcptask/mcptask/wire"
	v1 "github.com/mcptask/mcptask/wire/v20251125"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A task's input requests reach the host's Elicit and Sample handlers by
// either wire: as requests the server sends (2025-11-25, during
// tasks/result; and any plain call), or inlined in a tasks/get answer
// (2026-07-28), which answerInput hands on.

// elicitFromServer answers an elicitation/create the server sends: on
// 2025-11-25 for a task (during tasks/result, with the related-task _meta),
// or during a plain call.
func (c *clientImpl) elicitFromServer(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	id := relatedTask(req.Params.GetMeta())
	if c.opts.Elicit == nil {
		c.log.Info("declining an elicitation: no Elicit handler", "task", id)
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	return c.opts.Elicit(ctx, id, req.Params)
}

// sampleFromServer answers a sampling/createMessage the server sends.
func (c *clientImpl) sampleFromServer(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	res, err := c.opts.Sample(ctx, relatedTask(req.Params.GetMeta()), req.Params)
	if res == nil && err == nil {
		return nil, errNoSample
	}
	return res, err
}

// errNoSample answers a sampling request the Sample handler left
// unanswered.
var errNoSample = errors.New("this client cannot answer sampling requests (it has no language model): answer from a host")

// relatedTask returns the task ID of a related-task _meta, "" if none.
func relatedTask(meta map[string]any) string {
	rt, _ := meta[v1.MetaRelatedTask].(map[string]any)
	id, _ := rt["taskId"].(string)
	return id
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
	case wire.MethodElicit:
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
	case wire.MethodSample:
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
			return nil, nil // left unanswered: see Options.Sample
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
