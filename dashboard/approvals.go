package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/task"
)

// The bounds of the Approvals page's forms.
const (
	// maxDecisionReason bounds the reason of an approval or a denial.
	maxDecisionReason = 4096
	// maxOutcomeText bounds the text of a handoff's outcome.
	maxOutcomeText = 64 << 10
	// maxArgsShown bounds the arguments a held task's row shows (the
	// cell's title holds up to maxShown).
	maxArgsShown = 240
)

// AuditMethodApprovals is the method an audit record of the arguments
// the Approvals page showed names (event task.arguments_retrieved).
const AuditMethodApprovals = "dashboard/approvals"

// approvalsPage is the data of the Approvals page: the tasks held for an
// approval and those held for an operator's outcome.
type approvalsPage struct {
	Base, CSRF   string
	SignedIn     bool
	Flash, Error string
	// Operator is the name the visitor decides as.
	Operator  string
	Approvals []*heldRow
	Handoffs  []*heldRow
	Instance  string
}

// heldRow is one held task on the Approvals page.
type heldRow struct {
	TaskID, Tool, Owner, Message string
	// Created is when the call came (UTC), CreatedISO the same for the
	// page's script, CreatedAgo how long ago.
	Created, CreatedISO, CreatedAgo string
	// Expires is when an approval expires (UTC), ExpiresIn how long it
	// has left; Overdue says it is past (the next sweep fails it).
	Expires, ExpiresIn string
	Overdue            bool
	// Approvers may decide an approval.
	Approvers string
	// Args are the call's arguments as compact JSON, cut to
	// maxArgsShown; ArgsFull cut to maxShown (the cell's title).
	Args, ArgsFull string
}

// operatorName is the name an operator acts under in a decision or a
// handoff, as mcptaskd's admin endpoint names it: the principal
// (an operator of -admin-token-file), with its tenant if it has one.
func operatorName(who task.Owner) string {
	p, t, _ := who.Identity()
	if t != "" {
		return t + "/" + p
	}
	return p
}

// serveApprovals shows the tasks held for an approval or a handoff, with
// the forms that decide them.
func (h *Handler) serveApprovals(w http.ResponseWriter, r *http.Request, v *visitor) {
	if h.opts.Gates == nil {
		http.Error(w, "this server has no approvals", http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	h.renderApprovals(w, r, v, http.StatusOK, approvalsFlash(q.Get("done"), q.Get("task")), "")
}

// renderApprovals renders the Approvals page with a flash or an error,
// answering code (unless the store fails).
func (h *Handler) renderApprovals(w http.ResponseWriter, r *http.Request, v *visitor, code int, flashMsg, errMsg string) {
	p := &approvalsPage{Base: base(r), CSRF: v.csrf, SignedIn: h.opts.Authenticate != nil && !v.bearer,
		Flash: flashMsg, Error: errMsg, Operator: operatorName(v.who), Instance: h.opts.Engine.InstanceID()}
	held, err := h.opts.Gates.HeldTasks(r.Context(), "")
	if err != nil {
		h.opts.Logger.Error("dashboard: listing the held tasks", "err", err)
		if p.Error == "" {
			p.Error = "The tasks waiting for an approval or a handoff could not be read from the store."
		}
		code = http.StatusInternalServerError
	}
	now := h.now()
	for _, t := range held {
		row := &heldRow{TaskID: t.TaskID, Tool: t.Tool, Owner: t.Owner, Message: clip(t.StatusMessage, maxShown),
			Created: t.CreatedAt.UTC().Format(time.DateTime), CreatedISO: t.CreatedAt.UTC().Format(time.RFC3339Nano),
			CreatedAgo: ago(t.CreatedAt, now), Approvers: strings.Join(t.Approvers, ", ")}
		if !t.ExpiresAt.IsZero() {
			row.Expires = t.ExpiresAt.UTC().Format(time.DateTime)
			if left := t.ExpiresAt.Sub(now); left >= time.Minute {
				row.ExpiresIn = "in " + strings.TrimSuffix(span(left.Truncate(time.Minute)), " 00 s")
			} else if left > 0 {
				row.ExpiresIn = "in " + span(left)
			} else {
				row.ExpiresIn, row.Overdue = "expired", true
			}
		}
		if args := compactJSON(t.Arguments); args != "" {
			row.Args, row.ArgsFull = clip(args, maxArgsShown), clip(args, maxShown)
			// An approver judges the call by its arguments: shown
			// without a request, each showing is audited as a reveal is.
			h.opts.Engine.Audit().ArgumentsRetrieved(r.Context(), v.who,
				audit.Task{ID: t.TaskID, Tool: t.Tool, Owner: task.Owner(t.Owner)}, AuditMethodApprovals)
		}
		switch t.Kind {
		case "approval":
			p.Approvals = append(p.Approvals, row)
		case "handoff":
			p.Handoffs = append(p.Handoffs, row)
		}
	}
	h.render(w, code, "approvals", p)
}

// compactJSON returns a JSON value on one line ("" for none or null),
// its keys in their order, with the escapes \u003c, \u003e and \u0026
// (Go's encoder writes <, > and & so) shown as the characters they are:
// the page escapes them for HTML.
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	b := buf.Bytes()
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch string(b[i+2 : i+6]) {
			case "003c", "003C":
				out, i = append(out, '<'), i+5
				continue
			case "003e", "003E":
				out, i = append(out, '>'), i+5
				continue
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			}
		}
		out, i = append(out, b[i], b[i+1]), i+1 // an escape, kept as it is
	}
	return string(out)
}

