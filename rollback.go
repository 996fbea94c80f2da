package mcptask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/rollout"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// RollbackReport is what a rollback of a tool found and did (see
// [Server.Rollback]), stored with the rollback.
type RollbackReport struct {
	// Tool, Fallback (what its new calls get), Reason, By and At.
	Tool     string        `json:"tool"`
	Fallback DrainFallback `json:"fallback"`
	Reason   string        `json:"reason,omitempty"`
	By       string        `json:"by,omitempty"`
	At       time.Time     `json:"at,omitzero"`
	// Running are the tool's tasks still unfinished (they go on, and stay
	// readable, answerable and cancellable); Held those of them held for
	// an approval or a handoff.
	Running []string `json:"running"`
	Held    []string `json:"held"`
	// Confirmed, Rejected, Unknown and InFlight are the keys of the
	// operations of the unfinished tasks as reconciliation left them:
	// applied, not applied, not known (for an operator), and still
	// intended or submitted by work that runs (only the system of
	// record's confirmations are recorded while work runs: it may yet
	// apply what the system has not seen).
	Confirmed []string `json:"confirmed"`
	Rejected  []string `json:"rejected"`
	Unknown   []string `json:"unknown"`
	InFlight  []string `json:"inFlight"`
	// Undone is set by an undo.
	Undone bool `json:"undone,omitempty"`
}

// Rollback rolls tool back, fleet-wide: new task-augmented calls get the
// tool's declared fallback at once on every server sharing the store
// (DrainRefuse if it declares none), the tasks already created go on
// and stay observable and answerable, and every unsettled operation of
// its unfinished tasks is reconciled with the system of record
// ([ToolOptions.Reconcile]). The report is stored with the rollback and
// returned. Rolling back again reconciles again and reports the state
// then (idempotent: the same state gives the same report). Audited.
func (s *Server) Rollback(ctx context.Context, tool, by string, requester task.Owner, reason string) (*RollbackReport, error) {
	s.mu.RLock()
	o, ok := s.tools[tool]
	s.mu.RUnlock()
	if !ok || o.Support == Forbidden || o.Support == "" {
		return nil, fmt.Errorf("mcptask: %q is not a task tool of this server", tool)
	}
	fb := o.Fallback.orRefuse()
	rb := rollout.Rollback{Fallback: rollout.Fallback(fb)}
	value, _ := json.Marshal(rb)
	// Stop new starts first, then look at what is in flight.
	first, err := s.setControlAt(ctx, rollout.ControlRollback+tool, value, by, requester, reason, -1)
	if err != nil {
		return nil, err
	}
	rep, err := s.reconcileTool(ctx, tool)
	if err != nil {
		return nil, err
	}
	rep.Fallback = fb
	rb.Report, _ = json.Marshal(rep)
	value, _ = json.Marshal(rb)
	// The report goes with the rollback only if nobody changed it
	// meanwhile (an undo stays undone).
	if _, err := s.setControlAt(ctx, rollout.ControlRollback+tool, value, by, requester, reason, first.Version); errors.Is(err, store.ErrControlConflict) {
		return nil, fmt.Errorf("mcptask: the rollback of %s changed while it ran (undone, or rolled back again): its report is not stored; look again", tool)
	} else if err != nil {
		return nil, err
	}
	f := s.Fleet()
	out := f.Rollbacks[tool]
	return &out, nil
}

// UndoRollback lifts the rollback of tool: its new calls are served as
// tasks again (under the other switches). Audited. A tool not rolled
// back is left as it is.
func (s *Server) UndoRollback(ctx context.Context, tool, by string, requester task.Owner, reason string) error {
	// From the store, not this server's last read: another server's
	// rollback may be newer than it.
	all, _, err := s.eng.Store().Controls(ctx)
	if err != nil {
		return fmt.Errorf("mcptask: reading the fleet's switches: %w", err)
	}
	if c := all[rollout.ControlRollback+tool]; c == nil || c.Value == nil {
		return nil
	}
	return s.setControl(ctx, rollout.ControlRollback+tool, nil, by, requester, reason)
}

// reconcileTool reconciles the unsettled operations of tool's
// unfinished tasks and reports them.
func (s *Server) reconcileTool(ctx context.Context, tool string) (RollbackReport, error) {
	rep := RollbackReport{Tool: tool, Running: []string{}, Held: []string{}, Confirmed: []string{}, Rejected: []string{}, Unknown: []string{}, InFlight: []string{}}
	q := store.BrowseQuery{Tool: tool, Statuses: []task.Status{task.Working, task.InputRequired}, Limit: store.MaxBrowseLimit}
	for {
		ts, next, err := s.eng.Store().Browse(ctx, q)
		if err != nil {
			return rep, err
		}
		for _, t := range ts {
			rep.Running = append(rep.Running, string(t.ID))
			if t.Queued && strings.HasPrefix(t.Queue, engine.GatePrefix) {
				rep.Held = append(rep.Held, string(t.ID))
			}
			if err := s.eng.ReconcileOperations(ctx, t); err != nil {
				return rep, err
			}
			// Every operation of the task as reconciliation left it, so
			// that a second rollback reports the same state.
			oq := store.OperationQuery{TaskID: t.ID, Limit: store.MaxOperationLimit}
			for {
				ops, next, err := s.eng.Operations(ctx, t.Owner, oq)
				if err != nil {
					return rep, err
				}
				for _, op := range ops {
					switch op.State {
					case task.OpConfirmed:
						rep.Confirmed = append(rep.Confirmed, op.Key)
					case task.OpRejected:
						rep.Rejected = append(rep.Rejected, op.Key)
					case task.OpUnknown:
						rep.Unknown = append(rep.Unknown, op.Key)
					default:
						if engine.Running(t) {
							rep.InFlight = append(rep.InFlight, op.Key)
						} else {
							rep.Unknown = append(rep.Unknown, op.Key)
						}
					}
				}
				if next == "" {
					break
				}
				oq.Cursor = next
			}
		}
		if next == "" {
			break
		}
		q.Cursor = next
	}
	for _, l := range [][]string{rep.Running, rep.Held, rep.Confirmed, rep.Rejected, rep.Unknown, rep.InFlight} {
		slices.Sort(l)
	}
	return rep, nil
}
