package mcptask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/events"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Approval holds every new task of a tool until an approver approves it
// (SEP-2848's asynchronous approval, on both wires): the call is answered
// at once with a task that stays working, its status message naming the
// approvers, and its work starts only once the approval is durable,
// exactly once however many approve it at once, on any server sharing the
// store. A denial or the expiry ends it failed, naming who and why.
// Pending approvals survive restarts and takeovers: no server holds them.
type Approval struct {
	// Approvers may approve or deny: operator or principal names
	// ("PRINCIPAL", or "TENANT/PRINCIPAL"), "scope:NAME" for any requester
	// whose token carries the scope NAME (deciding over MCP, see
	// wire.MethodApprovalsDecide), "*" for any operator.
	Approvers []string
	// Expires is how long an approval may wait; zero means
	// DefaultApprovalExpiry.
	Expires time.Duration
	// Reason says why the tool needs one (shown to the requester).
	Reason string
	// SelfApproval lets an approver approve its own call.
	SelfApproval bool
}

// DefaultApprovalExpiry is how long an approval waits when
// Approval.Expires is zero.
const DefaultApprovalExpiry = time.Hour

func (a *Approval) expires() time.Duration {
	if a.Expires <= 0 {
		return DefaultApprovalExpiry
	}
	return a.Expires
}

// message is the status message of a task waiting for its approval.
func (a *Approval) message(now time.Time) string {
	msg := "waiting for approval by " + strings.Join(a.Approvers, " or ")
	if a.Reason != "" {
		msg += " (" + a.Reason + ")"
	}
	return msg + "; expires " + now.Add(a.expires()).UTC().Format(time.RFC3339)
}

// approver is who decides an approval: an operator (the admin
// endpoint, the dashboard: "*" admits any), or a requester over MCP
// (admitted by its principal, "TENANT/PRINCIPAL", or a "scope:NAME" its
// token carries).
type approver struct {
	name     string // the operator's name, or the requester's principal
	tenant   string // the requester's tenant ("" for none or an operator)
	scopes   []string
	operator bool
	owner    task.Owner // for the audit trail
}

// String is the name decisions are recorded under.
func (ap approver) String() string {
	if ap.tenant != "" {
		return ap.tenant + "/" + ap.name
	}
	return ap.name
}

// admits reports whether ap is one of a's approvers.
func (a *Approval) admits(ap approver) bool {
	for _, x := range a.Approvers {
		switch {
		case x == "*":
			if ap.operator {
				return true
			}
		case strings.HasPrefix(x, "scope:"):
			if slices.Contains(ap.scopes, strings.TrimPrefix(x, "scope:")) {
				return true
			}
		case x == ap.name && ap.tenant == "", x == ap.String():
			return true
		}
	}
	return false
}

// mayApprove reports whether ap may decide t's approval.
func (a *Approval) mayApprove(ap approver, t *task.Task) error {
	if !a.admits(ap) {
		return fmt.Errorf("%s is not an approver of %s (approvers: %s)", ap, t.Tool, strings.Join(a.Approvers, ", "))
	}
	// An anonymous caller is nobody the approver could be shown to be
	// (without authentication, every requester and the loopback
	// operator are "anonymous").
	if p, tenant, _ := t.Owner.Identity(); !a.SelfApproval && !t.Owner.Anonymous() && (p == ap.String() || (p == ap.name && tenant == ap.tenant) || (tenant != "" && tenant+"/"+p == ap.String())) {
		return fmt.Errorf("%s made this call and may not approve it", ap)
	}
	return nil
}

// Held is a task held for an approval or a handoff, as
// [Server.HeldTasks] lists it.
type Held struct {
	// Kind is "approval" or "handoff".
	Kind string `json:"kind"`
	// TaskID, Tool, Owner and StatusMessage are the task's.
	TaskID        string `json:"taskId"`
	Tool          string `json:"tool"`
	Owner         string `json:"owner"`
	StatusMessage string `json:"statusMessage"`
	// CreatedAt is when the call came; ExpiresAt when an approval
	// expires (zero for a handoff).
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// Approvers may decide an approval.
	Approvers []string `json:"approvers,omitempty"`
	// Arguments are the call's arguments, for the approver to judge.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Parent is the task whose work started this one as a child (a
	// workflow's step), "" for none; Step names the step.
	Parent string `json:"parentTaskId,omitempty"`
	Step   string `json:"step,omitempty"`

	approval *Approval
}

