// Package audit writes mcptask's security audit trail: who created which
// task, how its status changed, who retrieved its result or cancelled it,
// and who was refused access to a task or by a limit.
//
// Each event is one structured [log/slog] record with the message "audit"
// and an "event" attribute (see the Event constants), so that an audit
// trail can be kept apart from operational logs by a handler, or with a
// filter such as jq 'select(.msg == "audit")'. Records name tasks, tools,
// principals and tenants; they never hold tool arguments, results, tokens
// or elicitation answers.
//
// A nil *Logger writes nothing, so callers need not check for one.
package audit

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/mcptask/mcptask/task"
)

// Message is the message of every audit record.
const Message = "audit"

// The events of the audit trail: the value of a record's "event"
// attribute.
const (
	// EventCreated: a task was created (attributes task, tool, wire, ttl,
	// and the owner's principal and tenant).
	EventCreated = "task.created"
	// EventReused: an idempotent retry got the requester's existing task
	// instead of a new one.
	EventReused = "task.reused"
	// EventStatusChanged: a task moved from one status to another
	// (attributes from, to; and code for a failure).
	EventStatusChanged = "task.status_changed"
	// EventResultRetrieved: a requester was given a finished task's
	// outcome (result or error).
	EventResultRetrieved = "task.result_retrieved"
	// EventArgumentsRetrieved: an operator was shown a task's arguments
	// (the params of the call that created it).
	EventArgumentsRetrieved = "task.arguments_retrieved"
	// EventRerun: an operator ran a finished task's call again, as a new
	// task (attribute rerun: the new task's ID).
	EventRerun = "task.rerun"
	// EventCancelled: a requester cancelled a task.
	EventCancelled = "task.cancelled"
	// EventCancelRefused: the system doing a task's work refused (or
	// could not be told of) a requester's cancel; the task goes on.
	EventCancelRefused = "task.cancel_refused"
	// EventDeleted: a requester deleted a finished task and everything
	// it held (attribute status: the status it had ended with).
	EventDeleted = "task.deleted"
	// EventDenied: a request named a task the requester may not see
	// (attribute reason: unknown, other_owner or expired). The requester
	// was answered exactly as for an unknown task.
	EventDenied = "task.access_denied"
	// EventLimited: requests were refused by a per-requester limit
	// (attribute limit). Refusals cost the server little, so a flood of
	// them must not flood the trail: one record per requester, limit and
	// LimitedEvery at most, its attribute refused counting the refusals it
	// stands for.
	EventLimited = "request.limited"
	// EventDrainChanged: the operator changed the drain switch (attributes
	// all, tools, fallback, and by: what made the change, e.g. SIGHUP or
	// admin, with the principal and tenant of whoever made it when known).
	EventDrainChanged = "server.drain_changed"
	// EventControlChanged: the operator changed one of the fleet's
	// switches (attributes control, value, by, reason, and who).
	EventControlChanged = "server.control_changed"
	// EventGate: a step of a task held for an approval or an operator's
	// outcome (attribute step: approval_requested, approved, denied,
	// expired, handoff_requested, handoff_recorded; reason; who acted).
	EventGate = "task.gate"
	// EventLateResultDropped: a task's work ended after another engine
	// had taken the task over (or ended it there, e.g. failed it "outcome
	// unknown"); its outcome (attribute outcome: completed or failed,
	// never the payload) was dropped and the stored status (attribute
	// status) stands. The work may have had effects the status does not
	// show.
	EventLateResultDropped = "task.late_result_dropped"
)

// Reasons of an EventDenied record.
const (
	ReasonUnknown    = "unknown"     // no such task (never existed, or deleted)
	ReasonOtherOwner = "other_owner" // the task belongs to another requester
	ReasonExpired    = "expired"     // the task's retention has ended
)

// LimitedEvery is the shortest time between two EventLimited records of
// one requester and limit.
const LimitedEvery = time.Second

// Logger writes audit records to a slog.Logger. The zero value and nil
// write nothing.
type Logger struct {
	l   *slog.Logger
	now func() time.Time // nil: time.Now

	mu      sync.Mutex
	limited map[limitKey]*limitState
}

type limitKey struct {
	requester task.Owner
	limit     string
}

type limitState struct {
	last    time.Time // of the last record
	refused int64     // refusals since, not yet recorded
}

// New returns a Logger writing to l; a nil l gives a Logger that writes
// nothing.
func New(l *slog.Logger) *Logger {
	return &Logger{l: l}
}

// Enabled reports whether records are written.
func (a *Logger) Enabled() bool { return a != nil && a.l != nil }

// who returns the identity attributes of owner, under the given prefix
// ("" for the requester, "owner_" for a task's owner).
func who(prefix string, owner task.Owner) []slog.Attr {
	p, t, s := owner.Identity()
	attrs := []slog.Attr{slog.String(prefix+"principal", p), slog.String(prefix+"tenant", t)}
	if s != "" {
		attrs = append(attrs, slog.String(prefix+"session", s))
	}
	return attrs
}

