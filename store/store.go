// Package store defines the persistence interface of mcptask. Each backend
// (store/sqlite, and later PostgreSQL) lives in its own package and must pass
// the shared suite in store/storetest.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/mcptask/mcptask/task"
)

// ErrNotFound is returned when no task has the given ID.
var ErrNotFound = errors.New("task not found")

// ErrExists is returned by Create when a task with the same ID exists.
var ErrExists = errors.New("task already exists")

// Store persists tasks. Implementations must be safe for concurrent use.
// Every method that returns nil has made its change durable: a task is
// committed before Create returns, so a following Get (from any connection
// or process) finds it.
type Store interface {
	// Create durably inserts t. It returns ErrExists if t.ID is taken.
	Create(ctx context.Context, t *task.Task) error

	// Get returns the task with the given ID, or ErrNotFound. It returns
	// tasks whatever their expiry; callers decide what expired means.
	Get(ctx context.Context, id task.ID) (*task.Task, error)

	// Update reads the task with the given ID, calls fn with it, and writes
	// back what fn left in it, atomically: no other Update of the same task
	// interleaves. If fn returns an error nothing is written and that error
	// is returned. Update returns ErrNotFound for an unknown ID. fn must not
	// change the task's ID.
	Update(ctx context.Context, id task.ID, fn func(t *task.Task) error) (*task.Task, error)

	// List returns up to limit tasks of owner, newest first, starting after
	// the position encoded in cursor ("" for the first page). next is ""
	// when there are no more tasks. Cursors are opaque to callers.
	List(ctx context.Context, owner string, cursor string, limit int) (tasks []*task.Task, next string, err error)

	// ListActive returns every non-terminal task (working or
	// input_required), oldest first. The engine calls it at start-up to
	// resolve tasks left behind by a process that died.
	ListActive(ctx context.Context) ([]*task.Task, error)

	// DeleteExpired deletes the terminal tasks whose retention ended before
	// now (see task.Task.ExpiresAt) and returns how many it deleted.
	DeleteExpired(ctx context.Context, now time.Time) (int, error)

	// Delete removes the task with the given ID, or returns ErrNotFound.
	Delete(ctx context.Context, id task.ID) error

	// Close releases the store's resources.
	Close() error
}

// ErrBadCursor is returned by List for a cursor it did not issue.
var ErrBadCursor = errors.New("invalid cursor")