// HeldTasks returns the tasks held for an approval ("approval"), for an
// operator's outcome ("handoff"), or both (""), oldest first (the first
// to expire first): an operator's view across owners.
func (s *Server) HeldTasks(ctx context.Context, kind string) ([]Held, error) {
	var out []Held
	for _, gate := range []string{adapter.GateApproval, adapter.GateHandoff} {
		k := strings.TrimPrefix(gate, engine.GatePrefix)
		if kind != "" && kind != k {
			continue
		}
		var ts []*task.Task
		q := store.BrowseQuery{Waiting: gate, Limit: store.MaxBrowseLimit}
		for {
			page, next, err := s.eng.Store().Browse(ctx, q)
			if err != nil {
				return nil, err
			}
			ts = append(ts, page...)
			if next == "" {
				break
			}
			q.Cursor = next
		}
		for _, t := range slices.Backward(ts) {
			h := Held{Kind: k, TaskID: string(t.ID), Tool: t.Tool, Owner: string(t.Owner), StatusMessage: t.StatusMessage, CreatedAt: t.CreatedAt,
				Parent: string(t.Parent), Step: task.StepOf(t)}
			if a := s.approvalOf(t); a != nil && k == "approval" {
				h.ExpiresAt, h.Approvers, h.approval = t.CreatedAt.Add(a.expires()), a.Approvers, a
			}
			var call mcp.CallToolParamsRaw
			if json.Unmarshal(t.Request, &call) == nil {
				h.Arguments = call.Arguments
			}
			out = append(out, h)
		}
	}
	return out, nil
}

// approvalOf returns the approval that holds t: its tool's, else a
// child's own (a workflow's approval step, see SpawnOptions.Approval),
// which is remembered (stepApprovals) for approvesAny and the sweep.
func (s *Server) approvalOf(t *task.Task) *Approval {
	s.mu.RLock()
	a := s.tools[t.Tool].Approval
	s.mu.RUnlock()
	if a != nil {
		return a
	}
	if a = childApproval(t); a != nil {
		s.stepApprovals.LoadOrStore(a.key(), a)
	}
	return a
}

// key identifies what an approval admits and for how long.
func (a *Approval) key() string {
	return fmt.Sprintf("%q %v %v", a.Approvers, a.SelfApproval, a.expires())
}

// approvesAny reports whether ap is an approver of any tool, or of a
// child's own approval this server has seen (spawned, listed or swept:
// the first sweep after a start reads every held approval).
func (s *Server) approvesAny(ap approver) bool {
	s.mu.RLock()
	for _, o := range s.tools {
		if o.Approval != nil && o.Approval.admits(ap) {
			s.mu.RUnlock()
			return true
		}
	}
	s.mu.RUnlock()
	found := false
	s.stepApprovals.Range(func(_, v any) bool {
		found = v.(*Approval).admits(ap)
		return !found
	})
	return found
}

// gateMeta is the adapter's Config.Gate: the _meta of a held task,
// naming its approval (wire.MetaApproval: state, approvers, expiry,
// reason) or its handoff (wire.MetaHandoff).
func (s *Server) gateMeta(t *task.Task) map[string]any {
	switch t.Queue {
	case adapter.GateApproval:
		m := map[string]any{"state": "pending"}
		if a := s.approvalOf(t); a != nil {
			m["approvers"], m["expiresAt"] = a.Approvers, t.CreatedAt.Add(a.expires()).UTC().Format(time.RFC3339)
			if a.Reason != "" {
				m["reason"] = a.Reason
			}
		}
		return map[string]any{wire.MetaApproval: m}
	case adapter.GateHandoff:
		return map[string]any{wire.MetaHandoff: map[string]any{"state": "pending"}}
	}
	return nil
}

// GateError is why [Server.Decide] or [Server.RecordHandoff] changed
// nothing: the task is unknown (Task nil), the decider may not decide
// (Forbidden), or the task is not held (any more). A repeated decision
// of the same kind is not an error (see Decide).
type GateError struct {
	Reason string
	// Task is the task as it is now, when it exists.
	Task *task.Task
	// Forbidden is set when the decider may not decide it (not an
	// approver, or the requester of the call).
	Forbidden bool
}

func (e *GateError) Error() string { return "mcptask: " + e.Reason }

