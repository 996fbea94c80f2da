package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runHeartbeat checks Heartbeat: the leases a runner holds are extended,
// the others reported lost, through the life the engine gives a task.
func (s *suite) runHeartbeat(t *testing.T) {
	run(t, []testCase{
		{"Heartbeat", s.heartbeat},
		{"Takeover", s.heartbeatTakeover},
	})
}

func (s *suite) heartbeat(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	now := base
	const r1, r2 = "engine-1", "engine-2"
	live := now.Add(time.Minute)

	held := leaseTask(task.Working, r1, live)
	heldInput := leaseTask(task.InputRequired, r1, live)
	// Its lease ended, but no one took it over: still r1's.
	heldLapsed := leaseTask(task.Working, r1, now.Add(-time.Minute))
	takenOver := leaseTask(task.Working, r2, live)
	unheld := leaseTask(task.Working, "", time.Time{})
	// Terminal, even with r1's name and a live lease on it.
	endedHeld := leaseTask(task.Completed, r1, live)
	toCancel := leaseTask(task.Working, r1, live)
	toDelete := leaseTask(task.Working, r1, live)
	mustCreate(t, st, held, heldInput, heldLapsed, takenOver, unheld, endedHeld, toCancel, toDelete)
	cancelled, err := st.Update(ctx, toCancel.ID, func(tk *task.Task) error { return tk.Cancel("cancelled by the client", now) })
	if err != nil {
		t.Fatal(err)
	}
	if err := deleterOf(t, st).Delete(ctx, toDelete.ID); err != nil {
		t.Fatal(err)
	}
	unknown := task.NewID()

	until := now.Add(2 * time.Minute)
	lost, err := st.Heartbeat(ctx, r1, []task.ID{
		held.ID, takenOver.ID, heldInput.ID, unheld.ID, heldLapsed.ID, endedHeld.ID,
		toCancel.ID, toDelete.ID, unknown, "no-such-task",
	}, until)
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	wantLost := []task.ID{takenOver.ID, unheld.ID, endedHeld.ID, toCancel.ID, toDelete.ID, unknown, "no-such-task"}
	if !slices.Equal(sortedIDs(lost), sortedIDs(wantLost)) {
		t.Errorf("Heartbeat lost %v, want %v (in any order)", lost, wantLost)
	}
	for _, tk := range []*task.Task{held, heldInput, heldLapsed} {
		w := want(tk)
		w.LeaseExpiresAt = ms(until)
		checkTask(t, "task whose lease a Heartbeat extended", mustGet(t, st, tk.ID), w)
	}
	checkUnchanged(t, st, "task lost to a Heartbeat", takenOver, unheld, endedHeld)
	checkTask(t, "cancelled task after a Heartbeat", mustGet(t, st, toCancel.ID), cancelled)
	if _, err := st.Get(ctx, toDelete.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Heartbeat brought back a deleted task: %v", err)
	}

	// r2 keeps its task and has none of r1's.
	until2 := until.Add(time.Minute)
	lost, err = st.Heartbeat(ctx, r2, []task.ID{held.ID, takenOver.ID}, until2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lost, []task.ID{held.ID}) {
		t.Errorf("Heartbeat of %s lost %v, want [%s]", r2, lost, held.ID)
	}
	w := want(takenOver)
	w.LeaseExpiresAt = ms(until2)
	checkTask(t, "task whose lease a Heartbeat extended", mustGet(t, st, takenOver.ID), w)

	// No IDs: nothing to do, nothing lost.
	for _, none := range [][]task.ID{nil, {}} {
		lost, err := st.Heartbeat(ctx, r1, none, until)
		if err != nil || len(lost) != 0 {
			t.Errorf("Heartbeat(%#v) = %v, %v; want nothing lost and no error", none, lost, err)
		}
	}
}

// heartbeatTakeover follows one task through the life the engine gives it:
// claimed, kept alive, taken over after its holder stalled, ended.
func (s *suite) heartbeatTakeover(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	now := base
	const lease = 30 * time.Second
	tk := newTask("alice", base)
	mustCreate(t, st, tk)

	mustClaim(t, st, store.ClaimRequest{Runner: "engine-1", Now: now, Lease: lease}, []*task.Task{tk})
	lost, err := st.Heartbeat(ctx, "engine-1", []task.ID{tk.ID}, now.Add(20*time.Second+lease))
	if err != nil || len(lost) != 0 {
		t.Fatalf("Heartbeat of the holder = %v, %v; want nothing lost", lost, err)
	}
	held := claimedAs(tk, "engine-1", now.Add(20*time.Second+lease))
	checkTask(t, "task after a Heartbeat", mustGet(t, st, tk.ID), held)
	// Before the extended lease ends, no one may take it.
	mustClaim(t, st, store.ClaimRequest{Runner: "engine-2", Now: now.Add(40 * time.Second), Lease: lease}, nil)

	// engine-1 stalls; once its lease has ended engine-2 takes over.
	takeover := now.Add(51 * time.Second)
	mustClaim(t, st, store.ClaimRequest{Runner: "engine-2", Now: takeover, Lease: lease}, []*task.Task{held})
	lost, err = st.Heartbeat(ctx, "engine-1", []task.ID{tk.ID}, takeover.Add(lease))
	if err != nil || !slices.Equal(lost, []task.ID{tk.ID}) {
		t.Fatalf("late Heartbeat of the former holder = %v, %v; want [%s] lost", lost, err, tk.ID)
	}
	checkTask(t, "task after a late Heartbeat of its former holder", mustGet(t, st, tk.ID), claimedAs(held, "engine-2", takeover.Add(lease)))
	if lost, err := st.Heartbeat(ctx, "engine-2", []task.ID{tk.ID}, takeover.Add(2*lease)); err != nil || len(lost) != 0 {
		t.Fatalf("Heartbeat of the new holder = %v, %v; want nothing lost", lost, err)
	}

	// The work ends (task.Transition drops Runner and lease): a
	// Heartbeat now reports the task lost, and Claim never takes it.
	ended, err := st.Update(ctx, tk.ID, func(tk *task.Task) error {
		return tk.Complete(json.RawMessage(`{"content":[]}`), takeover.Add(time.Second))
	})
	if err != nil {
		t.Fatal(err)
	}
	if ended.Runner != "" || !ended.LeaseExpiresAt.IsZero() {
		t.Errorf("ended task: Runner %q, LeaseExpiresAt %v; want none", ended.Runner, ended.LeaseExpiresAt)
	}
	lost, err = st.Heartbeat(ctx, "engine-2", []task.ID{tk.ID}, takeover.Add(3*lease))
	if err != nil || !slices.Equal(lost, []task.ID{tk.ID}) {
		t.Fatalf("Heartbeat of an ended task = %v, %v; want [%s] lost", lost, err, tk.ID)
	}
	mustClaim(t, st, store.ClaimRequest{Runner: "engine-3", Now: takeover.Add(time.Hour), Lease: lease, IgnoreLeases: true}, nil)
	checkTask(t, "ended task", mustGet(t, st, tk.ID), ended)
}
