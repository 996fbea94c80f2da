// Package rollout decides how a task-augmented call of a tool is served
// while a change rolls out: as a task, or by the tool's fallback, under
// the fleet's switches (the drain switch kept in the store, the
// instance's own drain from its configuration, canaries, rollbacks). It
// holds no I/O: the root reads the switches from the store (see
// [Watcher]) and hands them over as a [State].
package rollout

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/mcptask/mcptask/task"
)

// Fallback is what a tool's task-augmented calls get when they are not
// served as tasks.
type Fallback string

// The fallbacks.
const (
	// Refuse refuses them (-32010, data naming the reason and the
	// fallback): the default.
	Refuse Fallback = "refuse"
	// Sync answers them synchronously, as plain calls, when the tool's
	// task support is Optional; a Required tool's are refused.
	Sync Fallback = "sync"
	// Handoff answers them with a task that waits for an operator to
	// record its outcome by hand.
	Handoff Fallback = "handoff"
	// Jobs refuses them, naming the job tools, which stay open.
	Jobs Fallback = "jobs"
)

// Check returns an error for an unknown fallback ("" is Refuse).
func (f Fallback) Check() error {
	switch f {
	case "", Refuse, Sync, Handoff, Jobs:
		return nil
	}
	return fmt.Errorf("unknown fallback %q: want refuse, sync, handoff or jobs", f)
}

// Or returns f, or d when f is empty.
func (f Fallback) Or(d Fallback) Fallback {
	if f == "" {
		return d
	}
	return f
}

// Drain is a drain switch: new tasks of every tool (All) or of Tools are
// not created; existing ones go on.
type Drain struct {
	// All drains every tool.
	All bool `json:"all"`
	// Tools are the tools drained when All is false.
	Tools []string `json:"tools"`
	// Fallback is what a drained tool's calls get when the tool declares
	// none; empty means Refuse.
	Fallback Fallback `json:"fallback,omitempty"`
}

// Drains reports whether d drains tool.
func (d Drain) Drains(tool string) bool { return d.All || slices.Contains(d.Tools, tool) }

// Active reports whether d drains any tool.
func (d Drain) Active() bool { return d.All || len(d.Tools) > 0 }

// Canary limits a tool's task-augmented starts to some requesters: those
// listed, and a deterministic share of the others.
type Canary struct {
	// Tenants and Principals are served as tasks: a principal as
	// "TENANT/PRINCIPAL", or "PRINCIPAL" for one of no tenant.
	Tenants    []string `json:"tenants,omitempty"`
	Principals []string `json:"principals,omitempty"`
	// Percent (0..100) of the other requesters are served as tasks,
	// chosen by a hash of the tool and the requester: the same requester
	// always gets the same mode for a given tool and percentage, and
	// raising the percentage only adds requesters.
	Percent int `json:"percent"`
}

// Check returns an error for a canary out of range.
func (c Canary) Check() error {
	if c.Percent < 0 || c.Percent > 100 {
		return fmt.Errorf("canary percent %d is not within 0..100", c.Percent)
	}
	return nil
}

// Admits reports whether the canary serves owner's calls of tool as tasks.
func (c Canary) Admits(tool string, owner task.Owner) bool {
	principal, tenant, _ := owner.Identity()
	if tenant != "" {
		principal = tenant + "/" + principal
	}
	if (tenant != "" && slices.Contains(c.Tenants, tenant)) || slices.Contains(c.Principals, principal) {
		return true
	}
	return Bucket(tool, owner) < c.Percent
}

// Bucket is the requester's place (0..99) in a tool's canary: the same
// for every instance and every release.
func Bucket(tool string, owner task.Owner) int {
	h := fnv.New32a()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write([]byte(owner.RateKey()))
	return int(h.Sum32() % 100)
}

// Rollback is a tool rolled back: its new calls get its fallback.
type Rollback struct {
	// Fallback is the fallback its new calls get.
	Fallback Fallback `json:"fallback"`
	// Report is the reconciliation report of its in-flight tasks as the
	// last rollback run left them.
	Report json.RawMessage `json:"report,omitempty"`
}

// State is the fleet's switches as one instance applies them.
type State struct {
	// Fleet is the drain switch in the store; Local this instance's own
	// (from its configuration). A tool either drains is drained.
	Fleet, Local Drain
	// Canaries and Rollbacks by tool.
	Canaries  map[string]Canary
	Rollbacks map[string]Rollback
}

// Why names why a call is not served as a task.
type Why string

// The reasons.
const (
	Draining   Why = "draining"
	NotCanary  Why = "canary"
	RolledBack Why = "rollback"
)

// Decision is how a task-augmented call is served.
type Decision struct {
	// Why is "" when the call is served as a task, else why not.
	Why Why
	// Fallback is what it gets instead (set when Why is).
	Fallback Fallback
}

// Task reports whether the call is served as a task.
func (d Decision) Task() bool { return d.Why == "" }

// Decide returns how owner's task-augmented call of tool is served: a
// rollback first, then the drain switches, then the canary. declared is
// the tool's own fallback ("" for none): it wins over the drain switch's.
func (s *State) Decide(tool string, owner task.Owner, declared Fallback) Decision {
	if s == nil {
		return Decision{}
	}
	if r, ok := s.Rollbacks[tool]; ok {
		return Decision{Why: RolledBack, Fallback: declared.Or(r.Fallback).Or(Refuse)}
	}
	for _, d := range []Drain{s.Fleet, s.Local} {
		if d.Drains(tool) {
			return Decision{Why: Draining, Fallback: declared.Or(d.Fallback).Or(Refuse)}
		}
	}
	if c, ok := s.Canaries[tool]; ok && !c.Admits(tool, owner) {
		return Decision{Why: NotCanary, Fallback: declared.Or(Refuse)}
	}
	return Decision{}
}

// Drains reports whether either drain switch drains tool (a rollback
// drains it too).
func (s *State) Drains(tool string) bool {
	if s == nil {
		return false
	}
	_, rolledBack := s.Rollbacks[tool]
	return rolledBack || s.Fleet.Drains(tool) || s.Local.Drains(tool)
}