// Decide approves (approve true) or denies the approval of the task id,
// as the approver by, saying why. An approval starts the task's work,
// exactly once across every server sharing the store (into its
// concurrency queue, if it has one); a denial ends it failed, naming by
// and reason. Deciding a task already decided the same way returns it
// as it is (idempotent); anything else that is not a pending approval
// is a *GateError. Every decision is audited.
func (s *Server) Decide(ctx context.Context, id task.ID, approve bool, by, reason string) (*task.Task, error) {
	return s.decide(ctx, id, approve, approver{name: by, operator: true, owner: operatorOwner(by)}, reason)
}

// decide is Decide by the approver ap.
func (s *Server) decide(ctx context.Context, id task.ID, approve bool, ap approver, reason string) (*task.Task, error) {
	by := ap.String()
	t, err := s.eng.Store().Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &GateError{Reason: "no task " + string(id)}
	}
	if err != nil {
		return nil, err
	}
	a := s.approvalOf(t)
	if a == nil {
		if !ap.operator || !engine.Held(t, adapter.GateApproval) {
			// Nothing for this approver to decide: as for an unknown
			// task, so that nothing of another's task is revealed.
			return nil, &GateError{Reason: "no approval of task " + string(id) + " waits for a decision"}
		}
		// Held for an approval its tool no longer declares (the
		// configuration changed): any operator may decide it.
		a = &Approval{Approvers: []string{"*"}}
	}
	if err := a.mayApprove(ap, t); err != nil {
		s.eng.Audit().Gate(ctx, ap.owner, audit.TaskOf(t), "decision_refused", err.Error())
		return nil, &GateError{Reason: err.Error(), Task: t, Forbidden: true}
	}
	if now := s.eng.Now(); approve && engine.Held(t, adapter.GateApproval) && !now.Before(t.CreatedAt.Add(a.expires())) {
		// Expired, though no sweep has failed it yet: too late.
		s.expire(ctx, t, now)
		return nil, &GateError{Reason: fmt.Sprintf("the approval expired after %v", a.expires()), Task: t}
	}
	step := "approved"
	if approve {
		msg := "approved by " + by
		if reason != "" {
			msg += ": " + reason
		}
		q := s.toolPolicy(t.Tool).Queue
		t, err = s.eng.Release(ctx, id, adapter.GateApproval, q, msg)
	} else {
		step = "denied"
		t, err = s.eng.Resolve(ctx, id, adapter.GateApproval, func(t *task.Task, now time.Time) error {
			msg := "denied by " + by
			if reason != "" {
				msg += ": " + reason
			}
			return t.Fail(&task.Error{Code: wire.CodeNotApproved, Message: "the call was not approved: " + msg,
				Data: gateData("denied", by, reason)}, msg, now)
		})
	}
	var nh *engine.NotHeldError
	if errors.As(err, &nh) {
		if sameDecision(nh.Task, approve) {
			return nh.Task, nil
		}
		return nil, &GateError{Reason: "the task is no longer waiting for an approval (" + string(nh.Task.Status) + ": " + nh.Task.StatusMessage + ")", Task: nh.Task}
	}
	if err != nil {
		return nil, err
	}
	s.eng.Audit().Gate(ctx, ap.owner, audit.TaskOf(t), step, reason)
	return t, nil
}

// sameDecision reports whether t ended, or went on, as the decision
// approve would have made it: a repeated decision is answered with it.
func sameDecision(t *task.Task, approve bool) bool {
	if approve {
		return t.Attempts > 0 || strings.HasPrefix(t.StatusMessage, "approved by ") || (t.Queued && !strings.HasPrefix(t.Queue, engine.GatePrefix))
	}
	return t.Status == task.Failed && strings.HasPrefix(t.StatusMessage, "denied by ")
}

func gateData(step, by, reason string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"reason": step, "by": by, "detail": reason})
	return b
}

// operatorOwner is the audit trail's name of an operator.
func operatorOwner(by string) task.Owner { return task.Owner(by) }

// ApprovalSweepInterval is how often a server looks for expired
// approvals.
const ApprovalSweepInterval = 5 * time.Second

// expireApprovals fails the approvals that waited past their expiry (the
// service of startControls calls it every ApprovalSweepInterval, within
// ApprovalSweepTimeout): it reads only the held tasks old enough to have
// expired under the shortest expiry of the tools, page by page. Servers
// sharing a store race for them harmlessly: one resolves each.
func (s *Server) expireApprovals(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, ApprovalSweepTimeout)
	defer cancel()
	s.sweepApprovals(ctx, s.eng.Now())
}

