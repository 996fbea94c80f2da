package rollout

import (
	"fmt"
	"testing"

	"github.com/mcptask/mcptask/task"
)

// TestDecide: a rollback wins over the drains, the drains over the
// canary; the tool's declared fallback wins over the switch's; the
// fleet's and the instance's drain each drain.
func TestDecide(t *testing.T) {
	alice := task.UserOwner("acme", "alice")
	bob := task.UserOwner("other", "bob")
	for _, c := range []struct {
		name     string
		st       *State
		owner    task.Owner
		declared Fallback
		want     Decision
	}{
		{"nil state", nil, alice, "", Decision{}},
		{"nothing set", &State{}, alice, "", Decision{}},
		{"fleet drain", &State{Fleet: Drain{Tools: []string{"deploy"}, Fallback: Sync}}, alice, "", Decision{Why: Draining, Fallback: Sync}},
		{"local drain", &State{Local: Drain{All: true}}, alice, "", Decision{Why: Draining, Fallback: Refuse}},
		{"declared wins", &State{Fleet: Drain{All: true, Fallback: Sync}}, alice, Handoff, Decision{Why: Draining, Fallback: Handoff}},
		{"other tool drained", &State{Fleet: Drain{Tools: []string{"build"}}}, alice, "", Decision{}},
		{"rollback first", &State{Fleet: Drain{All: true}, Rollbacks: map[string]Rollback{"deploy": {Fallback: Jobs}}}, alice, "", Decision{Why: RolledBack, Fallback: Jobs}},
		{"canary tenant", &State{Canaries: map[string]Canary{"deploy": {Tenants: []string{"acme"}}}}, alice, "", Decision{}},
		{"canary principal", &State{Canaries: map[string]Canary{"deploy": {Principals: []string{"other/bob"}}}}, bob, "", Decision{}},
		{"canary principal of another tenant", &State{Canaries: map[string]Canary{"deploy": {Principals: []string{"bob", "acme/bob"}}}}, bob, "", Decision{Why: NotCanary, Fallback: Refuse}},
		{"outside the canary", &State{Canaries: map[string]Canary{"deploy": {Tenants: []string{"acme"}}}}, bob, Sync, Decision{Why: NotCanary, Fallback: Sync}},
		{"canary 100%", &State{Canaries: map[string]Canary{"deploy": {Percent: 100}}}, bob, "", Decision{}},
		{"drain over canary", &State{Local: Drain{Tools: []string{"deploy"}}, Canaries: map[string]Canary{"deploy": {Percent: 100}}}, bob, "", Decision{Why: Draining, Fallback: Refuse}},
	} {
		if got := c.st.Decide("deploy", c.owner, c.declared); got != c.want {
			t.Errorf("%s: %+v; want %+v", c.name, got, c.want)
		}
	}
}

// TestCanaryPercent: the share admitted follows the percentage (within a
// few points over 10,000 requesters), raising it only adds requesters,
// and the place of a requester is the same for every call.
func TestCanaryPercent(t *testing.T) {
	owners := make([]task.Owner, 10000)
	for i := range owners {
		owners[i] = task.UserOwner("t", fmt.Sprintf("p%d", i))
	}
	prev := map[task.Owner]bool{}
	for _, pct := range []int{0, 5, 25, 50, 100} {
		c := Canary{Percent: pct}
		n := 0
		for _, o := range owners {
			in := c.Admits("deploy", o)
			if prev[o] && !in {
				t.Fatalf("raising the canary to %d%% dropped %s", pct, o)
			}
			if in {
				n++
			}
			prev[o] = in
		}
		if share := n * 100 / len(owners); share < pct-3 || share > pct+3 {
			t.Errorf("canary %d%% admits %d%%", pct, share)
		}
	}
	// Anonymous requesters share one bucket (their rate key).
	if Bucket("deploy", task.AnonymousOwner("s1")) != Bucket("deploy", task.AnonymousOwner("s2")) {
		t.Error("two anonymous requesters have different buckets")
	}
	if (Canary{Percent: 101}).Check() == nil || (Canary{Percent: -1}).Check() == nil || Fallback("later").Check() == nil {
		t.Error("an out-of-range canary or unknown fallback passed Check")
	}
}

// BenchmarkDecide: the decision every task-augmented call makes, with
// no switch set (the common case) and with a drain, a canary and a
// rollback of other tools and a canary of this one.
func BenchmarkDecide(b *testing.B) {
	owner := task.UserOwner("acme", "alice")
	for _, c := range []struct {
		name string
		st   *State
	}{
		{"none", &State{}},
		{"canary", &State{Fleet: Drain{Tools: []string{"build"}}, Canaries: map[string]Canary{"deploy": {Percent: 50, Tenants: []string{"other"}}, "x": {}},
			Rollbacks: map[string]Rollback{"y": {Fallback: Sync}}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = c.st.Decide("deploy", owner, "")
			}
		})
	}
}
