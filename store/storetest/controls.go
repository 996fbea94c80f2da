package storetest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
)

// runControls checks [store.Controls].
func (s *suite) runControls(t *testing.T) {
	run(t, []testCase{
		{"SetRead", s.controlsSetRead},
		{"Conflict", s.controlsConflict},
		{"Shared", s.controlsShared},
	})
}

// controlsSetRead checks that a control reads back as written, with who,
// why and when, that every write raises the fleet's version, and that a
// cleared control reads with no value and its version. Times are kept to
// the millisecond.
func (s *suite) controlsSetRead(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	if v, err := st.ControlsVersion(ctx); err != nil || v != 0 {
		t.Fatalf("ControlsVersion of an empty store = %d, %v; want 0", v, err)
	}
	c, err := st.SetControl(ctx, store.Control{Name: "drain", Value: json.RawMessage(`{"all":true}`), By: "alice", Reason: "incident 7", At: base}, -1)
	if err != nil {
		t.Fatalf("SetControl: %v", err)
	}
	if c.Version != 1 || !c.At.Equal(base.Truncate(time.Millisecond)) {
		t.Fatalf("SetControl = version %d at %v; want 1 at %v", c.Version, c.At, base)
	}
	if _, err := st.SetControl(ctx, store.Control{Name: "canary/deploy", Value: json.RawMessage(`{"percent":10}`), By: "bob"}, -1); err != nil {
		t.Fatalf("SetControl: %v", err)
	}
	all, v, err := st.Controls(ctx)
	if err != nil || v != 2 || len(all) != 2 {
		t.Fatalf("Controls = %d controls, version %d, %v; want 2, 2", len(all), v, err)
	}
	d := all["drain"]
	if d == nil || string(d.Value) != `{"all":true}` || d.By != "alice" || d.Reason != "incident 7" || !d.At.Equal(base.Truncate(time.Millisecond)) || d.Version != 1 {
		t.Fatalf("drain = %+v", d)
	}
	if all["canary/deploy"].At.IsZero() {
		t.Error("a control set with a zero At has no time")
	}
	c, err = st.SetControl(ctx, store.Control{Name: "drain", By: "alice", Reason: "over"}, -1)
	if err != nil || c.Version != 3 || c.Value != nil {
		t.Fatalf("clearing: %+v, %v; want version 3, no value", c, err)
	}
	all, v, err = st.Controls(ctx)
	if err != nil || v != 3 || len(all) != 2 || all["drain"].Value != nil || all["drain"].Version != 3 || all["drain"].Reason != "over" {
		t.Fatalf("after clearing: %v, version %d, %v; want drain cleared at 3", all, v, err)
	}
	if v, err := st.ControlsVersion(ctx); err != nil || v != 3 {
		t.Fatalf("ControlsVersion = %d, %v; want 3", v, err)
	}
	if _, err := st.SetControl(ctx, store.Control{Name: "x", Value: json.RawMessage(`{`)}, -1); err == nil {
		t.Error("SetControl of a value that is not JSON returned nil")
	}
	if _, err := st.SetControl(ctx, store.Control{Value: json.RawMessage(`1`)}, -1); err == nil {
		t.Error("SetControl without a name returned nil")
	}
	if v, _ := st.ControlsVersion(ctx); v != 3 {
		t.Errorf("refused writes moved the version to %d", v)
	}
}

// controlsConflict checks the compare-and-set of SetControl: a write
// against a stale version writes nothing, and of many concurrent writers
// from the same version exactly one wins.
func (s *suite) controlsConflict(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	c, err := st.SetControl(ctx, store.Control{Name: "rollback/deploy", Value: json.RawMessage(`1`)}, 0)
	if err != nil {
		t.Fatalf("SetControl of a new control at version 0: %v", err)
	}
	// Cleared, it keeps its version: a writer that read it cleared
	// writes at that version.
	cleared, err := st.SetControl(ctx, store.Control{Name: "rollback/deploy"}, c.Version)
	if err != nil {
		t.Fatal(err)
	}
	all, _, err := st.Controls(ctx)
	if err != nil || all["rollback/deploy"] == nil || all["rollback/deploy"].Version != cleared.Version {
		t.Fatalf("a cleared control reads %+v, %v; want its version %d", all["rollback/deploy"], err, cleared.Version)
	}
	if c, err = st.SetControl(ctx, store.Control{Name: "rollback/deploy", Value: json.RawMessage(`1`)}, cleared.Version); err != nil {
		t.Fatalf("SetControl at the cleared control's version: %v", err)
	}
	if _, err := st.SetControl(ctx, store.Control{Name: "rollback/deploy", Value: json.RawMessage(`2`)}, 0); !errors.Is(err, store.ErrControlConflict) {
		t.Fatalf("SetControl at a stale version: %v; want ErrControlConflict", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := range 8 {
		wg.Go(func() {
			_, err := st.SetControl(ctx, store.Control{Name: "rollback/deploy", Value: json.RawMessage([]byte{byte('0' + i)})}, c.Version)
			switch {
			case err == nil:
				mu.Lock()
				wins++
				mu.Unlock()
			case !errors.Is(err, store.ErrControlConflict):
				t.Errorf("SetControl: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d of 8 writers from one version won; want exactly 1", wins)
	}
}

// controlsShared checks that another store on the same task space reads
// what one wrote, and that writes from both raise one version.
func (s *suite) controlsShared(t *testing.T) {
	a := s.store(t)
	b := s.shared(t, a)
	ctx := t.Context()
	if _, err := a.SetControl(ctx, store.Control{Name: "drain", Value: json.RawMessage(`{"tools":["deploy"]}`), By: "ops"}, -1); err != nil {
		t.Fatal(err)
	}
	c, err := b.SetControl(ctx, store.Control{Name: "canary/deploy", Value: json.RawMessage(`{"percent":5}`)}, -1)
	if err != nil || c.Version != 2 {
		t.Fatalf("SetControl on the second store: %+v, %v; want version 2", c, err)
	}
	all, v, err := a.Controls(ctx)
	if err != nil || v != 2 || all["canary/deploy"] == nil || all["drain"].By != "ops" {
		t.Fatalf("Controls on the first store: %v, version %d, %v", all, v, err)
	}
}