// ApprovalSweepTimeout bounds one sweep of expired approvals.
const ApprovalSweepTimeout = 30 * time.Second

// sweepApprovals fails the approvals expired at now.
func (s *Server) sweepApprovals(ctx context.Context, now time.Time) {
	// An approval of a tool that no longer declares one expires after
	// DefaultApprovalExpiry.
	shortest := DefaultApprovalExpiry
	s.mu.RLock()
	for _, o := range s.tools {
		if o.Approval != nil && o.Approval.expires() < shortest {
			shortest = o.Approval.expires()
		}
	}
	s.mu.RUnlock()
	s.stepApprovals.Range(func(_, v any) bool {
		shortest = min(shortest, v.(*Approval).expires())
		return true
	})
	q := store.BrowseQuery{Waiting: adapter.GateApproval, CreatedBefore: now.Add(-shortest), Limit: store.MaxBrowseLimit}
	if !s.swept.Swap(true) {
		// The first sweep reads every held approval: the steps' own
		// approvals (and their expiries) are learnt from them.
		q.CreatedBefore = time.Time{}
	}
	for ctx.Err() == nil {
		ts, next, err := s.eng.Store().Browse(ctx, q)
		if err != nil {
			s.core.Log().Warn("looking for expired approvals", "err", err)
			return
		}
		for _, t := range ts {
			s.expire(ctx, t, now)
		}
		if next == "" {
			return
		}
		q.Cursor = next
	}
}

// expire fails t's approval if it waited past its tool's expiry
// (DefaultApprovalExpiry for a tool that no longer declares one).
func (s *Server) expire(ctx context.Context, t *task.Task, now time.Time) {
	a := s.approvalOf(t)
	if a == nil {
		a = &Approval{Approvers: []string{"*"}}
	}
	if now.Before(t.CreatedAt.Add(a.expires())) {
		return
	}
	got, err := s.eng.Resolve(ctx, t.ID, adapter.GateApproval, func(t *task.Task, now time.Time) error {
		msg := fmt.Sprintf("the approval expired after %v: nobody of %s decided", a.expires(), strings.Join(a.Approvers, ", "))
		return t.Fail(&task.Error{Code: wire.CodeNotApproved, Message: "the call was not approved: " + msg,
			Data: gateData("expired", "", "")}, msg, now)
	})
	if err == nil {
		s.eng.Audit().Gate(ctx, "", audit.TaskOf(got), "expired", "")
	}
}

// HandoffOutcome is the outcome an operator records for a task handed
// off to them ([Server.RecordHandoff]).
type HandoffOutcome struct {
	// Failed records a failure; otherwise the task completes.
	Failed bool
	// Text is the result's text (or the failure's message).
	Text string
	// Structured, if set, is the result's structured content (JSON).
	Structured json.RawMessage
}

// RecordHandoff records by hand the outcome of the task id that a
// handoff fallback holds: it becomes the task's result (or failure), and
// the confirmation of the operation, recorded on the ledger as confirmed
// (or rejected) by by. Recording twice is a *GateError naming the
// outcome already recorded. Audited.
func (s *Server) RecordHandoff(ctx context.Context, id task.ID, by string, o HandoffOutcome) (*task.Task, error) {
	if o.Structured != nil && !json.Valid(o.Structured) {
		return nil, &GateError{Reason: "the structured content is not JSON"}
	}
	t, err := s.eng.Resolve(ctx, id, adapter.GateHandoff, func(t *task.Task, now time.Time) error {
		msg := "outcome recorded by hand by " + by
		if o.Failed {
			return t.Fail(&task.Error{Code: task.CodeInternalError, Message: o.Text, Data: gateData("handoff", by, "")}, msg, now)
		}
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: o.Text}}}
		if o.Structured != nil {
			res.StructuredContent = o.Structured
		}
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		if err := t.Complete(b, now); err != nil {
			return err
		}
		t.StatusMessage = msg
		return nil
	})
	var nh *engine.NotHeldError
	if errors.As(err, &nh) {
		return nil, &GateError{Reason: "the task is not waiting for a handoff (" + string(nh.Task.Status) + ": " + nh.Task.StatusMessage + ")", Task: nh.Task}
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, &GateError{Reason: "no task " + string(id)}
	}
	if err != nil {
		return nil, err
	}
	state := task.OpConfirmed
	if o.Failed {
		state = task.OpRejected
	}
	if err := s.eng.RecordHandoffOperation(ctx, t, by, state, o.Text); err != nil {
		s.core.Log().Error("recording a handoff's confirmation on the ledger", "task", t.ID, "err", err)
	}
	outcome := "completed"
	if o.Failed {
		outcome = "failed"
	}
	// The audit trail never holds payloads: the outcome's kind and size.
	s.eng.Audit().Gate(ctx, operatorOwner(by), audit.TaskOf(t), "handoff_recorded", fmt.Sprintf("%s, %d bytes", outcome, len(o.Text)+len(o.Structured)))
	return t, nil
}

