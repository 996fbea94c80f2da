package engine

import (
	"time"

	"github.com/mcptask/mcptask/task"
)

// Observer is told of the events of an engine's tasks and of the requests
// about them, e.g. to count them as metrics (package metrics implements
// it). Its arguments are bounded by design: tool names, statuses, methods
// and reasons, never a task ID, a principal or an argument. Methods are
// called on the goroutine of the event: they must be quick and must not
// block. Set it as [Options.Observer]; nil observes nothing.
type Observer interface {
	TaskObserver
	RequestObserver
}

// TaskObserver is told of task lifecycle events, once each, by the engine
// that made the change.
type TaskObserver interface {
	// TaskCreated: a task of tool was created (an idempotent retry
	// answered with an existing task is not a creation).
	TaskCreated(tool string)
	// TaskFinished: a task of tool reached the terminal status, age after
	// its creation.
	TaskFinished(tool string, status task.Status, age time.Duration)
	// QueueWaited: a task that waited in the concurrency queue queue
	// started on this engine, wait after its creation.
	QueueWaited(queue string, wait time.Duration)
}

// RequestObserver is told of the requests of the tasks protocol and of
// the ones refused, by the server's adapter.
type RequestObserver interface {
	// Request: a tasks/* request (method) was answered with outcome: "ok",
	// "error", or "limited" (refused by the request rate).
	Request(method, outcome string)
	// Denied: a request named a task the requester may not see, for
	// reason (audit.ReasonUnknown, ReasonOtherOwner, ReasonExpired).
	Denied(reason string)
	// Limited: a request was refused by a per-requester limit
	// ("request_rate", "create_rate", "active_tasks", "listen_streams").
	Limited(limit string)
	// TaskRefused: a task of tool was refused before its creation, for
	// reason ("draining", "create_rate" or "active_tasks").
	TaskRefused(tool, reason string)
	// PollRaised: a requester polling faster than suggested was given a
	// raised poll interval.
	PollRaised()
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) TaskCreated(string)                              {}
func (nopObserver) TaskFinished(string, task.Status, time.Duration) {}
func (nopObserver) QueueWaited(string, time.Duration)               {}
func (nopObserver) Request(string, string)                          {}
func (nopObserver) Denied(string)                                   {}
func (nopObserver) Limited(string)                                  {}
func (nopObserver) TaskRefused(string, string)                      {}
func (nopObserver) PollRaised()                                     {}

// Observer returns the engine's observer (see Options.Observer): never
// nil, one that observes nothing when none is set.
func (e *Engine) Observer() Observer {
	if e.opts.Observer == nil {
		return nopObserver{}
	}
	return e.opts.Observer
}

// observeChange tells the observer of a status change of t from from.
func (e *Engine) observeChange(t *task.Task, from task.Status) {
	if e.opts.Observer == nil || from.Terminal() || !t.Status.Terminal() {
		return
	}
	e.opts.Observer.TaskFinished(t.Tool, t.Status, e.now().Sub(t.CreatedAt))
}
