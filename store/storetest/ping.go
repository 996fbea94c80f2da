package storetest

import (
	"context"
	"testing"
)

// runPing checks [store.Pinger].
func (s *suite) runPing(t *testing.T) {
	run(t, []testCase{
		{"Ping", s.ping},
	})
}

// ping checks that Ping answers nil on an open store, on an empty one as
// on one with tasks, and an error once its context has ended or its store
// is closed.
func (s *suite) ping(t *testing.T) {
	st := s.store(t)
	p := st
	if err := p.Ping(t.Context()); err != nil {
		t.Fatalf("Ping of an empty store: %v", err)
	}
	mustCreate(t, st, newTask("alice", base))
	if err := p.Ping(t.Context()); err != nil {
		t.Fatalf("Ping of a store with a task: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.Ping(ctx); err == nil {
		t.Error("Ping with an ended context returned nil")
	}
	if err := p.Ping(t.Context()); err != nil {
		t.Fatalf("Ping after a Ping with an ended context: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Ping(t.Context()); err == nil {
		t.Error("Ping of a closed store returned nil")
	}
}
