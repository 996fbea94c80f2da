package sqlite

import (
	"context"
	"errors"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// Claim implements store.Store. (Placeholder: to be implemented.)
func (s *Store) Claim(ctx context.Context, req store.ClaimRequest) ([]*task.Task, error) {
	return nil, errors.New("sqlite store: Claim not implemented yet")
}

// Heartbeat implements store.Store. (Placeholder: to be implemented.)
func (s *Store) Heartbeat(ctx context.Context, runner string, ids []task.ID, until time.Time) ([]task.ID, error) {
	return nil, errors.New("sqlite store: Heartbeat not implemented yet")
}
