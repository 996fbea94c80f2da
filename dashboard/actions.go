package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
)

// maxRevealed bounds the result or error a task page shows.
const maxRevealed = 256 << 10

// AuditMethod is the method an audit record of a result the dashboard
// revealed names (event task.result_retrieved).
const AuditMethod = "dashboard/reveal"

// redirect sends the browser to rel, a URL relative to the request's:
// unlike http.Redirect it is not made absolute from the request's path,
// which lacks the prefix a reverse proxy or StripPrefix removed.
func redirect(w http.ResponseWriter, rel string) {
	w.Header().Set("Location", rel)
	w.WriteHeader(http.StatusSeeOther)
}

// cancelOne cancels the task of the URL.
func (h *Handler) cancelOne(w http.ResponseWriter, r *http.Request, v *visitor) {
	id := task.ID(r.PathValue("id"))
	_, err := h.opts.Engine.CancelAsOperator(r.Context(), v.who, id)
	var (
		nf      *engine.NotFoundError
		term    *engine.TerminalError
		refused *engine.CancelRefusedError
	)
	done := "cancelled:1"
	switch {
	case errors.As(err, &nf):
		http.Error(w, "no such task", http.StatusNotFound)
		return
	case errors.As(err, &term):
		done = "skipped:0"
	case errors.As(err, &refused):
		// The task page shows why, in its status message.
		h.opts.Logger.Info("dashboard: an operator's cancel was refused", "task", id, "reason", refused.Reason)
		redirect(w, base(r)+"tasks/"+url.PathEscape(string(id))+"?done=refused:1")
		return
	case err != nil:
		h.opts.Logger.Error("dashboard: cancelling a task", "task", id, "err", err)
		http.Error(w, "the task could not be cancelled: the store failed", http.StatusInternalServerError)
		return
	}
	h.opts.Logger.Info("dashboard: task cancelled by an operator", "task", id)
	redirect(w, base(r)+"tasks/"+url.PathEscape(string(id))+"?done="+done)
}

// cancelMany cancels the tasks selected in the list (form fields "id").
func (h *Handler) cancelMany(w http.ResponseWriter, r *http.Request, v *visitor) {
	ids := r.PostForm["id"]
	if len(ids) > MaxBulk {
		http.Error(w, "at most "+strconv.Itoa(MaxBulk)+" tasks can be cancelled at once", http.StatusBadRequest)
		return
	}
	var cancelled, skipped, refusedN int
	for _, id := range ids {
		_, err := h.opts.Engine.CancelAsOperator(r.Context(), v.who, task.ID(id))
		var (
			nf      *engine.NotFoundError
			term    *engine.TerminalError
			refused *engine.CancelRefusedError
		)
		switch {
		case err == nil:
			cancelled++
		case errors.As(err, &nf), errors.As(err, &term):
			skipped++
		case errors.As(err, &refused):
			refusedN++
		default:
			h.opts.Logger.Error("dashboard: cancelling a task", "task", id, "err", err)
			http.Error(w, "the store failed after "+strconv.Itoa(cancelled)+" task(s) were cancelled", http.StatusInternalServerError)
			return
		}
	}
	h.opts.Logger.Info("dashboard: tasks cancelled by an operator", "cancelled", cancelled, "skipped", skipped, "refused", refusedN)
	done := "cancelled:" + strconv.Itoa(cancelled)
	switch {
	case refusedN > 0:
		done = "refused:" + strconv.Itoa(refusedN)
	case skipped > 0:
		done = "skipped:" + strconv.Itoa(cancelled)
	}
	back := backFilter(r.PostFormValue("back"))
	back.Set("done", done)
	redirect(w, base(r)+"?"+back.Encode())
}

// backFilter returns the list filters of a form's "back" field (the
// query of the list the form was on), keeping known filters only.
func backFilter(q string) url.Values {
	in, _ := url.ParseQuery(strings.TrimPrefix(q, "?"))
	out := url.Values{}
	for _, k := range []string{"status", "tool", "owner", "after", "before", "cursor"} {
		for _, s := range in[k] {
			out.Add(k, s)
		}
	}
	return out
}

// reveal shows a task's page with its result or error: an admin's
// explicit, audited request.
func (h *Handler) reveal(w http.ResponseWriter, r *http.Request, v *visitor) {
	id := task.ID(r.PathValue("id"))
	t, err := h.opts.Store.Get(r.Context(), id)
	if err != nil {
		h.renderTask(w, r, v, nil)
		return
	}
	rev := &revealed{}
	switch {
	case t.Error != nil:
		b, _ := json.Marshal(t.Error)
		rev.Error = clip(prettyJSON(b), maxRevealed)
	case t.Result != nil:
		rev.Result = clip(prettyJSON(t.Result), maxRevealed)
	default:
		rev.Result = "(the task has no outcome yet)"
	}
	h.opts.Engine.Audit().ResultRetrieved(r.Context(), v.who, audit.TaskOf(t), string(t.Status), AuditMethod)
	h.opts.Logger.Info("dashboard: outcome revealed to an operator", "task", id)
	// The page is answered to the POST: its URL is the action's, so the
	// page's relative links must be from there.
	h.renderTask(w, r, v, rev)
}

// setDrain sets a tool's drain switch (form fields tool, drained=on|off).
func (h *Handler) setDrain(w http.ResponseWriter, r *http.Request, v *visitor) {
	if h.opts.Drain == nil {
		http.Error(w, "this server has no drain switch", http.StatusNotFound)
		return
	}
	tool := strings.TrimSpace(r.PostFormValue("tool"))
	on := r.PostFormValue("drained") == "on"
	if tool == "" || len(tool) > 256 {
		http.Error(w, "name a tool (256 bytes at most)", http.StatusBadRequest)
		return
	}
	if err := h.opts.Drain.SetToolDrain(r.Context(), tool, on, v.who); err != nil {
		http.Error(w, "the drain switch could not be set: "+err.Error(), http.StatusBadRequest)
		return
	}
	done := "undrained"
	if on {
		done = "drained"
	}
	back := backFilter(r.PostFormValue("back"))
	back.Set("done", done)
	redirect(w, base(r)+"?"+back.Encode())
}