// approvalsFlash returns the message of a decision's or a handoff's
// outcome named in the URL after it: done names it, id the task (shown
// only when it is a task ID).
func approvalsFlash(done, id string) string {
	tid, err := task.ParseID(id)
	if err != nil {
		return ""
	}
	switch done {
	case "approved":
		return "Task " + string(tid) + " is approved: its work has started."
	case "denied":
		return "Task " + string(tid) + " is denied: it ended failed, naming you and your reason."
	case "handoff":
		return "The outcome of task " + string(tid) + " is recorded: it completed, with your text as its result."
	case "handoff_failed":
		return "The outcome of task " + string(tid) + " is recorded: it failed, with your text as its error."
	}
	return ""
}

// heldTaskID reads the task ID of a decision's or a handoff's URL; false
// when the refusal has been written.
func (h *Handler) heldTaskID(w http.ResponseWriter, r *http.Request) (task.ID, bool) {
	if h.opts.Gates == nil {
		http.Error(w, "this server has no approvals", http.StatusNotFound)
		return "", false
	}
	id, err := task.ParseID(r.PathValue("id"))
	if err != nil {
		http.Error(w, "not a task ID: "+err.Error(), http.StatusBadRequest)
		return "", false
	}
	return id, true
}

// gateFailed shows the Approvals page saying why a decision or a handoff
// (what) of the task id changed nothing, and reports whether err was
// such a failure: a *mcptask.GateError (the operator may not decide, or
// the task waits no more) is the page's error, not a server error.
func (h *Handler) gateFailed(w http.ResponseWriter, r *http.Request, v *visitor, what string, id task.ID, err error) bool {
	if err == nil {
		return false
	}
	var ge *mcptask.GateError
	if errors.As(err, &ge) {
		code := http.StatusConflict
		switch {
		case ge.Task == nil:
			code = http.StatusNotFound
		case ge.Forbidden:
			code = http.StatusForbidden
		}
		h.opts.Logger.Info("dashboard: an operator's "+what+" was refused", "task", id, "operator", operatorName(v.who), "why", ge.Reason)
		h.renderApprovals(w, r, v, code, "", "Task "+string(id)+": nothing changed: "+ge.Reason+".")
		return true
	}
	h.opts.Logger.Error("dashboard: recording an operator's "+what, "task", id, "err", err)
	h.renderApprovals(w, r, v, http.StatusInternalServerError, "", "Task "+string(id)+": the "+what+" could not be recorded: the store failed.")
	return true
}

// decide approves (form field approve=1) or denies (approve=0) the
// approval of the task of the URL as the signed-in operator, with the
// form's reason.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request, v *visitor) {
	id, ok := h.heldTaskID(w, r)
	if !ok {
		return
	}
	var approve bool
	switch r.PostFormValue("approve") {
	case "1":
		approve = true
	case "0":
	default:
		http.Error(w, "approve: want 1 (approve) or 0 (deny)", http.StatusBadRequest)
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if len(reason) > maxDecisionReason {
		h.renderApprovals(w, r, v, http.StatusBadRequest, "", "The reason is too long: 4096 bytes at most. Nothing changed.")
		return
	}
	by := operatorName(v.who)
	_, err := h.opts.Gates.Decide(r.Context(), id, approve, by, reason)
	what, done := "approval", "approved"
	if !approve {
		what, done = "denial", "denied"
	}
	if h.gateFailed(w, r, v, what, id, err) {
		return
	}
	h.opts.Logger.Info("dashboard: an approval decided by an operator", "task", id, "operator", by, "decision", done)
	redirect(w, base(r)+"approvals?done="+done+"&task="+url.QueryEscape(string(id)))
}

// recordHandoff records the outcome of the handed-off task of the URL as
// the signed-in operator: the form's text, as its result or, with the
// form's "failed" checked, as its failure.
func (h *Handler) recordHandoff(w http.ResponseWriter, r *http.Request, v *visitor) {
	id, ok := h.heldTaskID(w, r)
	if !ok {
		return
	}
	text := strings.TrimSpace(r.PostFormValue("text"))
	failed := r.PostFormValue("failed") != ""
	switch {
	case text == "":
		h.renderApprovals(w, r, v, http.StatusBadRequest, "", "Task "+string(id)+": say what the outcome is (its text). Nothing changed.")
		return
	case len(text) > maxOutcomeText:
		h.renderApprovals(w, r, v, http.StatusBadRequest, "", "Task "+string(id)+": the outcome's text is too long: 64 KiB at most. Nothing changed.")
		return
	}
	by := operatorName(v.who)
	_, err := h.opts.Gates.RecordHandoff(r.Context(), id, by, mcptask.HandoffOutcome{Failed: failed, Text: text})
	if h.gateFailed(w, r, v, "handoff", id, err) {
		return
	}
	done := "handoff"
	if failed {
		done = "handoff_failed"
	}
	h.opts.Logger.Info("dashboard: a handoff's outcome recorded by an operator", "task", id, "operator", by, "failed", failed)
	redirect(w, base(r)+"approvals?done="+done+"&task="+url.QueryEscape(string(id)))
}
