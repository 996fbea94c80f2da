package mcptask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/quota"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits bounds what one requester (see [Options].Owner: with bearer
// authentication, one principal of one tenant) may do, so that no client
// can starve the others. Anonymous requesters share one rate bucket (a
// client opening more sessions gets no more throughput); the cap on
// unfinished tasks applies to each owner scope (on the 2025-11-25 wire, an
// anonymous client's session). The zero value sets no limit; [DefaultLimits]
// are mcptaskd's defaults.
//
// A refused request gets a JSON-RPC error with code [CodeLimitExceeded]
// and data {"reason": ..., "limit": ..., "retryAfterMs": ...}; nothing is
// created or changed by it.
type Limits struct {
	// MaxActiveTasks caps a requester's unfinished (working or
	// input_required) tasks; a tool call that would start one more is
	// refused until one ends. The count is kept by the store, exact across
	// every server sharing it. Zero means no cap.
	MaxActiveTasks int
	// CreateRate is how many tasks a requester may create per second,
	// with bursts of up to CreateBurst (token bucket). Zero means no
	// limit.
	CreateRate  float64
	CreateBurst int
	// RequestRate is how many tasks/* requests (get, update, cancel,
	// result, list) a requester may send per second, with bursts of up to
	// RequestBurst. Zero means no limit.
	RequestRate  float64
	RequestBurst int
	// MaxPollInterval is the most the poll interval suggested to a
	// requester may be raised to when it polls a task faster than
	// suggested: each tasks/get sooner than half the interval it was last
	// told doubles the interval in the answer; polling at the suggested
	// pace brings it back down. Zero never raises it.
	MaxPollInterval time.Duration
}

// DefaultLimits are the limits mcptaskd applies unless configured
// otherwise: 100 unfinished tasks, 10 task creations per second (bursts of
// 50) and 50 tasks/* requests per second (bursts of 100) per requester,
// and poll intervals raised up to 30 s for pollers that ignore them.
var DefaultLimits = Limits{
	MaxActiveTasks:  100,
	CreateRate:      10,
	CreateBurst:     50,
	RequestRate:     50,
	RequestBurst:    100,
	MaxPollInterval: 30 * time.Second,
}

// CodeLimitExceeded is the JSON-RPC error code of a request refused by a
// [Limits] limit (a code of the range JSON-RPC leaves to servers; the
// specifications define none for this).
const CodeLimitExceeded = -32000

// The reasons in the data of a CodeLimitExceeded error.
const (
	// ReasonRateLimited: the requester sent requests (or created tasks)
	// faster than allowed; data.retryAfterMs says when one will pass.
	ReasonRateLimited = "rate_limited"
	// ReasonTooManyActiveTasks: the requester has MaxActiveTasks
	// unfinished tasks.
	ReasonTooManyActiveTasks = "too_many_active_tasks"
)

// limiters is the in-memory state of a Server's limits.
type limiters struct {
	creates  *quota.Limiters
	requests *quota.Limiters
	polls    *quota.Polls
}

func newLimiters(l Limits) limiters {
	return limiters{
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
	return &jsonrpc.Error{Code: CodeLimitExceeded, Message: msg, Data: b}
}

// allowRequest applies the tasks/* request rate to the requester of req.
func (s *Server) allowRequest(ctx context.Context, method string, req mcp.Request) error {
	owner := s.owner(ctx, req)
	ok, retry := s.limits.requests.Allow(string(owner.RateKey()), time.Now())
	if ok {
		return nil
	}
	s.eng.Audit().Limited(ctx, owner, method, "", "request_rate")
	return limitError(ReasonRateLimited, "request_rate", fmt.Sprintf(
		"rate limit exceeded: at most %g tasks/* requests per second per requester (bursts of %d); retry in %d ms, and poll no faster than pollIntervalMs",
		s.opts.Limits.RequestRate, max(s.opts.Limits.RequestBurst, 1), quota.Millis(retry)), retry)
}

// allowCreate applies the task creation rate to owner.
func (s *Server) allowCreate(ctx context.Context, owner task.Owner, tool string) error {
	ok, retry := s.limits.creates.Allow(string(owner.RateKey()), time.Now())
	if ok {
		return nil
	}
	s.eng.Audit().Limited(ctx, owner, "tools/call", tool, "create_rate")
	return limitError(ReasonRateLimited, "create_rate", fmt.Sprintf(
		"rate limit exceeded: at most %g task creations per second per requester (bursts of %d); retry in %d ms",
		s.opts.Limits.CreateRate, max(s.opts.Limits.CreateBurst, 1), quota.Millis(retry)), retry)
}

// tooManyActive is the error of a creation refused by MaxActiveTasks.
func (s *Server) tooManyActive(ctx context.Context, owner task.Owner, tool string) error {
	s.eng.Audit().Limited(ctx, owner, "tools/call", tool, "active_tasks")
	return limitError(ReasonTooManyActiveTasks, "active_tasks", fmt.Sprintf(
		"too many unfinished tasks: at most %d per requester; wait for one to finish, or cancel one, before starting another",
		s.opts.Limits.MaxActiveTasks), 0)
}

// pollInterval returns t with the poll interval to suggest to owner,
// raised if owner polls t faster than suggested.
func (s *Server) pollInterval(owner task.Owner, t *task.Task) *task.Task {
	t.PollInterval = s.limits.polls.Interval(string(owner), string(t.ID), t.PollInterval, time.Now())
	return t
}

// auditDenied records a request for a task the requester may not see.
func (s *Server) auditDenied(ctx context.Context, method string, id task.ID, err error) {
	var nf *engine.NotFoundError
	if errors.As(err, &nf) {
		s.eng.Audit().Denied(ctx, s.requesterOf(ctx), string(id), method, nf.Reason, nf.Owner, nf.Tool)
	}
}

// auditOutcome records that the requester was given a finished task's
// outcome.
func (s *Server) auditOutcome(ctx context.Context, method string, t *task.Task) {
	if t.Status == task.Completed || t.Status == task.Failed {
		s.eng.Audit().ResultRetrieved(ctx, s.requesterOf(ctx), audit.TaskOf(t), string(t.Status), method)
	}
}
