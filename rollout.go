package mcptask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/internal/rollout"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// DrainFallback is what a tool's task-augmented calls get when the
// fleet's switches do not serve them as tasks (see [ToolOptions.Fallback]).
type DrainFallback string

// The fallbacks.
const (
	// DrainRefuse refuses them (-32010, data.reason "draining", "canary"
	// or "rollback", data.fallback): the default.
	DrainRefuse DrainFallback = "refuse"
	// DrainSync answers them synchronously, as plain calls, when the
	// tool's task support is Optional; a Required tool's are refused.
	DrainSync DrainFallback = "sync"
	// DrainHandoff answers them with a task that waits for an operator
	// to record its outcome by hand ([Server.RecordHandoff]).
	DrainHandoff DrainFallback = "handoff"
	// DrainJobs refuses them naming the job tools ([Server.AddJobTools]),
	// which stay open for the tool (but for a drain).
	DrainJobs DrainFallback = "jobs"
)

// DrainState is a drain switch: the fleet's (kept in the store, applied
// by every server sharing it) or one server's own ([Server.SetLocalDrain]).
type DrainState struct {
	// All drains every tool.
	All bool `json:"all"`
	// Tools are the tools drained when All is false.
	Tools []string `json:"tools"`
	// Fallback is what a drained tool's task-augmented calls get, unless
	// the tool declares its own; empty means DrainRefuse.
	Fallback DrainFallback `json:"fallback"`
	// Reason says why, By who set it, At when: filled in when read.
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// Active reports whether the switch drains any tool.
func (d DrainState) Active() bool { return d.All || len(d.Tools) > 0 }

// Equal reports whether d and o drain the same tools with the same
// fallback (tools in any order, an empty fallback as DrainRefuse).
func (d DrainState) Equal(o DrainState) bool {
	a, b := slices.Clone(d.Tools), slices.Clone(o.Tools)
	slices.Sort(a)
	slices.Sort(b)
	return d.All == o.All && slices.Equal(slices.Compact(a), slices.Compact(b)) && d.fallback() == o.fallback()
}

func (d DrainState) fallback() DrainFallback {
	if d.Fallback == "" {
		return DrainRefuse
	}
	return d.Fallback
}

// internal is d as package rollout applies it (an inactive switch keeps
// its fallback: what a drain set later without one gets).
func (d DrainState) internal() rollout.Drain {
	return rollout.Drain{All: d.All, Tools: slices.Clone(d.Tools), Fallback: rollout.Fallback(d.Fallback)}
}

// Canary limits a tool's task-augmented starts to some requesters (see
// [Server.SetCanary]); the others get the tool's fallback.
type Canary struct {
	// Tenants and Principals are served as tasks: a principal as
	// "TENANT/PRINCIPAL", or "PRINCIPAL" for one of no tenant.
	Tenants    []string `json:"tenants,omitempty"`
	Principals []string `json:"principals,omitempty"`
	// Percent (0..100) of the other requesters are served as tasks,
	// chosen by a hash of the tool and the requester: the same requester
	// gets the same mode on every server, and raising the percentage
	// only adds requesters.
	Percent int `json:"percent"`
	// Reason, By and At: filled in when read.
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// Fleet is the fleet's switches, as a server last read them from the
// store, and the server's own drain.
type Fleet struct {
	// Drain is the fleet's drain switch; LocalDrain this server's own
	// (mcptaskd's configuration): a tool either drains is drained.
	Drain      DrainState `json:"drain"`
	LocalDrain DrainState `json:"localDrain"`
	// Canaries and Rollbacks by tool.
	Canaries  map[string]Canary         `json:"canaries"`
	Rollbacks map[string]RollbackReport `json:"rollbacks"`
	// Version is the store's version of the switches read.
	Version int64 `json:"version"`
	// ReadAt is when they were read.
	ReadAt time.Time `json:"readAt"`
}

// ControlsInterval is how often a server reads the version of the
// fleet's switches in the store (one index read), and the switches when
// it moved: a change made on any server applies everywhere within it.
const ControlsInterval = 500 * time.Millisecond

// Drain sets the fleet's drain switch (see [Server.SetDrain]) with the
// fallback DrainRefuse; errors are logged.
func (s *Server) Drain(ctx context.Context, all bool, tools []string, by string) {
	if err := s.SetDrain(ctx, DrainState{All: all, Tools: tools}, by, ""); err != nil {
		s.core.Log().Error("setting the drain switch", "err", err)
	}
}

// SetDrain sets the fleet's drain switch to st: it is written to the
// store, applied here at once and by every server sharing the store
// within [ControlsInterval], and kept across restarts. New task-augmented
// calls of a drained tool get its fallback (st.Fallback unless the tool
// declares its own): refused (-32010, data.reason "draining"), answered
// synchronously (DrainSync, Optional tools), or handed off; existing
// tasks stay readable, answerable and cancellable. An inactive st lifts
// it. The audit trail records the change with by (what made it, e.g.
// "admin"), requester (who, if known) and st.Reason.
func (s *Server) SetDrain(ctx context.Context, st DrainState, by string, requester task.Owner) error {
	if err := rollout.Fallback(st.Fallback).Check(); err != nil {
		return fmt.Errorf("mcptask: %w", err)
	}
	var value json.RawMessage
	if st.Active() {
		value, _ = json.Marshal(st.internal())
	}
	if err := s.setControl(ctx, rollout.ControlDrain, value, by, requester, st.Reason); err != nil {
		return err
	}
	s.eng.Audit().DrainChanged(ctx, audit.DrainChange{All: st.All, Tools: st.Tools, Fallback: string(st.fallback()), By: by, Requester: requester, Reason: st.Reason})
	return nil
}

// DrainTool drains tool in the fleet's drain switch (drained) or lifts
// its drain, leaving the rest of the switch as it is in the store: a
// read-modify-write that retries when another server changed the switch
// meanwhile, so that no one's change is lost. Audited as SetDrain is.
func (s *Server) DrainTool(ctx context.Context, tool string, drained bool, by string, requester task.Owner, reason string) error {
	st := s.eng.Store()
	for range 20 {
		all, _, err := st.Controls(ctx)
		if err != nil {
			return fmt.Errorf("mcptask: reading the fleet's drain switch: %w", err)
		}
		var cur rollout.Drain
		var version int64
		if c := all[rollout.ControlDrain]; c != nil {
			version = c.Version
			if c.Value != nil {
				if err := json.Unmarshal(c.Value, &cur); err != nil {
					return fmt.Errorf("mcptask: the stored drain switch: %w", err)
				}
			}
		}
		tools := slices.DeleteFunc(slices.Clone(cur.Tools), func(t string) bool { return t == tool })
		if drained {
			tools = append(tools, tool)
			slices.Sort(tools)
		}
		next := DrainState{All: cur.All, Tools: tools, Fallback: DrainFallback(cur.Fallback), Reason: reason}
		if !cur.Active() {
			// A new drain: this server's own fallback (its
			// configuration's), if it has one.
			s.mu.RLock()
			next.Fallback = DrainFallback(s.localDrain.Fallback)
			s.mu.RUnlock()
		}
		var value json.RawMessage
		if next.Active() {
			value, _ = json.Marshal(next.internal())
		}
		_, err = st.SetControl(ctx, store.Control{Name: rollout.ControlDrain, Value: value, By: operatorLabel(by, requester), Reason: reason}, version)
		if errors.Is(err, store.ErrControlConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("mcptask: writing the fleet's drain switch: %w", err)
		}
		s.eng.Audit().ControlChanged(ctx, rollout.ControlDrain, string(value), by, requester, reason)
		s.eng.Audit().DrainChanged(ctx, audit.DrainChange{All: next.All, Tools: next.Tools, Fallback: string(next.fallback()), By: by, Requester: requester, Reason: reason})
		return s.readControls(ctx)
	}
	return errors.New("mcptask: the fleet's drain switch kept changing: try again")
}

// operatorLabel is who a switch is recorded as set by: what made the
// change, and the requester's TENANT/PRINCIPAL when known.
func operatorLabel(by string, requester task.Owner) string {
	if requester == "" {
		return by
	}
	p, t, _ := requester.Identity()
	if t != "" {
		p = t + "/" + p
	}
	return by + ":" + p
}

// SetLocalDrain sets this server's own drain switch (e.g. from its
// configuration), applied with the fleet's: a tool either drains is
// drained. It is not stored: a restart starts without it.
func (s *Server) SetLocalDrain(ctx context.Context, st DrainState, by string) error {
	if err := rollout.Fallback(st.Fallback).Check(); err != nil {
		return fmt.Errorf("mcptask: %w", err)
	}
	s.mu.Lock()
	was := s.localDrain
	s.localDrain = st.internal()
	s.mu.Unlock()
	s.applyControls()
	if st.Active() || was.Active() {
		s.eng.Audit().DrainChanged(ctx, audit.DrainChange{All: st.All, Tools: st.Tools, Fallback: string(st.fallback()), By: by + " (this instance)", Reason: st.Reason})
	}
	return nil
}

// Draining returns the fleet's drain switch as last read (Fallback set,
// Tools a copy).
func (s *Server) Draining() DrainState { return s.Fleet().Drain }

// SetCanary limits the task-augmented starts of tool to the requesters
// c admits, fleet-wide (as [Server.SetDrain] applies); nil lifts it. The
// others get the tool's fallback. Audited with by, requester and reason.
func (s *Server) SetCanary(ctx context.Context, tool string, c *Canary, by string, requester task.Owner, reason string) error {
	var value json.RawMessage
	if c != nil {
		rc := rollout.Canary{Tenants: c.Tenants, Principals: c.Principals, Percent: c.Percent}
		if err := rc.Check(); err != nil {
			return fmt.Errorf("mcptask: %w", err)
		}
		value, _ = json.Marshal(rc)
	}
	if tool == "" {
		return errors.New("mcptask: SetCanary without a tool")
	}
	return s.setControl(ctx, rollout.ControlCanary+tool, value, by, requester, reason)
}

// Fleet returns the fleet's switches as this server last read them.
func (s *Server) Fleet() Fleet {
	controls, version, at := s.fleet.Last()
	s.mu.RLock()
	local := s.localDrain
	s.mu.RUnlock()
	f := Fleet{Canaries: map[string]Canary{}, Rollbacks: map[string]RollbackReport{}, Version: version, ReadAt: at,
		LocalDrain: DrainState{All: local.All, Tools: slices.Clone(local.Tools), Fallback: DrainFallback(local.Fallback).orRefuse()},
		Drain:      DrainState{Tools: []string{}, Fallback: DrainRefuse}}
	if f.LocalDrain.Tools == nil {
		f.LocalDrain.Tools = []string{}
	}
	for _, name := range slices.Sorted(maps.Keys(controls)) {
		c := controls[name]
		if c.Value == nil {
			continue // cleared
		}
		switch {
		case name == rollout.ControlDrain:
			var d rollout.Drain
			if json.Unmarshal(c.Value, &d) == nil {
				f.Drain = DrainState{All: d.All, Tools: append([]string{}, d.Tools...), Fallback: DrainFallback(d.Fallback).orRefuse(), Reason: c.Reason, By: c.By, At: c.At}
			}
		case strings.HasPrefix(name, rollout.ControlCanary):
			var rc rollout.Canary
			if json.Unmarshal(c.Value, &rc) == nil {
				f.Canaries[strings.TrimPrefix(name, rollout.ControlCanary)] = Canary{Tenants: rc.Tenants, Principals: rc.Principals, Percent: rc.Percent, Reason: c.Reason, By: c.By, At: c.At}
			}
		case strings.HasPrefix(name, rollout.ControlRollback):
			var rb rollout.Rollback
			if json.Unmarshal(c.Value, &rb) == nil {
				var rep RollbackReport
				_ = json.Unmarshal(rb.Report, &rep)
				rep.Tool, rep.Fallback, rep.Reason, rep.By, rep.At = strings.TrimPrefix(name, rollout.ControlRollback), DrainFallback(rb.Fallback), c.Reason, c.By, c.At
				f.Rollbacks[rep.Tool] = rep
			}
		}
	}
	return f
}

func (f DrainFallback) orRefuse() DrainFallback {
	if f == "" {
		return DrainRefuse
	}
	return f
}

// setControl writes a switch and applies the switches at once here.
func (s *Server) setControl(ctx context.Context, name string, value json.RawMessage, by string, requester task.Owner, reason string) error {
	_, err := s.setControlAt(ctx, name, value, by, requester, reason, -1)
	return err
}

// setControlAt is setControl if the switch is still at ifVersion (see
// store.Controls.SetControl); it returns the switch as written.
func (s *Server) setControlAt(ctx context.Context, name string, value json.RawMessage, by string, requester task.Owner, reason string, ifVersion int64) (*store.Control, error) {
	c, err := s.eng.Store().SetControl(ctx, store.Control{Name: name, Value: value, By: operatorLabel(by, requester), Reason: reason}, ifVersion)
	if errors.Is(err, store.ErrControlConflict) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("mcptask: writing the fleet's switch %s: %w", name, err)
	}
	s.eng.Audit().ControlChanged(ctx, name, string(value), by, requester, reason)
	return c, s.readControls(ctx)
}

// readControls reads the switches from the store if their version
// moved, and applies them.
func (s *Server) readControls(ctx context.Context) error {
	return s.fleet.Read(ctx, s.eng.Now())
}

// applyControls hands the switches last read, and the local drain, to
// the adapter, and lets the queues a switch no longer holds start.
func (s *Server) applyControls() {
	// Serialized, each with the newest switches read: an older snapshot
	// never replaces a newer one.
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	controls, _, _ := s.fleet.Last()
	s.mu.RLock()
	local := s.localDrain
	s.mu.RUnlock()
	s.core.SetRollout(rollout.StateOf(controls, local))
	s.eng.KickQueues()
}

// startControls starts the service that reads the fleet's switches every
// ControlsInterval (and sweeps the expired approvals).
func (s *Server) startControls() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	rctx, rcancel := context.WithTimeout(ctx, rollout.DefaultReadTimeout)
	if err := s.readControls(rctx); err != nil {
		s.core.Log().Warn("reading the fleet's switches", "err", err)
	}
	rcancel()
	swept := make(chan struct{})
	go func() {
		defer close(done)
		s.fleet.Run(ctx, s.eng.Now)
	}()
	go func() {
		// Apart from the switches' reads: a long sweep never delays the
		// kill switch.
		defer close(swept)
		tick := time.NewTicker(ApprovalSweepInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				s.expireApprovals(ctx)
			}
		}
	}()
	s.stopControls = func() {
		cancel()
		<-done
		<-swept
	}
}

