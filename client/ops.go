package client

import (
	"context"
	"errors"
	"fmt"
)

func (c *clientImpl) get(ctx context.Context, id string) (*TaskStatus, error) {
	if id == "" {
		return nil, errors.New("client: Get needs a task ID")
	}
	var st *TaskStatus
	var err error
	switch {
	case c.modern():
		_, st, err = c.get2026(ctx, id)
	case c.wire == Wire20251125:
		st, err = c.get2025(ctx, id)
	default:
		return nil, fmt.Errorf("tasks/get on MCP %s: %w", c.wire, ErrUnsupported)
	}
	if err != nil {
		if isNotFound(err) {
			return nil, notFound(id, err)
		}
		return nil, fmt.Errorf("task %s: tasks/get: %w", id, err)
	}
	return st, nil
}

func (c *clientImpl) cancel(ctx context.Context, id string) (*TaskStatus, error) {
	if id == "" {
		return nil, errors.New("client: Cancel needs a task ID")
	}
	var st *TaskStatus
	var err error
	switch {
	case c.modern():
		// tasks/cancel is acknowledged (also for an ended task); the status
		// after comes from tasks/get.
		if _, err = c.custom(ctx, methodTasksCancel, &taskParams{TaskID: id}); err != nil {
			if isNotFound(err) {
				return nil, notFound(id, err)
			}
			return nil, fmt.Errorf("task %s: tasks/cancel: %w", id, err)
		}
		st, err = c.get(ctx, id)
	case c.wire == Wire20251125:
		st, err = c.cancel2025(ctx, id)
	default:
		return nil, fmt.Errorf("tasks/cancel on MCP %s: %w", c.wire, ErrUnsupported)
	}
	if err != nil {
		return nil, err
	}
	if st.Status == statusCancelled {
		// A cancelled task has no outcome left to collect.
		c.forget(id)
		if c.journal != nil {
			if err := c.journal.remove(c.target, id); err != nil {
				c.log.Warn("could not remove a cancelled task from the journal", "task", id, "journal", c.journal.path, "err", err)
			}
		}
	}
	return st, nil
}

func (c *clientImpl) list(ctx context.Context, cursor string) ([]TaskStatus, string, error) {
	if c.wire != Wire20251125 {
		return nil, "", fmt.Errorf("tasks/list on MCP %s: %w", c.wire, ErrUnsupported)
	}
	return c.list2025(ctx, cursor)
}
