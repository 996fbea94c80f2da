package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/source/httpjob"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// The admin endpoints of a rollout (docs/rollout.md), beside
// /admin/drain and behind the same authorization.
const (
	adminFleetPath    = "/admin/fleet"         // GET: the fleet's switches
	adminCanaryPath   = "/admin/canary"        // PUT/POST {tool, tenants, principals, percent, reason, off}
	adminRollbackPath = "/admin/rollback"      // POST {tool, reason, undo}: the report
	adminApprovals    = "/admin/approvals"     // GET ?kind=approval|handoff: held tasks
	adminDecidePath   = "/admin/decide"        // POST {taskId, approve, reason}
	adminHandoffPath  = "/admin/handoff"       // POST {taskId, failed, text, structured}
	adminShadowPath   = "/admin/shadow-report" // GET ?tool=NAME
)

// rolloutRoutes mounts the rollout's admin endpoints on mux.
func (a *App) rolloutRoutes(mux *http.ServeMux) {
	for path, serve := range map[string]func(http.ResponseWriter, *http.Request, task.Owner){
		adminFleetPath:    a.serveFleet,
		adminCanaryPath:   a.serveCanary,
		adminRollbackPath: a.serveRollback,
		adminApprovals:    a.serveApprovals,
		adminDecidePath:   a.serveDecide,
		adminHandoffPath:  a.serveHandoff,
		adminShadowPath:   a.serveShadowReport,
	} {
		mux.Handle(path, a.adminHandler(func(w http.ResponseWriter, r *http.Request) {
			who, ok := a.authorizeAdmin(w, r)
			if !ok {
				return
			}
			serve(w, r, who)
		}))
	}
}

// operatorName is the name an admin request's operator acts under: the
// operator of -admin-token-file, or the token's principal.
func operatorName(who task.Owner) string {
	p, t, _ := who.Identity()
	if t != "" {
		return t + "/" + p
	}
	return p
}

// readAdminBody decodes the JSON body of an admin request into v,
// refusing unknown fields; false when the refusal has been written.
func readAdminBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		w.Header().Set("Allow", "POST, PUT")
		adminError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed: POST or PUT a JSON body")
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		adminError(w, http.StatusUnsupportedMediaType, "send Content-Type: application/json")
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		adminError(w, http.StatusBadRequest, "invalid body: "+err.Error())
		return false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		adminError(w, http.StatusBadRequest, "invalid body: one JSON object only")
		return false
	}
	return true
}

// knownTool reports whether the server serves tool; when not, the
// refusal (400) has been written.
func (a *App) knownTool(w http.ResponseWriter, tool string) bool {
	if a.tasks.HasTool(tool) {
		return true
	}
	adminError(w, http.StatusBadRequest, fmt.Sprintf("no such tool: %q (nothing changed)", tool))
	return false
}

// onlyGet reports whether r is a GET or HEAD; when not, the refusal has
// been written.
func onlyGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		adminError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed: GET")
		return false
	}
	return true
}

// serveFleet answers GET /admin/fleet: the fleet's switches as this
// instance applies them.
func (a *App) serveFleet(w http.ResponseWriter, r *http.Request, _ task.Owner) {
	if onlyGet(w, r) {
		writeAdminJSON(w, http.StatusOK, a.tasks.Fleet())
	}
}

// serveCanary answers PUT or POST /admin/canary.
func (a *App) serveCanary(w http.ResponseWriter, r *http.Request, who task.Owner) {
	var req struct {
		Tool       string   `json:"tool"`
		Tenants    []string `json:"tenants"`
		Principals []string `json:"principals"`
		Percent    int      `json:"percent"`
		Reason     string   `json:"reason"`
		Off        bool     `json:"off"`
	}
	if !readAdminBody(w, r, &req) {
		return
	}
	if !a.knownTool(w, req.Tool) {
		return
	}
	var c *mcptask.Canary
	if !req.Off {
		c = &mcptask.Canary{Tenants: req.Tenants, Principals: req.Principals, Percent: req.Percent}
	}
	if err := a.tasks.SetCanary(r.Context(), req.Tool, c, "admin", who, req.Reason); err != nil {
		adminError(w, http.StatusBadRequest, err.Error())
		return
	}
	a.log.Warn("canary set through the admin endpoint", "tool", req.Tool, "off", req.Off, "percent", req.Percent,
		"tenants", req.Tenants, "principals", req.Principals, "reason", req.Reason, "operator", operatorName(who))
	writeAdminJSON(w, http.StatusOK, a.tasks.Fleet())
}

