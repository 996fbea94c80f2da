package client

import (
	"context"
	"errors"
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

func (c *clientImpl) list(ctx context.Context, cursor string) ([]TaskStatus, string, error) {
	return c.tw.list(ctx, cursor)
}
