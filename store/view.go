package store

import (
	"context"

	"github.com/mcptask/mcptask/task"
)

// Viewer is the facet of [Store] by which stores read what a tasks/get answers in
// one round trip: the task, its newest operation on the [Ledger] and its
// [TaskLogs] log's position, read by one statement (one snapshot), with
// only the payload columns the caller asks for.
type Viewer interface {
	// View returns the task with the given ID with its newest operation
	// and its log's position, or ErrNotFound. It returns tasks whatever
	// their expiry, as Get does. The task's payloads (Request, Result,
	// Error, InputRequests, InputResponses) are loaded as opts says; the
	// others are left empty. The operation is the one a [Ledger]'s
	// Operations with the task's ID and Limit 1 returns (the newest by
	// creation time, ties broken by the greater key), nil if the task
	// recorded none; the log's position is the page of a [TaskLogs]'
	// ReadLog(id, 0, 0).
	View(ctx context.Context, id task.ID, opts ViewOptions) (*View, error)
}

// ViewOptions say which of a task's payloads [Viewer.View] loads. The
// zero value loads none of them: the task's scalar fields only.
type ViewOptions struct {
	// Request loads the task's Request.
	Request bool
	// Result loads the task's Result.
	Result bool
	// Error loads the task's Error.
	Error bool
	// InputRequests loads the task's InputRequests.
	InputRequests bool
	// InputResponses loads the task's InputResponses.
	InputResponses bool
}

// View is what [Viewer.View] reads of a task.
type View struct {
	// Task is the task, its payloads loaded as the ViewOptions said.
	Task *task.Task
	// Operation is the newest operation the task recorded on the
	// ledger, nil if none.
	Operation *task.Operation
	// Log is the position of the task's log (a page without lines:
	// Next 0, Last, Dropped, More).
	Log *LogPage
}
