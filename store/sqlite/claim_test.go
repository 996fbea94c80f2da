package sqlite

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store/internal/rowcodec"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

func TestLeaseEncoding(t *testing.T) {
	for _, tc := range []struct {
		in   time.Time
		ceil int64
	}{
		{time.UnixMilli(1500).UTC(), 1500},
		{time.UnixMilli(1500).Add(time.Nanosecond), 1501},
		{time.UnixMilli(1500).Add(999_999 * time.Nanosecond), 1501},
		{time.UnixMilli(-1500).Add(time.Nanosecond), -1499},
		{time.UnixMilli(-1500), -1500},
	} {
		if got := rowcodec.CeilMS(tc.in); got != tc.ceil {
			t.Errorf("rowcodec.CeilMS(%v) = %d, want %d", tc.in, got, tc.ceil)
		}
	}
	if leaseMS(time.Time{}) != 0 || !rowcodec.OpTime(0).IsZero() {
		t.Error("the zero lease is not encoded as 0")
	}
	at := time.Date(2026, 7, 28, 9, 0, 0, 123_456_789, time.FixedZone("X", 3600))
	if got := rowcodec.OpTime(leaseMS(at)); !got.Equal(at.Truncate(time.Millisecond)) || got.Location() != time.UTC {
		t.Errorf("lease %v came back as %v", at, got)
	}
}

func TestClaimValidation(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "tasks.db"))
	ctx := t.Context()
	tk := newTask("alice", now)
	if err := s.Create(ctx, tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]store.ClaimRequest{
		"no runner":      {Now: now, Lease: time.Minute},
		"no lease":       {Runner: "e", Now: now},
		"negative lease": {Runner: "e", Now: now, Lease: -time.Second},
		"no now":         {Runner: "e", Lease: time.Minute},
	} {
		if got, err := s.Claim(ctx, req); err == nil {
			t.Errorf("Claim with %s succeeded: %v", name, got)
		}
	}
	if _, err := s.Heartbeat(ctx, "", []task.ID{tk.ID}, now); err == nil {
		t.Error("Heartbeat without a runner succeeded")
	}
	if _, err := s.Heartbeat(ctx, "e", []task.ID{tk.ID}, time.Time{}); err == nil {
		t.Error("Heartbeat without an until succeeded")
	}
	if got, err := s.Get(ctx, tk.ID); err != nil || got.Runner != "" || !got.LeaseExpiresAt.IsZero() {
		t.Errorf("after refused calls: %+v, %v", got, err)
	}
}

// TestClaimOrder checks the documented order: never held first, then by
// end of lease, then oldest first.
func TestClaimOrder(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "tasks.db"))
	ctx := t.Context()
	mk := func(created time.Time, lease time.Duration) *task.Task {
		tk := newTask("alice", created)
		if lease != 0 {
			tk.Runner = "engine-dead"
			tk.LeaseExpiresAt = now.Add(lease)
		}
		if err := s.Create(ctx, tk, store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return tk
	}
	// Created in an order unrelated to the expected one.
	d := mk(now.Add(-4*time.Hour), -time.Minute)
	b := mk(now.Add(-time.Hour), 0)
	c := mk(now.Add(-5*time.Hour), -time.Hour)
	a := mk(now.Add(-2*time.Hour), 0)
	e := mk(now.Add(-3*time.Hour), -time.Minute)
	want := []task.ID{a.ID, b.ID, c.ID, d.ID, e.ID}
	var got []task.ID
	for i := range 5 {
		claimed, err := s.Claim(ctx, store.ClaimRequest{Runner: fmt.Sprint("engine-", i), Now: now, Lease: time.Minute, Limit: 1})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("Claim %d = %v, %v", i, claimed, err)
		}
		got = append(got, claimed[0].ID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("claim order = %v, want %v", got, want)
	}
}

// TestClaimTwoStores stands for two processes claiming from one file.
func TestClaimTwoStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	stores := []*Store{openTest(t, path), openTest(t, path)}
	ctx := t.Context()
	const n = 60
	for range n {
		if err := stores[0].Create(ctx, newTask("alice", now), store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		holder = map[task.ID]string{}
	)
	for i := range 6 {
		s := stores[i%2]
		runner := fmt.Sprint("engine-", i)
		wg.Go(func() {
			for {
				got, err := s.Claim(ctx, store.ClaimRequest{Runner: runner, Now: now, Lease: time.Minute, Limit: 2})
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range got {
					if prev, ok := holder[tk.ID]; ok {
						t.Errorf("task %s claimed by %s and %s", tk.ID, prev, runner)
					}
					holder[tk.ID] = runner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(holder) != n {
		t.Errorf("claimed %d tasks, want %d", len(holder), n)
	}
	for id, runner := range holder {
		got, err := stores[1].Get(ctx, id)
		if err != nil || got.Runner != runner {
			t.Errorf("task %s: %+v, %v; want held by %s", id, got, err, runner)
		}
	}
}

// TestCreateRetried checks Create of a task that is already stored, as an
// engine retries it after losing the answer: with a key, the
// DuplicateError (the key is checked before the ID) hands back the task.
func TestCreateRetried(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "tasks.db"))
	ctx := t.Context()
	tk := newTask("alice", now)
	tk.IdempotencyKey = "k"
	if err := s.Create(ctx, tk, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var de *store.DuplicateError
	if err := s.Create(ctx, tk, store.CreateOptions{}); !errors.As(err, &de) || de.Task.ID != tk.ID {
		t.Errorf("Create of a stored task with a key: %v, want a DuplicateError with the task", err)
	}
	// Under another key, the same ID is only ErrExists.
	tk.IdempotencyKey = "other"
	if err := s.Create(ctx, tk, store.CreateOptions{}); !errors.Is(err, store.ErrExists) {
		t.Errorf("Create of a stored ID under another key: %v, want ErrExists", err)
	}
	// An Update cannot give a task a key its owner already uses.
	tk2 := newTask("alice", now)
	if err := s.Create(ctx, tk2, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, tk2.ID, func(t *task.Task) error { t.IdempotencyKey = "k"; return nil }); err == nil {
		t.Error("Update gave a task the key of another one")
	}
}