// addApprovalMethods registers the approvers' methods
// (wire.MethodApprovalsList, wire.MethodApprovalsDecide) on the
// mcp.Server.
func (s *Server) addApprovalMethods() error {
	return errors.Join(
		mcp.AddReceivingCustomMethod(s.mcp, wire.MethodApprovalsList, func(ctx context.Context, _ *mcp.ServerSession, _ *wire.ApprovalsListParams) (*wire.ApprovalsListResult, error) {
			ap, err := s.mcpApprover(ctx)
			if err != nil {
				return nil, err
			}
			res := &wire.ApprovalsListResult{Approvals: []wire.PendingApproval{}}
			if !s.approvesAny(ap) {
				return res, nil // no read for a requester who approves nothing
			}
			held, err := s.HeldTasks(ctx, "approval")
			if err != nil {
				return nil, adapter.InternalError("the approvals could not be read: " + err.Error())
			}
			for _, h := range held {
				a := h.approval
				if a == nil || a.mayApprove(ap, &task.Task{Owner: task.Owner(h.Owner), Tool: h.Tool}) != nil {
					continue
				}
				p, t, _ := task.Owner(h.Owner).Identity()
				if t != "" {
					p = t + "/" + p
				}
				s.eng.Audit().ArgumentsRetrieved(ctx, ap.owner, audit.Task{ID: h.TaskID, Tool: h.Tool, Owner: task.Owner(h.Owner)}, wire.MethodApprovalsList)
				res.Approvals = append(res.Approvals, wire.PendingApproval{TaskID: h.TaskID, Tool: h.Tool, Requester: p,
					CreatedAt: h.CreatedAt.UTC().Format(time.RFC3339), ExpiresAt: h.ExpiresAt.UTC().Format(time.RFC3339),
					Reason: a.Reason, Arguments: h.Arguments})
			}
			return res, nil
		}),
		mcp.AddReceivingCustomMethod(s.mcp, wire.MethodApprovalsDecide, func(ctx context.Context, _ *mcp.ServerSession, p *wire.DecideParams) (*wire.DecideResult, error) {
			ap, err := s.mcpApprover(ctx)
			if err != nil {
				return nil, err
			}
			id, err := adapter.ParseID(p.TaskID)
			if err != nil {
				return nil, err
			}
			t, err := s.decide(ctx, id, p.Approve, ap, p.Reason)
			var ge *GateError
			switch {
			case errors.As(err, &ge) && (ge.Task == nil || ge.Forbidden):
				// Not the requester's to decide: as for an unknown task,
				// so that no task of another is revealed.
				return nil, adapter.InvalidParams("no approval " + p.TaskID + " for you to decide")
			case errors.As(err, &ge):
				return nil, &jsonrpc.Error{Code: wire.CodeDecided, Message: ge.Reason}
			case err != nil:
				return nil, adapter.InternalError("the decision could not be recorded: " + err.Error())
			}
			return &wire.DecideResult{TaskID: string(t.ID), Status: string(t.Status), StatusMessage: t.StatusMessage}, nil
		}),
	)
}

// mcpApprover is the approver of an approvers' method: its requester,
// who must be authenticated.
func (s *Server) mcpApprover(ctx context.Context) (approver, error) {
	req := eventsRequest(ctx)
	if req == nil {
		return approver{}, adapter.InternalError("no request")
	}
	owner := s.core.Requester(ctx, req)
	if owner.Anonymous() {
		return approver{}, &jsonrpc.Error{Code: events.CodeForbidden, Message: "deciding approvals needs an authenticated approver"}
	}
	p, t, _ := owner.Identity()
	ap := approver{name: p, tenant: t, owner: owner}
	if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
		ap.scopes = ex.TokenInfo.Scopes
	}
	return ap, nil
}
