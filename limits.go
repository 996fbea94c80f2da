package mcptask

import (
	"time"

	"github.com/mcptask/mcptask/wire"
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
	// MaxChildDepth, MaxChildren and MaxTreeTasks bound task trees (see
	// [Task.Spawn]): how deep children nest (a task with no parent is at
	// depth 0; a task at depth MaxChildDepth starts no child), how many
	// children one task starts, and how many tasks one tree holds under
	// its top task. Zero means the defaults: 8, 100 and 1,000. A spawn
	// past a bound fails with a *SpawnError naming it.
	MaxChildDepth, MaxChildren, MaxTreeTasks int
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
// [Limits] limit (see wire.CodeLimitExceeded).
const CodeLimitExceeded = wire.CodeLimitExceeded

// The reasons in the data of a CodeLimitExceeded error.
const (
	// ReasonRateLimited: the requester sent requests (or created tasks)
	// faster than allowed; data.retryAfterMs says when one will pass.
	ReasonRateLimited = wire.ReasonRateLimited
	// ReasonTooManyActiveTasks: the requester has MaxActiveTasks
	// unfinished tasks.
	ReasonTooManyActiveTasks = wire.ReasonTooManyActiveTasks
)
