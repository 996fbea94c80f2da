package adapter

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/internal/quota"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits bounds each requester; the fields are those of mcptask.Limits,
// which documents them.
type Limits struct {
	MaxActiveTasks  int
	CreateRate      float64
	CreateBurst     int
	RequestRate     float64
	RequestBurst    int
	MaxPollInterval time.Duration

	MaxChildDepth, MaxChildren, MaxTreeTasks int
}

// limiters is the in-memory state of the limits.
type limiters struct {
	cfg      Limits
	creates  *quota.Limiters
	requests *quota.Limiters
	polls    *quota.Polls
}

func newLimiters(l Limits) limiters {
	return limiters{
		cfg:      l,
		creates:  quota.NewLimiters(l.CreateRate, l.CreateBurst),
		requests: quota.NewLimiters(l.RequestRate, l.RequestBurst),
		polls:    quota.NewPolls(l.MaxPollInterval),
	}
}

// limitError is the error of a request refused by a limit.
func limitError(reason, limit, msg string, retryAfter time.Duration) error {
	data := map[string]any{"reason": reason, "limit": limit}
	if retryAfter > 0 {
		data["retryAfterMs"] = quota.Millis(retryAfter)
	}
	b, _ := json.Marshal(data)
	return &jsonrpc.Error{Code: wire.CodeLimitExceeded, Message: msg, Data: b}
}

// AllowRequest applies the tasks/* request rate to the requester of req.
func (c *Core) AllowRequest(ctx context.Context, method string, req mcp.Request) error {
	_, err := c.ReserveRequest(ctx, method, req)
	return err
}

// ReserveRequest is AllowRequest whose charge can be undone: the fast
// lane calls undo when it leaves the request, allowed, to the go-sdk's
// path, which charges it there.
func (c *Core) ReserveRequest(ctx context.Context, method string, req mcp.Request) (undo func(), err error) {
	owner := c.Requester(ctx, req)
	ok, retry, undo := c.limits.requests.Reserve(string(owner.RateKey()), time.Now())
	if ok {
		return undo, nil
	}
	l := c.limits.cfg
	c.eng.Audit().Limited(ctx, owner, method, "", "request_rate")
	c.eng.Observer().Limited("request_rate")
	return nil, limitError(wire.ReasonRateLimited, "request_rate", fmt.Sprintf(
		"rate limit exceeded: at most %g tasks/* requests per second per requester (bursts of %d); retry in %d ms, and poll no faster than pollIntervalMs",
		l.RequestRate, max(l.RequestBurst, 1), quota.Millis(retry)), retry)
}

// allowCreate applies the task creation rate to owner.
func (c *Core) allowCreate(ctx context.Context, owner task.Owner, tool string) error {
	ok, retry := c.limits.creates.Allow(string(owner.RateKey()), time.Now())
	if ok {
		return nil
	}
	l := c.limits.cfg
	c.eng.Audit().Limited(ctx, owner, wire.MethodToolsCall, tool, "create_rate")
	c.eng.Observer().Limited("create_rate")
	c.eng.Observer().TaskRefused(tool, "create_rate")
	return limitError(wire.ReasonRateLimited, "create_rate", fmt.Sprintf(
		"rate limit exceeded: at most %g task creations per second per requester (bursts of %d); retry in %d ms",
		l.CreateRate, max(l.CreateBurst, 1), quota.Millis(retry)), retry)
}

// tooManyActive is the error of a creation refused by MaxActiveTasks.
func (c *Core) tooManyActive(ctx context.Context, owner task.Owner, tool string) error {
	c.eng.Audit().Limited(ctx, owner, wire.MethodToolsCall, tool, "active_tasks")
	c.eng.Observer().Limited("active_tasks")
	c.eng.Observer().TaskRefused(tool, "active_tasks")
	return limitError(wire.ReasonTooManyActiveTasks, "active_tasks", fmt.Sprintf(
		"too many unfinished tasks: at most %d per requester; wait for one to finish, or cancel one, before starting another",
		c.limits.cfg.MaxActiveTasks), 0)
}

// PollInterval returns t with the poll interval to suggest to owner,
// raised if owner polls t faster than suggested. A tasks/get req that
// says it is a one-time look (wire.MetaLook) is not counted as a poll.
func (c *Core) PollInterval(owner task.Owner, t *task.Task, req mcp.Request) *task.Task {
	if look, _ := MetaOf(req)[wire.MetaLook].(bool); look {
		t.PollInterval = c.limits.polls.Peek(string(owner), string(t.ID), t.PollInterval)
		return t
	}
	suggested := t.PollInterval
	t.PollInterval = c.limits.polls.Interval(string(owner), string(t.ID), t.PollInterval, time.Now())
	if t.PollInterval != suggested {
		c.eng.Observer().PollRaised()
	}
	return t
}

// TooManyStreams is the error of a subscriptions/listen refused because
// owner holds max open streams already.
func (c *Core) TooManyStreams(ctx context.Context, owner task.Owner, max int) error {
	c.eng.Audit().Limited(ctx, owner, wire.MethodSubscriptionsListen, "", "listen_streams")
	c.eng.Observer().Limited("listen_streams")
	return limitError(wire.ReasonTooManyStreams, "listen_streams", fmt.Sprintf(
		"too many open notification streams: at most %d per requester; close one (or poll tasks/get) before opening another", max), 0)
}