// serveRollback answers POST /admin/rollback: a rollback (or its undo)
// of a tool, answered with its report.
func (a *App) serveRollback(w http.ResponseWriter, r *http.Request, who task.Owner) {
	var req struct {
		Tool   string `json:"tool"`
		Reason string `json:"reason"`
		Undo   bool   `json:"undo"`
	}
	if !readAdminBody(w, r, &req) {
		return
	}
	if !a.knownTool(w, req.Tool) {
		return
	}
	if req.Undo {
		if err := a.tasks.UndoRollback(r.Context(), req.Tool, "admin", who, req.Reason); err != nil {
			adminError(w, http.StatusInternalServerError, err.Error())
			return
		}
		a.log.Warn("rollback undone through the admin endpoint", "tool", req.Tool, "operator", operatorName(who))
		writeAdminJSON(w, http.StatusOK, mcptask.RollbackReport{Tool: req.Tool, Undone: true, Running: []string{}, Held: []string{},
			Confirmed: []string{}, Rejected: []string{}, Unknown: []string{}, InFlight: []string{}})
		return
	}
	rep, err := a.tasks.Rollback(r.Context(), req.Tool, "admin", who, req.Reason)
	if err != nil {
		adminError(w, http.StatusInternalServerError, err.Error())
		return
	}
	a.log.Warn("tool rolled back through the admin endpoint", "tool", req.Tool, "fallback", rep.Fallback, "running", len(rep.Running),
		"confirmed", len(rep.Confirmed), "rejected", len(rep.Rejected), "unknown", len(rep.Unknown), "operator", operatorName(who))
	writeAdminJSON(w, http.StatusOK, rep)
}

// serveApprovals answers GET /admin/approvals: the held tasks.
// The arguments of each call are shown to the operator, and audited so
// (task.arguments_retrieved, method admin/approvals), as the dashboard's
// reveal is.
func (a *App) serveApprovals(w http.ResponseWriter, r *http.Request, who task.Owner) {
	if !onlyGet(w, r) {
		return
	}
	kind := r.URL.Query().Get("kind")
	if kind != "" && kind != "approval" && kind != "handoff" {
		adminError(w, http.StatusBadRequest, "kind: want approval or handoff")
		return
	}
	held, err := a.tasks.HeldTasks(r.Context(), kind)
	if err != nil {
		adminError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if held == nil {
		held = []mcptask.Held{}
	}
	for _, h := range held {
		if len(h.Arguments) > 0 {
			a.eng.Audit().ArgumentsRetrieved(r.Context(), who, audit.Task{ID: h.TaskID, Tool: h.Tool, Owner: task.Owner(h.Owner)}, "admin/approvals")
		}
	}
	writeAdminJSON(w, http.StatusOK, held)
}

// gateAnswer is the answer of a decision or a handoff: the task now.
type gateAnswer struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
}

// serveDecide answers POST /admin/decide: an approval or a denial by the
// request's operator.
func (a *App) serveDecide(w http.ResponseWriter, r *http.Request, who task.Owner) {
	var req struct {
		TaskID  string `json:"taskId"`
		Approve bool   `json:"approve"`
		Reason  string `json:"reason"`
	}
	if !readAdminBody(w, r, &req) {
		return
	}
	id, err := task.ParseID(req.TaskID)
	if err != nil {
		adminError(w, http.StatusBadRequest, "taskId: "+err.Error())
		return
	}
	t, err := a.tasks.Decide(r.Context(), id, req.Approve, operatorName(who), req.Reason)
	a.answerGate(w, t, err)
}

// serveHandoff answers POST /admin/handoff: the outcome of a handed-off
// task, recorded by the request's operator.
func (a *App) serveHandoff(w http.ResponseWriter, r *http.Request, who task.Owner) {
	var req struct {
		TaskID     string          `json:"taskId"`
		Failed     bool            `json:"failed"`
		Text       string          `json:"text"`
		Structured json.RawMessage `json:"structured"`
	}
	if !readAdminBody(w, r, &req) {
		return
	}
	id, err := task.ParseID(req.TaskID)
	if err != nil {
		adminError(w, http.StatusBadRequest, "taskId: "+err.Error())
		return
	}
	if strings.TrimSpace(req.Text) == "" {
		adminError(w, http.StatusBadRequest, "text: say what the outcome is")
		return
	}
	t, err := a.tasks.RecordHandoff(r.Context(), id, operatorName(who), mcptask.HandoffOutcome{Failed: req.Failed, Text: req.Text, Structured: req.Structured})
	a.answerGate(w, t, err)
}