// Task names a task in a record.
type Task struct {
	ID    string
	Tool  string
	Owner task.Owner
	// Correlation is the task's host correlation keys
	// (task.Task.Correlation), recorded as the attribute group
	// "correlation" (e.g. correlation.claudecode/toolUseId) when not
	// empty. Host-chosen IDs, never arguments.
	Correlation map[string]string
}

// TaskOf names t in a record.
func TaskOf(t *task.Task) Task {
	return Task{ID: string(t.ID), Tool: t.Tool, Owner: t.Owner, Correlation: t.Correlation}
}

func (a *Logger) write(ctx context.Context, event string, attrs ...slog.Attr) {
	if !a.Enabled() {
		return
	}
	a.l.LogAttrs(ctx, slog.LevelInfo, Message, append([]slog.Attr{slog.String("event", event)}, attrs...)...)
}

// Drain records a change of the server's drain switch: whether new tasks
// are refused for every tool (all), or for the tools listed; by whom
// (e.g. "SIGHUP").
func (a *Logger) Drain(ctx context.Context, all bool, tools []string, by string) {
	a.DrainChanged(ctx, DrainChange{All: all, Tools: tools, By: by})
}

// DrainChange is one change of the drain switch, as [Logger.DrainChanged]
// records it.
type DrainChange struct {
	// All and Tools are the new switch: every tool, or the tools listed.
	All   bool
	Tools []string
	// Fallback is what a drained tool's task-augmented calls get
	// ("refuse" or "sync"); empty is not recorded.
	Fallback string
	// By is what made the change: "config", "SIGHUP", "admin".
	By string
	// Requester, if set, is who made it (e.g. the admin endpoint's
	// authenticated principal).
	Requester task.Owner
	// Reason is why, as the operator said ("" for none).
	Reason string
}

// DrainChanged records a change of the server's drain switch.
func (a *Logger) DrainChanged(ctx context.Context, c DrainChange) {
	attrs := []slog.Attr{slog.Bool("all", c.All), slog.Any("tools", c.Tools)}
	if c.Fallback != "" {
		attrs = append(attrs, slog.String("fallback", c.Fallback))
	}
	attrs = append(attrs, slog.String("by", c.By))
	if c.Reason != "" {
		attrs = append(attrs, slog.String("reason", c.Reason))
	}
	if c.Requester != "" {
		attrs = append(attrs, who("", c.Requester)...)
	}
	a.write(ctx, EventDrainChanged, attrs...)
}

// ControlChanged records a change of the fleet's switch control (e.g.
// "canary/deploy") to value (JSON, "" when cleared), by what (by) and
// whom (requester, if known), and why.
func (a *Logger) ControlChanged(ctx context.Context, control, value, by string, requester task.Owner, reason string) {
	attrs := []slog.Attr{slog.String("control", control), slog.String("value", value), slog.String("by", by)}
	if reason != "" {
		attrs = append(attrs, slog.String("reason", reason))
	}
	if requester != "" {
		attrs = append(attrs, who("", requester)...)
	}
	a.write(ctx, EventControlChanged, attrs...)
}

// Gate records a step of t held for an approval or a handoff (see
// EventGate), made by requester ("" for the server itself), and why.
func (a *Logger) Gate(ctx context.Context, requester task.Owner, t Task, step, reason string) {
	attrs := append(t.actedOnBy(requester), slog.String("step", step))
	if reason != "" {
		attrs = append(attrs, slog.String("reason", reason))
	}
	a.write(ctx, EventGate, attrs...)
}

func (t Task) attrs() []slog.Attr {
	attrs := append([]slog.Attr{slog.String("task", t.ID), slog.String("tool", t.Tool)}, who("", t.Owner)...)
	if len(t.Correlation) > 0 {
		group := make([]any, 0, len(t.Correlation))
		for _, k := range slices.Sorted(maps.Keys(t.Correlation)) {
			group = append(group, slog.String(k, t.Correlation[k]))
		}
		attrs = append(attrs, slog.Group("correlation", group...))
	}
	return attrs
}

// Created records a new task (the requester is its owner).
func (a *Logger) Created(ctx context.Context, t Task, wire string, ttl time.Duration) {
	a.write(ctx, EventCreated, append(t.attrs(), slog.String("wire", wire), slog.Duration("ttl", ttl))...)
}

// Reused records an idempotent retry answered with the existing task t.
func (a *Logger) Reused(ctx context.Context, t Task) {
	a.write(ctx, EventReused, t.attrs()...)
}

// LateResultDropped records that the late outcome of t's work was
// dropped; status is the task's stored status ("" if it is gone).
func (a *Logger) LateResultDropped(ctx context.Context, t Task, outcome, status string) {
	a.write(ctx, EventLateResultDropped, append(t.attrs(), slog.String("outcome", outcome), slog.String("status", status))...)
}

// StatusChanged records a status change of t. code is the JSON-RPC error
// code of a failure, 0 otherwise.
func (a *Logger) StatusChanged(ctx context.Context, t Task, from, to string, code int64) {
	attrs := append(t.attrs(), slog.String("from", from), slog.String("to", to))
	if code != 0 {
		attrs = append(attrs, slog.Int64("code", code))
	}
	a.write(ctx, EventStatusChanged, attrs...)
}

