package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcptask/mcptask/wire"
)

func (c *clientImpl) get(ctx context.Context, id string) (*TaskStatus, error) {
	if id == "" {
		return nil, errors.New("client: Get needs a task ID")
	}
	return c.tw.get(ctx, id)
}

func (c *clientImpl) cancel(ctx context.Context, id string) (*TaskStatus, error) {
	if id == "" {
		return nil, errors.New("client: Cancel needs a task ID")
	}
	st, err := c.tw.cancel(ctx, id)
	if we, ok := rpcError(err); ok && we.Code == wire.CodeCancelRefused {
		return nil, fmt.Errorf("%w: %w", ErrCancelRefused, we)
	}
	if err != nil {
		return nil, err
	}
	if st.Status == statusCancelled {
		// A cancelled task has no outcome left to collect.
		c.tw.forget(id)
		if c.journal != nil {
			if err := c.journal.remove(c.target, id); err != nil {
				c.log.Warn("could not remove a cancelled task from the journal", "task", id, "journal", c.journal.path, "err", err)
			}
		}
	}
	return st, nil
}

func (c *clientImpl) delete(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("client: Delete needs a task ID")
	}
	if ok, why := c.tw.deleteAdvertised(); !ok {
		return fmt.Errorf("%s: %s: %w", wire.MethodTasksDelete, why, ErrUnsupported)
	}
	if _, err := c.custom(ctx, wire.MethodTasksDelete, &taskParams{TaskID: id}); err != nil {
		if we, ok := rpcError(err); ok && we.Code == wire.CodeTaskNotTerminal {
			return fmt.Errorf("task %s: %w (%s)", id, ErrNotTerminal, we.Message)
		}
		if isNotFound(err) {
			return notFound(id, err)
		}
		return fmt.Errorf("task %s: %s: %w", id, wire.MethodTasksDelete, err)
	}
	// A deleted task has nothing left to collect.
	c.tw.forget(id)
	if c.journal != nil {
		if err := c.journal.remove(c.target, id); err != nil {
			c.log.Warn("could not remove a deleted task from the journal", "task", id, "journal", c.journal.path, "err", err)
		}
	}
	return nil
}

func (c *clientImpl) list(ctx context.Context, cursor string) ([]TaskStatus, string, error) {
	return c.tw.list(ctx, cursor)
}
