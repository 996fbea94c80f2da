package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
)

// maxRevealed bounds the result or error a task page shows.
const maxRevealed = 256 << 10

// AuditMethod is the method an audit record of a result the dashboard
// revealed names (event task.result_retrieved).
const AuditMethod = "dashboard/reveal"

// AuditMethodArguments is the method an audit record of arguments the
// dashboard revealed names (event task.arguments_retrieved).
const AuditMethodArguments = "dashboard/reveal-arguments"

// argumentsOf returns the arguments of a stored tools/call request (its
// params), or nil.
func argumentsOf(request json.RawMessage) json.RawMessage {
	var p struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(request, &p) != nil || string(p.Arguments) == "null" {
		return nil
	}
	return p.Arguments
}

// contentOf renders a CallToolResult's content for people: each text
// item as its text, each other item as a line that says what it is, and
// the structured content pretty-printed. Nil when result has neither.
func contentOf(result json.RawMessage) *resultView {
	var r struct {
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			MimeType string `json:"mimeType"`
			Data     string `json:"data"`
			URI      string `json:"uri"`
			Name     string `json:"name"`
			Resource *struct {
				URI      string `json:"uri"`
				MimeType string `json:"mimeType"`
				Text     string `json:"text"`
			} `json:"resource"`
		} `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
		IsError    bool            `json:"isError"`
	}
	if json.Unmarshal(result, &r) != nil {
		return nil
	}
	v := &resultView{IsError: r.IsError}
	total := 0
	for _, c := range r.Content {
		var item contentItem
		switch c.Type {
		case "text":
			item.Text = c.Text
		case "image", "audio":
			item.Note = c.Type + " (" + c.MimeType + ", " + strconv.Itoa(len(c.Data)*3/4) + " bytes)"
		case "resource_link":
			item.Note = "link to the resource " + c.URI
			if c.Name != "" {
				item.Note += " (" + c.Name + ")"
			}
		case "resource":
			if c.Resource != nil {
				item.Note = "the resource " + c.Resource.URI
				item.Text = c.Resource.Text
			}
		default:
			item.Note = "content of type " + strconv.Quote(c.Type)
		}
		item.Text = clip(item.Text, max(maxRevealed-total, 0))
		total += len(item.Text)
		v.Items = append(v.Items, item)
	}
	if len(r.Structured) > 0 && string(r.Structured) != "null" {
		v.Structured = clip(prettyJSON(r.Structured), maxRevealed)
	}
	if len(v.Items) == 0 && v.Structured == "" {
		return nil
	}
	return v
}

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
	for _, k := range []string{"status", "tool", "owner", "after", "before", "cursor", "prev"} {
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
	if r.PostFormValue("what") == "arguments" {
		rev.Arguments = clip(prettyJSON(argumentsOf(t.Request)), maxRevealed)
		if rev.Arguments == "" {
			rev.Arguments = "(the call had no arguments)"
		}
		h.opts.Engine.Audit().ArgumentsRetrieved(r.Context(), v.who, audit.TaskOf(t), AuditMethodArguments)
		h.opts.Logger.Info("dashboard: arguments revealed to an operator", "task", id, "operator", string(v.who))
		h.renderTask(w, r, v, rev)
		return
	}
	switch {
	case t.Error != nil:
		b, _ := json.Marshal(t.Error)
		rev.Error = clip(prettyJSON(b), maxRevealed)
	case t.Result != nil:
		rev.Result = clip(prettyJSON(t.Result), maxRevealed)
		rev.Content = contentOf(t.Result)
	default:
		rev.Result = "(the task has no outcome yet)"
	}
	h.opts.Engine.Audit().ResultRetrieved(r.Context(), v.who, audit.TaskOf(t), string(t.Status), AuditMethod)
	h.opts.Logger.Info("dashboard: outcome revealed to an operator", "task", id, "operator", string(v.who))
	// The page is answered to the POST: its URL is the action's, so the
	// page's relative links must be from there.
	h.renderTask(w, r, v, rev)
}

// runAgain runs the call of the finished task of the URL again, as a new
// task of its owner, and shows the new task; a refusal is shown on the
// old task's page, saying why.
func (h *Handler) runAgain(w http.ResponseWriter, r *http.Request, v *visitor) {
	if h.opts.RunAgain == nil {
		http.Error(w, "this server does not run calls again", http.StatusNotFound)
		return
	}
	id := task.ID(r.PathValue("id"))
	t, err := h.opts.Store.Get(r.Context(), id)
	if err != nil {
		h.renderTask(w, r, v, nil)
		return
	}
	nonce := r.PostFormValue("nonce")
	if len(nonce) > 64 || strings.ContainsFunc(nonce, func(c rune) bool { return !strings.ContainsRune("0123456789abcdef", c) }) {
		http.Error(w, "the form's nonce is not valid: reload the task's page", http.StatusBadRequest)
		return
	}
	nt, err := h.opts.RunAgain(r.Context(), t, nonce)
	var refused *mcptask.RunAgainError
	switch {
	case errors.As(err, &refused):
		h.opts.Logger.Info("dashboard: an operator's re-run was refused", "task", id, "operator", string(v.who), "why", refused.Reason)
		h.renderTaskError(w, r, v, http.StatusConflict, refused.Error())
		return
	case err != nil:
		h.opts.Logger.Error("dashboard: running a task's call again", "task", id, "err", err)
		h.renderTaskError(w, r, v, http.StatusInternalServerError, "The call could not be run again: the store failed.")
		return
	}
	h.opts.Engine.Audit().Rerun(r.Context(), v.who, audit.TaskOf(t), nt.ID)
	h.opts.Logger.Info("dashboard: a task's call run again by an operator", "task", id, "rerun", nt.ID, "operator", string(v.who))
	redirect(w, base(r)+"tasks/"+url.PathEscape(string(nt.ID))+"?done=rerun:1")
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
	if r.PostFormValue("back") == "tools" {
		redirect(w, base(r)+"tools?done="+done)
		return
	}
	back := backFilter(r.PostFormValue("back"))
	back.Set("done", done)
	redirect(w, base(r)+"?"+back.Encode())
}