// queueHeld reports whether the switches hold the waiting tasks of queue
// q: when they drain every tool of that queue, their waiting tasks do not
// start either (the switch stops new work reaching the system behind
// them); they keep their place and start once it is lifted. A queue
// shared with a tool still open is not held.
func (s *Server) queueHeld(q string) bool {
	st := s.core.Rollout()
	if st == nil {
		return false
	}
	if st.Fleet.All || st.Local.All {
		return true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	held := false
	for name, o := range s.tools {
		if o.queue(name) != q {
			continue
		}
		if !st.Drains(name) {
			return false
		}
		held = true
	}
	return held
}

// SetToolRollout sets the fallback and the approval of the tool name,
// registered already (e.g. by a tool source, from a configuration), as
// [ToolOptions.Fallback] and [ToolOptions.Approval] would. It must be
// called before [Server.Start].
func (s *Server) SetToolRollout(name string, fallback DrainFallback, approval *Approval) error {
	if err := rollout.Fallback(fallback).Check(); err != nil {
		return fmt.Errorf("mcptask: tool %s: %w", name, err)
	}
	if approval != nil && len(approval.Approvers) == 0 {
		return fmt.Errorf("mcptask: tool %s: an approval needs approvers", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		panic(afterStart("SetToolRollout", name))
	}
	o, ok := s.tools[name]
	if !ok {
		return fmt.Errorf("mcptask: no tool %s", name)
	}
	o.Fallback, o.Approval = fallback, approval
	s.tools[name] = o
	return nil
}