// ResultRetrieved records that requester was given the outcome of t,
// which ended with status, in answer to method. The record's principal
// and tenant are the requester's, owner_principal and owner_tenant the
// task owner's: an auditor can check they always match.
func (a *Logger) ResultRetrieved(ctx context.Context, requester task.Owner, t Task, status, method string) {
	if !a.Enabled() {
		return // every tasks/get of a finished task: build no record
	}
	a.write(ctx, EventResultRetrieved, append(t.actedOnBy(requester), slog.String("status", status), slog.String("method", method))...)
}

// ArgumentsRetrieved records that requester was shown the arguments of
// t, in answer to method.
func (a *Logger) ArgumentsRetrieved(ctx context.Context, requester task.Owner, t Task, method string) {
	a.write(ctx, EventArgumentsRetrieved, append(t.actedOnBy(requester), slog.String("method", method))...)
}

// Rerun records that requester ran the call of t again, as the task
// rerun.
func (a *Logger) Rerun(ctx context.Context, requester task.Owner, t Task, rerun task.ID) {
	a.write(ctx, EventRerun, append(t.actedOnBy(requester), slog.String("rerun", string(rerun)))...)
}

// Cancelled records that requester cancelled t.
func (a *Logger) Cancelled(ctx context.Context, requester task.Owner, t Task) {
	a.write(ctx, EventCancelled, t.actedOnBy(requester)...)
}

// CancelRefused records a cancel of t by requester that the system doing
// its work refused (the task goes on), and why.
func (a *Logger) CancelRefused(ctx context.Context, requester task.Owner, t Task, reason string) {
	a.write(ctx, EventCancelRefused, append(t.actedOnBy(requester), slog.String("reason", reason))...)
}

// Deleted records that requester deleted t, which had ended with
// status.
func (a *Logger) Deleted(ctx context.Context, requester task.Owner, t Task, status string) {
	a.write(ctx, EventDeleted, append(t.actedOnBy(requester), slog.String("status", status))...)
}

// actedOnBy are the attributes of an action of requester on t.
func (t Task) actedOnBy(requester task.Owner) []slog.Attr {
	attrs := append([]slog.Attr{slog.String("task", t.ID), slog.String("tool", t.Tool)}, who("", requester)...)
	return append(attrs, who("owner_", t.Owner)...)
}

// Denial is what an EventDenied record tells: who asked for which task,
// through which operation, and why they were answered as for an unknown
// task. Owner and Tool are the task's when it exists (zero otherwise).
type Denial struct {
	Requester task.Owner // who asked
	Task      string     // the task ID asked for
	Op        string     // the method, e.g. "tasks/get"
	Reason    string     // ReasonUnknown, ReasonOtherOwner or ReasonExpired
	Owner     task.Owner // the task's owner, when it exists
	Tool      string     // the task's tool, when it exists
}

// Denied records d: a requester asked for a task it may not see and was
// answered as for an unknown task.
func (a *Logger) Denied(ctx context.Context, d Denial) {
	attrs := append([]slog.Attr{slog.String("task", d.Task), slog.String("op", d.Op), slog.String("reason", d.Reason)}, who("", d.Requester)...)
	if d.Owner != "" {
		attrs = append(attrs, slog.String("tool", d.Tool))
		attrs = append(attrs, who("owner_", d.Owner)...)
	}
	a.write(ctx, EventDenied, attrs...)
}

// Limited records that requester's request (method; tool for a tool call)
// was refused by limit (e.g. "create_rate", "request_rate",
// "active_tasks"). It writes a record for the first refusal of a requester
// and limit, then at most one every LimitedEvery, counting in refused the
// refusals since the previous record (method and tool are the latest
// refused request's).
func (a *Logger) Limited(ctx context.Context, requester task.Owner, method, tool, limit string) {
	if !a.Enabled() {
		return
	}
	now := time.Now()
	if a.now != nil {
		now = a.now()
	}
	a.mu.Lock()
	if a.limited == nil {
		a.limited = map[limitKey]*limitState{}
	}
	k := limitKey{requester, limit}
	st := a.limited[k]
	if st == nil {
		if len(a.limited) >= maxLimitStates {
			for k, old := range a.limited {
				if now.Sub(old.last) > LimitedEvery && old.refused == 0 {
					delete(a.limited, k)
				}
			}
		}
		st = &limitState{}
		a.limited[k] = st
	}
	st.refused++
	if !st.last.IsZero() && now.Sub(st.last) < LimitedEvery {
		a.mu.Unlock()
		return
	}
	refused := st.refused
	st.last, st.refused = now, 0
	a.mu.Unlock()

	attrs := append([]slog.Attr{slog.String("method", method), slog.String("limit", limit)}, who("", requester)...)
	if tool != "" {
		attrs = append(attrs, slog.String("tool", tool))
	}
	attrs = append(attrs, slog.Int64("refused", refused))
	a.write(ctx, EventLimited, attrs...)
}

// maxLimitStates bounds the memory of Limited: past it, the states of
// requesters with nothing left to record are forgotten.
const maxLimitStates = 4096