func (a *App) answerGate(w http.ResponseWriter, t *task.Task, err error) {
	var ge *mcptask.GateError
	switch {
	case errors.As(err, &ge):
		code := http.StatusConflict
		switch {
		case ge.Task == nil:
			code = http.StatusNotFound
		case ge.Forbidden:
			code = http.StatusForbidden
		}
		adminError(w, code, ge.Reason)
	case err != nil:
		adminError(w, http.StatusInternalServerError, err.Error())
	default:
		writeAdminJSON(w, http.StatusOK, gateAnswer{TaskID: string(t.ID), Status: string(t.Status), StatusMessage: t.StatusMessage})
	}
}

// shadowRow compares one shadow task's projection with the job API.
type shadowRow struct {
	TaskID    string `json:"taskId"`
	JobID     string `json:"jobId"`
	Projected string `json:"projected"`
	Actual    string `json:"actual"`
	Match     bool   `json:"match"`
	Error     string `json:"error,omitempty"`
}

// shadowReport is the answer of GET /admin/shadow-report.
type shadowReport struct {
	Tool     string      `json:"tool"`
	Tasks    int         `json:"tasks"`
	Match    int         `json:"match"`
	Mismatch int         `json:"mismatch"`
	Errors   int         `json:"errors"`
	Rows     []shadowRow `json:"rows"`
}

// serveShadowReport answers GET /admin/shadow-report?tool=NAME: the
// state each of the shadow tool's newest tasks projected, against the
// system's own state of its job or upstream task now (an HTTP job tool
// with observe, or a gateway tool with observe in its toolOptions).
func (a *App) serveShadowReport(w http.ResponseWriter, r *http.Request, _ task.Owner) {
	if !onlyGet(w, r) {
		return
	}
	tool := r.URL.Query().Get("tool")
	jobs, gw := a.sources.httpJobs, a.sources.gateway
	isJob := jobs != nil && jobs.Observes(tool)
	if !isJob && (gw == nil || !gw.Observes(tool)) {
		adminError(w, http.StatusBadRequest, fmt.Sprintf("no shadow tool %q: a shadow report compares the tasks of an HTTP job tool with observe: true, or of an upstream tool with observe in its toolOptions", tool))
		return
	}
	ts, _, err := a.eng.Store().Browse(r.Context(), store.BrowseQuery{Tool: tool, Limit: store.MaxBrowseLimit})
	if err != nil {
		adminError(w, http.StatusInternalServerError, err.Error())
		return
	}
	rep := shadowReport{Tool: tool, Rows: []shadowRow{}}
	for _, t := range ts {
		var ref struct {
			JobID    string `json:"jobId"`
			Upstream string `json:"upstream"`
			TaskID   string `json:"taskId"`
		}
		if json.Unmarshal([]byte(t.ExternalRef), &ref) != nil || (ref.JobID == "" && ref.TaskID == "") {
			continue
		}
		row := shadowRow{TaskID: string(t.ID), JobID: ref.JobID, Projected: string(t.Status)}
		var actual string
		if isJob {
			row.Projected = projected(t)
			var obs httpjob.Observation
			obs, err = jobs.Observe(r.Context(), tool, ref.JobID)
			actual = obs.Status
		} else {
			row.JobID = ref.TaskID
			actual, _, err = gw.ObserveTask(r.Context(), ref.Upstream, ref.TaskID)
		}
		if err != nil {
			row.Error = err.Error()
			rep.Errors++
		} else {
			row.Actual = actual
			row.Match = row.Actual == row.Projected
			if row.Match {
				rep.Match++
			} else {
				rep.Mismatch++
			}
		}
		rep.Tasks++
		rep.Rows = append(rep.Rows, row)
	}
	writeAdminJSON(w, http.StatusOK, rep)
}

// projected is the job state a task of an HTTP job tool projects: its
// status, a tool error (the job failed) as "failed".
func projected(t *task.Task) string {
	if t.Outcome() == task.OutcomeToolError {
		return "failed"
	}
	return string(t.Status)
}
