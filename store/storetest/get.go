package storetest

import (
	"errors"
	"testing"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runGet checks Get of what is not there.
func (s *suite) runGet(t *testing.T) {
	run(t, []testCase{
		{"Unknown", s.getUnknown},
	})
}

func (s *suite) getUnknown(t *testing.T) {
	st := s.store(t)
	mustCreate(t, st, newTask("alice", base))
	for _, id := range []task.ID{task.NewID(), "no-such-task", "x"} {
		got, err := st.Get(t.Context(), id)
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%q): err = %v, want store.ErrNotFound", id, err)
		}
		if got != nil {
			t.Errorf("Get(%q) returned %+v with an error", id, got)
		}
	}
}
