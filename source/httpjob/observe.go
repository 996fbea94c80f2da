package httpjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The values of Observation.Status: the task statuses a job's state maps
// to.
const (
	// ObservedWorking is a job in one of Status.Working.
	ObservedWorking = "working"
	// ObservedCompleted is a job in one of Status.Completed.
	ObservedCompleted = "completed"
	// ObservedFailed is a job in one of Status.Failed.
	ObservedFailed = "failed"
	// ObservedCancelled is a job in one of Status.Cancelled.
	ObservedCancelled = "cancelled"
)

// Observation is a job's state as a task of its tool would show it, read
// by [Tools.Observe].
type Observation struct {
	// Status is the task status the job's state maps to:
	// ObservedWorking ("working"), ObservedCompleted ("completed"),
	// ObservedFailed ("failed", the task's isError result) or
	// ObservedCancelled ("cancelled").
	Status string
	// Message is the job's own status message (at Status.Message in the
	// status answer), as the task relays it; "" when there is none.
	Message string
	// Error is why a failed or cancelled job ended so, as the task says
	// it (Failure.Pointer or Failure.Message when they need no other
	// request, else Status.Error); for a failed job without one, "(the
	// job API gives no reason)". "" for a working or completed job.
	Error string
}

// Observe reads the state of job jobID with the status request of the
// tool named tool (any tool of tl, in observe mode or not, once
// registered) and returns what a task of the tool would show of it. It
// sends that one request, not retried, and no other: no lookups, no
// failure request, no start, no cancel; templates get jobID, the
// defaults of the input schema and nothing else (a status URL needing
// another argument, or a captured value, is an error). The errors say
// what failed (an unknown tool, the request's failure, an answer other
// than 2xx, a state in none of the tool's lists) without the tool's
// secrets. It is meant for an operator's report comparing the tasks'
// outcomes with the job API's own state.
func (tl *Tools) Observe(ctx context.Context, tool, jobID string) (Observation, error) {
	var jt *jobTool
	for _, t := range tl.tools {
		if t.Name == tool {
			jt = t
			break
		}
	}
	if jt == nil {
		if slices.ContainsFunc(tl.given, func(t Tool) bool { return t.Name == tool }) {
			return Observation{}, fmt.Errorf("httpjob: observing job %q: the tool %q is not registered yet (Register first)", jobID, tool)
		}
		return Observation{}, fmt.Errorf("httpjob: observing job %q: no HTTP job tool is named %q", jobID, tool)
	}
	return jt.observeOnce(ctx, jobID)
}

// Observes reports whether tool is one of tl's tools in observe mode
// (Tool.Observe), registered or not.
func (tl *Tools) Observes(tool string) bool {
	return slices.ContainsFunc(tl.given, func(t Tool) bool { return t.Name == tool && t.Observe })
}

// observeOnce is Observe for the tool jt.
func (jt *jobTool) observeOnce(ctx context.Context, jobID string) (Observation, error) {
	fail := func(format string, args ...any) (Observation, error) {
		return Observation{}, errors.New(jt.scrub(fmt.Sprintf("httpjob: %s: job %s: ", jt.Name, jobID) + fmt.Sprintf(format, args...)))
	}
	if strings.TrimSpace(jobID) == "" {
		return fail("the job's ID is empty")
	}
	r := &run{jobTool: jt, v: vars{args: map[string]json.RawMessage{}, jobID: jobID}, ref: ref{JobID: jobID}}
	withDefaults(r.v.args, jt.InputSchema)
	const what = "reading the job's status"
	u, headers, body, err := r.fill(what, jt.Status.Request)
	if err != nil {
		return fail("the status request cannot be filled: %v", err)
	}
	code, answer, err := r.once(ctx, what, cmp(jt.Status.Method, http.MethodGet), u, headers, body, "")
	switch {
	case err != nil:
		return fail("%s: %s", what, r.describe(err))
	case code == http.StatusNotFound || code == http.StatusGone:
		return fail("the job API does not know the job (HTTP %d: %s)", code, r.apiError(answer))
	case code >= 300:
		return fail("the job API refused the status request: HTTP %d: %s", code, r.apiError(answer))
	}
	doc, err := decode(answer)
	if err != nil {
		return fail("the status answer is not JSON; the answer begins: %s", r.excerpt(answer))
	}
	var o Observation
	if jt.Status.Message != "" {
		if v, err := lookup(doc, jt.Status.Message); err == nil {
			o.Message = jt.scrub(textOf(v))
		}
	}
	v, err := lookup(doc, jt.Status.State)
	state, ok := scalarText(v)
	if err == nil && v == nil {
		state, ok = "", true // null, as the task reads it
	}
	if err != nil || !ok {
		return fail("the status answer has no state at %s; the answer begins: %s", jt.Status.State, r.excerpt(answer))
	}
	switch {
	case slices.Contains(jt.Status.Working, state):
		o.Status = ObservedWorking
	case slices.Contains(jt.Status.Completed, state):
		o.Status = ObservedCompleted
	case slices.Contains(jt.Status.Failed, state):
		o.Status = ObservedFailed
		if o.Error = r.failureDetail(ctx, doc, false); o.Error == "" {
			o.Error = "(the job API gives no reason)"
		}
	case slices.Contains(jt.Status.Cancelled, state):
		o.Status = ObservedCancelled
		o.Error = r.failureDetail(ctx, doc, false)
	default:
		return fail("the job's state %q at %s is in none of the lists working %q, completed %q, failed %q, cancelled %q; the answer begins: %s",
			state, jt.Status.State, jt.Status.Working, jt.Status.Completed, jt.Status.Failed, jt.Status.Cancelled, r.excerpt(answer))
	}
	return o, nil
}
