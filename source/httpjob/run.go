package httpjob

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/httpguard"
	"github.com/mcptask/mcptask/internal/secrets"
	"github.com/mcptask/mcptask/internal/tracing"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// jobTool is a registered Tool.
type jobTool struct {
	Tool
	client  *http.Client
	log     *slog.Logger
	tracer  trace.Tracer              // makes the spans of the job requests
	secrets secrets.Set               // the headers' values and Tool.Secrets
	res     map[string]*regexp.Regexp // the captures' regular expressions, by spec
	// down holds what failed in the last request to the job API (see
	// Tools.Health); nil when it was answered, or none was sent yet.
	down atomic.Pointer[error]
}

// noteHealth records the outcome of a request to the job API: answered
// (a status below 500), or failed (err, or a 5xx). A request cut by its
// caller's context (a cancelled or stopped task) says nothing of the API.
func (r *run) noteHealth(caller context.Context, code int, err error) {
	if caller.Err() != nil {
		return
	}
	if err == nil && code < 500 {
		r.down.Store(nil)
		return
	}
	e := errors.New(r.describeCall(code, err))
	r.down.Store(&e)
}

func newJobTool(t Tool, client *http.Client, log *slog.Logger, tp trace.TracerProvider) *jobTool {
	// The headers are the job API's credentials: a redirect to another
	// origin is refused rather than followed (Go's client would carry
	// them to another port of the same host, and X-Api-Key anywhere).
	guarded := *client
	guarded.CheckRedirect = httpguard.SameOriginRedirects(client.CheckRedirect)
	jt := &jobTool{Tool: t, client: &guarded, log: log, tracer: tp.Tracer(tracing.TracerName)}
	if jt.PollInterval == 0 {
		jt.PollInterval = DefaultPollInterval
	}
	add := jt.secrets.Add
	jt.compileCaptures()
	for _, req := range jt.requests() {
		for _, v := range req.Headers {
			add(v)
			// "Bearer TOKEN": the token alone is a secret too.
			if _, tok, ok := strings.Cut(v, " "); ok {
				add(tok)
			}
		}
	}
	for _, v := range t.Secrets {
		add(v)
	}
	return jt
}

// ref is the task's external reference: the start's idempotency key,
// recorded before the start is sent; the job's ID once known; when the
// first start was sent (the timeout counts from it).
type ref struct {
	Key     string    `json:"key"`
	JobID   string    `json:"jobId,omitempty"`
	Started time.Time `json:"started,omitzero"`
	// Captured are the values captured from the job API's answers
	// (Request.Capture), kept so that a re-attachment has them.
	Captured map[string]string `json:"captured,omitempty"`
	// LogOffset is how far the job's log was read (bytes of a text log,
	// lines of a JSON one).
	LogOffset int64 `json:"logOffset,omitempty"`
}

var errTimeout = errors.New("the job timed out")

// errTooLarge is an answer above MaxAnswer: asking again would get the
// same, so it fails the task.
var errTooLarge = fmt.Errorf("the job API's answer is larger than the limit of 4 MiB (%d bytes); not asked again", MaxAnswer)

// permanent is the message of a request error that retrying cannot cure
// (an answer too large, a redirect to another origin), "" for others.
func permanent(err error) string {
	var co *httpguard.CrossOriginRedirect
	switch {
	case errors.Is(err, errTooLarge):
		return errTooLarge.Error()
	case errors.As(err, &co):
		return "the job API " + co.Error() + ": configure the URL it redirects to, if that is the job API"
	}
	return ""
}

// jobName is the job's ID, or what stands for it before the start's
// answer.
func (r *run) jobName() string {
	if r.ref.JobID != "" {
		return r.ref.JobID
	}
	return "(not started: idempotency key " + r.ref.Key + ")"
}

// run is one run of a call: the first, or a re-run after a crash.
type run struct {
	*jobTool
	tk   *mcptask.Task // nil for a synchronous call
	v    vars
	ref  ref
	last string // the status message last shown
	// steady is the job's own status message (not an outage's): shown
	// again when the job API answers after an outage.
	steady string
	// logTo is the task whose log receives the run's notes; unlike tk it
	// stays set after the task ended (a cancel's outcome is noted).
	logTo *mcptask.Task
	// outage is the status message of a retry in progress, "" when the
	// last request was answered.
	outage string
	// op is the job's operation on the ledger (its receipt the job's
	// ID); nil for a synchronous call.
	op *mcptask.Op
	// logs is what the run keeps of the job's log between polls.
	logs logState
}

// handle is the tool's handler: a call's outcome, scrubbed of the
// tool's secrets (a job API may echo them in a result).
func (jt *jobTool) handle(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	res, err := jt.call(ctx, req)
	jt.secrets.Result(res)
	var je *jsonrpc.Error
	switch {
	case err == nil:
	case errors.As(err, &je):
		je.Message = jt.scrub(je.Message)
	case jt.scrub(err.Error()) != err.Error():
		err = errors.New(jt.scrub(err.Error()))
	}
	return res, err
}

// call runs a call of the tool.
func (jt *jobTool) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	r := &run{jobTool: jt, tk: mcptask.FromContext(ctx), v: vars{args: map[string]json.RawMessage{}}}
	r.logTo = r.tk
	if req.Params != nil && len(req.Params.Arguments) > 0 && string(req.Params.Arguments) != "null" {
		if err := json.Unmarshal(req.Params.Arguments, &r.v.args); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the arguments are not a JSON object"}
		}
	}
	withDefaults(r.v.args, jt.InputSchema)
	if r.tk != nil {
		raw, err := r.tk.ExternalRef(ctx)
		if err != nil {
			return nil, err
		}
		if raw != "" {
			if err := json.Unmarshal([]byte(raw), &r.ref); err != nil || r.ref.Key == "" {
				return nil, r.fail("the task's recorded job %q is not one of this tool's; the outcome is unknown", raw)
			}
		}
	}
	if r.ref.Started.IsZero() {
		r.ref.Started = time.Now().UTC()
	}
	r.v.captured = r.ref.Captured
	if jt.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, r.ref.Started.Add(jt.Timeout), errTimeout)
		defer cancel()
	}

	if r.tk != nil && !jt.Observe {
		// On the ledger before any start is sent; a re-run finds the
		// operation its first run recorded. An observe tool starts
		// nothing, and records nothing there.
		op, err := r.tk.RecordOperation(ctx, mcptask.Operation{Object: jt.Name, Effect: "run a job of " + hostOf(jt.Start.URL)})
		if err != nil {
			return nil, err
		}
		r.op = op
	}
	switch {
	case r.ref.JobID != "":
		// A re-run after a crash, a shutdown or a takeover: the job runs
		// (or ran) in the job system; watch it again.
		jt.log.Info("re-attaching to a job", "task", r.tk.ID(), "job", r.ref.JobID)
		r.note("re-attached to job %s", r.ref.JobID)
		r.setMessage(ctx, fmt.Sprintf("re-attached to job %s", r.ref.JobID))
		return r.watch(ctx, "re-attached to job "+r.ref.JobID+": ")
	case r.ref.Key != "" && jt.Observe:
		// Recorded by a run of the tool before it was put in observe
		// mode: a start may have been sent, and is not sent again.
		jt.log.Error("a previous run stopped between sending the start and recording the job's ID; the tool now observes, and sends no start",
			"task", r.tk.ID(), "idempotencyKey", r.ref.Key)
		return nil, r.fail("the outcome of %s is unknown: mcptask stopped after sending the start request and before recording the job's ID; "+
			"the tool is now in observe mode and sends no start: look the idempotency key %s up in the job system", jt.Name, r.ref.Key)
	case jt.Observe:
		return r.observe(ctx)
	case r.ref.Key != "" && !jt.IdempotentStart:
		jt.log.Error("a previous run stopped between sending the start and recording the job's ID; not sent again (idempotentStart is off)",
			"task", r.tk.ID(), "idempotencyKey", r.ref.Key)
		return nil, r.fail("the outcome of %s is unknown: mcptask stopped after sending the start request and before recording the job's ID; "+
			"the start was not sent again (idempotentStart is off): look the idempotency key %s up in the job system", jt.Name, r.ref.Key)
	case r.ref.Key != "":
		jt.log.Info("a previous run stopped before recording the job's ID; sending the start again with the same idempotency key",
			"task", r.tk.ID(), "idempotencyKey", r.ref.Key)
		r.setMessage(ctx, fmt.Sprintf("sending the start again with idempotency key %s (mcptask stopped before the job's ID was recorded)", r.ref.Key))
	case r.tk != nil:
		r.ref.Key = KeyPrefix + r.tk.ID()
		if err := r.record(ctx, false); err != nil {
			return nil, err
		}
	default:
		// A synchronous call: no task to name the key after.
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		r.ref.Key = KeyPrefix + "call-" + hex.EncodeToString(b)
	}
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	if r.tk != nil {
		// The receipt first: a create waiting for the job's ID is
		// answered with the submitted operation.
		r.settle(ctx, task.OpSubmitted, "")
		if err := r.record(ctx, true); err != nil {
			// The job runs, but a crash now could not find it. Not
			// cancelled: a takeover re-sends the start with the key and
			// finds it (IdempotentStart); the log names it either way.
			jt.log.Error("the job started but its ID could not be recorded", "task", r.tk.ID(), "job", r.ref.JobID,
				"idempotencyKey", r.ref.Key, "err", err)
			return nil, fmt.Errorf("recording job %s (idempotency key %s): %w", r.ref.JobID, r.ref.Key, err)
		}
		jt.log.Info("job started", "task", r.tk.ID(), "job", r.ref.JobID, "idempotencyKey", r.ref.Key)
	}
	r.note("job %s started (idempotency key %s)", r.ref.JobID, r.ref.Key)
	r.setMessage(ctx, "job "+r.ref.JobID+" started")
	return r.watch(ctx, "")
}

// observe is the first run of a call of an observe tool: it takes the
// job's ID from the call's jobId argument (refusing, with nothing sent,
// one that is not a non-blank string or cannot fill the status URL),
// records it as the task's external reference, the shape a re-attachment
// reads, and watches the job. No start is sent.
func (r *run) observe(ctx context.Context) (*mcp.CallToolResult, error) {
	id, err := r.observedJob()
	if err != nil {
		return nil, err
	}
	r.ref.JobID = id
	if r.tk != nil {
		// The key is never sent: it only gives the reference the shape
		// every run of the tool reads.
		r.ref.Key = KeyPrefix + r.tk.ID()
		if err := r.record(ctx, true); err != nil {
			return nil, fmt.Errorf("recording job %s: %w", id, err)
		}
		r.log.Info("observing a job", "task", r.tk.ID(), "job", id)
	}
	r.note("observing job %s (observe mode: no start or cancel request is sent)", id)
	r.setMessage(ctx, "observing job "+id)
	return r.watch(ctx, "")
}

// observedJob is the job's ID an observe call gives (its argument jobId):
// a non-blank string, which fills the status request's URL (a path
// segment it fills whole may not be "", "." or ".."). Anything else is
// the call's invalid params, and nothing is sent.
func (r *run) observedJob() (string, error) {
	var id string
	raw, given := r.v.args[jobIDName]
	if !given || json.Unmarshal(raw, &id) != nil || strings.TrimSpace(id) == "" {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"%s watches an existing job: give the job's ID as the argument jobId, a non-empty string (e.g. {\"jobId\": \"1234\"}); nothing was sent", r.Name)}
	}
	v := r.v
	v.jobID = id
	if _, err := v.fillURL(r.Status.URL); err != nil {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: r.scrub(fmt.Sprintf("%s: jobId %q: %v", r.Name, id, err))}
	}
	return id, nil
}

// record writes the task's external reference: provisional (the key) or
// final (with the job's ID).
func (r *run) record(ctx context.Context, final bool) error {
	// What the log says of the job (its lines read so far, the values
	// captured) is durable before the record says it was read.
	r.tk.FlushLog()
	b, _ := json.Marshal(r.ref)
	if final {
		return r.tk.SetExternalRef(ctx, string(b))
	}
	return r.tk.SetProvisionalExternalRef(ctx, string(b))
}

// start sends the start request (retrying what may be retried, always
// with the same key) and reads the job's ID from its answer.
func (r *run) start(ctx context.Context) error {
	code, answer, err := r.send(ctx, "starting the job", r.Start.Request, http.MethodPost, r.ref.Key)
	if err != nil {
		return r.ended(ctx, "starting the job", err)
	}
	if code >= 300 {
		r.log.Warn("the job API refused the start", "task", r.taskID(), "status", code, "answer", r.excerpt(answer))
		why := fmt.Sprintf("the job API refused to start the job: HTTP %d: %s", code, r.apiError(answer))
		r.note("%s", why)
		if code < 500 {
			// A 4xx answer: nothing was started.
			r.settle(ctx, task.OpRejected, why)
		}
		return r.fail("the job API refused to start the job: HTTP %d: %s", code, r.apiError(answer))
	}
	doc, err := decode(answer)
	if err != nil {
		return r.mismatch("the start answer is not JSON", answer)
	}
	v, err := lookup(doc, r.Start.JobID)
	id, ok := scalarText(v)
	if err != nil || !ok || id == "" {
		return r.mismatch(fmt.Sprintf("the start answer has no job ID at %s", r.Start.JobID), answer)
	}
	r.capture(ctx, r.Start.Capture, answer) // recorded with the job's ID
	r.ref.JobID = id
	return nil
}

// watch polls the job's status until it ends, and returns its outcome.
// prefix starts the first status message relayed (after a re-attachment).
func (r *run) watch(ctx context.Context, prefix string) (*mcp.CallToolResult, error) {
	r.v.jobID = r.ref.JobID
	var relayed string // the job's last message relayed
	for {
		code, answer, err := r.send(ctx, "reading the job's status", r.Status.Request, http.MethodGet, "")
		if err != nil {
			return nil, r.ended(ctx, "reading the job's status", err)
		}
		switch {
		case code == http.StatusNotFound || code == http.StatusGone:
			r.log.Error("the job API no longer knows the job", "task", r.taskID(), "job", r.ref.JobID, "status", code)
			if r.Observe {
				return nil, r.fail("the job API does not know job %s (HTTP %d: %s): %s observes jobs it is given and starts none", r.ref.JobID, code, r.apiError(answer), r.Name)
			}
			return nil, r.fail("the job API no longer knows job %s (HTTP %d: %s): the outcome of %s is unknown", r.ref.JobID, code, r.apiError(answer), r.Name)
		case code >= 300:
			r.log.Error("the job API refused the status request", "task", r.taskID(), "job", r.ref.JobID, "status", code, "answer", r.excerpt(answer))
			return nil, r.fail("the job API refused the status of job %s: HTTP %d: %s", r.ref.JobID, code, r.apiError(answer))
		}
		doc, err := decode(answer)
		if err != nil {
			return nil, r.mismatch("the status answer is not JSON", answer)
		}
		if r.Status.Message != "" {
			if v, err := lookup(doc, r.Status.Message); err == nil {
				// Relayed when the job's message changes, or when another
				// message (an outage's) took its place: a re-attachment's
				// prefixed message stays until the job says something new.
				if msg := r.scrub(textOf(v)); msg != "" && (msg != relayed || !strings.HasSuffix(r.last, msg)) {
					relayed = msg
					r.setMessage(ctx, prefix+msg)
					prefix = ""
				}
			}
		}
		r.capture(ctx, r.Status.Capture, answer)
		if err := r.lookups(ctx); err != nil {
			return nil, r.ended(ctx, "looking up the job", err)
		}
		v, err := lookup(doc, r.Status.State)
		state, ok := scalarText(v)
		if err == nil && v == nil {
			state, ok = "", true // null: e.g. the result of a job not complete yet
		}
		if err != nil || !ok {
			return nil, r.mismatch(fmt.Sprintf("the status answer has no state at %s", r.Status.State), answer)
		}
		if slices.Contains(r.Status.Working, state) {
			r.followLog(ctx, false)
		} else {
			r.followLog(ctx, true) // the end of the log, before the outcome
		}
		switch {
		case slices.Contains(r.Status.Working, state):
		case slices.Contains(r.Status.Completed, state):
			r.settle(ctx, task.OpConfirmed, "job "+r.ref.JobID+" completed")
			r.note("job %s completed (state %q)", r.ref.JobID, state)
			r.setMessage(ctx, "job "+r.ref.JobID+" completed")
			return r.result(ctx, doc, answer)
		case slices.Contains(r.Status.Failed, state):
			msg := r.failureDetail(ctx, doc, true)
			if msg == "" {
				msg = "(the job API gives no reason)"
			}
			r.log.Info("job failed", "task", r.taskID(), "job", r.ref.JobID, "state", state)
			r.settle(ctx, task.OpRejected, "job "+r.ref.JobID+" failed: "+msg)
			r.note("job %s failed (state %q): %s", r.ref.JobID, state, msg)
			r.setMessage(ctx, "job "+r.ref.JobID+" failed: "+msg)
			return &mcp.CallToolResult{IsError: true,
				Content:           []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("job %s failed: %s", r.ref.JobID, msg)}},
				StructuredContent: map[string]any{"jobId": r.ref.JobID, "state": state, "error": msg}}, nil
		case slices.Contains(r.Status.Cancelled, state):
			r.log.Info("job cancelled in the job system", "task", r.taskID(), "job", r.ref.JobID, "state", state)
			r.settle(ctx, task.OpRejected, "job "+r.ref.JobID+" was cancelled in the job system")
			why := fmt.Sprintf("job %s was cancelled (state %q)", r.ref.JobID, state)
			if d := r.failureDetail(ctx, doc, true); d != "" {
				why += ": " + d
			}
			r.note("%s", why)
			return nil, mcptask.WorkCancelled(r.scrub(why))
		default:
			return nil, r.mismatch(fmt.Sprintf("the job's state %q at %s is in none of the lists working %q, completed %q, failed %q, cancelled %q",
				state, r.Status.State, r.Status.Working, r.Status.Completed, r.Status.Failed, r.Status.Cancelled), answer)
		}
		if err := sleep(ctx, r.PollInterval); err != nil {
			return nil, r.ended(ctx, "waiting for the job", err)
		}
	}
}

// result returns a completed job's result: from the status answer doc,
// or from a result request.
func (r *run) result(ctx context.Context, doc any, answer []byte) (*mcp.CallToolResult, error) {
	if r.Result.URL != "" {
		code, b, err := r.send(ctx, "reading the job's result", r.Result.Request, http.MethodGet, "")
		if err != nil {
			return nil, r.ended(ctx, "reading the job's result", err)
		}
		if code >= 300 {
			r.log.Error("the job API refused the result request", "task", r.taskID(), "job", r.ref.JobID, "status", code, "answer", r.excerpt(b))
			return nil, r.fail("job %s completed, but the job API refused its result: HTTP %d: %s", r.ref.JobID, code, r.apiError(b))
		}
		r.capture(ctx, r.Result.Capture, b)
		if doc, err = decode(b); err != nil {
			return nil, r.mismatch("the result answer is not JSON", b)
		}
		answer = b
	}
	v, err := lookup(doc, r.Result.Pointer)
	if err != nil {
		return nil, r.mismatch(fmt.Sprintf("job %s completed, but its answer has no result at %s", r.ref.JobID, r.Result.Pointer), answer)
	}
	r.log.Info("job completed", "task", r.taskID(), "job", r.ref.JobID)
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: textOf(v)}}}
	if obj, ok := v.(map[string]any); ok {
		res.StructuredContent = obj
	}
	return res, nil
}

// ended is the error of a run whose request or wait ended with err: a
// cancel of the task (or its timeout) cancels the job, unless the tool
// only observes it; a shutdown or a takeover leaves it running for the
// next run to re-attach to.
func (r *run) ended(ctx context.Context, what string, err error) error {
	if ctx.Err() == nil {
		return err
	}
	timedOut := errors.Is(context.Cause(ctx), errTimeout)
	cancelled := r.tk == nil || r.tk.Cancelled()
	switch {
	case r.Observe && r.ref.JobID != "" && (timedOut || cancelled):
		// Observing never changes the job: no cancel request.
		r.log.Info("stopped observing the job; it was not cancelled (observe mode)", "task", r.taskID(), "job", r.ref.JobID, "timedOut", timedOut)
		r.note("stopped observing job %s; the job was left as it is (observe mode sends no cancel request)", r.ref.JobID)
	case r.ref.JobID != "" && cancelled && !timedOut && r.tk != nil && r.Cancel.URL != "":
		// The cancel was carried out before the task was marked
		// cancelled (cancelTask): the job API accepted it.
		r.note("job %s cancelled on request", r.ref.JobID)
		r.settle(context.WithoutCancel(ctx), task.OpRejected, "job "+r.ref.JobID+" cancelled on request (the job API accepted the cancel)")
	case r.ref.JobID != "" && (timedOut || cancelled):
		r.cancelJob()
	}
	if r.ref.JobID == "" && (timedOut || cancelled) && r.ref.Key != "" {
		r.log.Warn("the task ended before the job API answered the start; a job it may have started was not cancelled",
			"task", r.taskID(), "idempotencyKey", r.ref.Key)
	}
	if timedOut {
		job := "job " + r.ref.JobID
		if r.ref.JobID == "" {
			job = "the start (idempotency key " + r.ref.Key + ")"
		}
		msg := fmt.Sprintf("%s timed out after %v %s; %s", r.Name, r.Timeout, what, job)
		switch {
		case r.outage != "":
			msg += " (" + r.outage + ")"
		case r.Observe && r.ref.JobID != "":
			msg += " was not cancelled (observe mode: the tool only watches it)"
		case r.ref.JobID != "" && r.Cancel.URL != "":
			msg += " was sent a cancel request"
		case r.ref.JobID != "":
			msg += " may still run (no cancel request is configured)"
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
	}
	return context.Cause(ctx)
}

// cancelTask is the tool's ToolOptions.Cancel: it sends the cancel
// request of the task's job and returns nil once the job API accepted it
// (see Cancel), else why not. A task whose job's ID is not recorded yet
// (its start is in flight) is let go: its run's start request is cut.
func (jt *jobTool) cancelTask(ctx context.Context, t *task.Task) error {
	if jt.Observe {
		return nil // not registered for an observe tool; were it, nothing to stop
	}
	var rf ref
	if t.ExternalRef == "" || json.Unmarshal([]byte(t.ExternalRef), &rf) != nil || rf.JobID == "" {
		return nil
	}
	if jt.Cancel.URL == "" {
		return fmt.Errorf("job %s cannot be cancelled: the tool declares no cancel request (cancel.url); it runs to its end", rf.JobID)
	}
	var call struct {
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(t.Request, &call)
	if call.Arguments == nil {
		call.Arguments = map[string]json.RawMessage{}
	}
	withDefaults(call.Arguments, jt.InputSchema)
	r := &run{jobTool: jt, v: vars{args: call.Arguments, jobID: rf.JobID, captured: rf.Captured}, ref: rf}
	code, answer, err := r.send(ctx, "cancelling the job", jt.Cancel.Request, http.MethodPost, "")
	switch {
	case err != nil && r.outage != "":
		return errors.New(r.scrub(fmt.Sprintf("the cancel request of job %s failed: %s", rf.JobID, r.outage)))
	case err != nil:
		return errors.New(r.scrub(fmt.Sprintf("the cancel request of job %s failed: %s", rf.JobID, r.describe(err))))
	case code >= 300:
		jt.log.Warn("the job API refused the cancel request", "task", t.ID, "job", rf.JobID, "status", code, "answer", r.excerpt(answer))
		return fmt.Errorf("the job API refused the cancel of job %s: HTTP %d: %s", rf.JobID, code, r.apiError(answer))
	}
	if jt.Cancel.OK != "" {
		doc, derr := decode(answer)
		if v, lerr := lookup(doc, jt.Cancel.OK); derr != nil || lerr != nil || v == nil {
			return fmt.Errorf("the job API did not accept the cancel of job %s: its answer has no value at %s: %s", rf.JobID, jt.Cancel.OK, r.apiError(answer))
		}
	}
	jt.log.Info("the job API accepted the cancel", "task", t.ID, "job", rf.JobID)
	if len(jt.Status.Cancelled) == 0 {
		return nil // no state says cancelled: the accepted request is the confirmation
	}
	return r.confirmCancel(ctx)
}

// confirmCancel waits, up to CancelConfirmWait, for the job's status to
// say cancelled.
func (r *run) confirmCancel(ctx context.Context) error {
	ctx, stop := context.WithTimeout(ctx, CancelConfirmWait)
	defer stop()
	state := ""
	for {
		code, answer, err := r.send(ctx, "confirming the cancel", r.Status.Request, http.MethodGet, "")
		if err == nil && code < 300 {
			if doc, derr := decode(answer); derr == nil {
				v, _ := lookup(doc, r.Status.State)
				state, _ = scalarText(v)
			}
			switch {
			case slices.Contains(r.Status.Cancelled, state):
				return nil
			case slices.Contains(r.Status.Completed, state), slices.Contains(r.Status.Failed, state):
				return fmt.Errorf("job %s ended (state %q) before the cancel took effect", r.ref.JobID, state)
			}
		}
		if err := sleep(ctx, r.PollInterval); err != nil {
			return fmt.Errorf("the job API accepted the cancel, but job %s still says %q after %v: the task goes on and ends as the job does",
				r.ref.JobID, state, CancelConfirmWait)
		}
	}
}

// cancelJob sends the cancel request, bounded, with retries.
func (r *run) cancelJob() {
	if r.Observe {
		return // observing never changes the job
	}
	if r.Cancel.URL == "" {
		r.log.Info("the task ended; no cancel request is configured, the job may still run", "task", r.taskID(), "job", r.ref.JobID)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	r.tk = nil // no status message: the task has ended
	code, answer, err := r.send(ctx, "cancelling the job", r.Cancel.Request, http.MethodPost, "")
	switch {
	case err != nil:
		r.log.Warn("the cancel request failed", "job", r.ref.JobID, "err", r.scrub(err.Error()))
		why := fmt.Sprintf("the cancel request of job %s failed: %s; the job may still run", r.ref.JobID, r.describe(err))
		r.note("%s", why)
		r.settle(ctx, task.OpUnknown, why)
	case code >= 300:
		r.log.Warn("the job API refused the cancel request", "job", r.ref.JobID, "status", code, "answer", r.excerpt(answer))
		why := fmt.Sprintf("the job API refused the cancel of job %s: HTTP %d: %s; the job may still run", r.ref.JobID, code, r.apiError(answer))
		r.note("%s", why)
		r.settle(ctx, task.OpUnknown, why)
	default:
		r.log.Info("job cancelled", "job", r.ref.JobID)
		r.note("the job API accepted the cancel of job %s", r.ref.JobID)
		r.settle(ctx, task.OpRejected, "job "+r.ref.JobID+" cancelled on request (the job API accepted the cancel)")
	}
}

// send fills the templates of req and sends it (see do); method is its
// default method. A template that cannot be filled is the call's invalid
// params, and nothing is sent.
func (r *run) send(ctx context.Context, what string, req Request, method, key string) (int, []byte, error) {
	u, headers, body, err := r.fill(what, req)
	if err != nil {
		return 0, nil, err
	}
	return r.do(ctx, what, cmp(req.Method, method), u, headers, body, key)
}

// fill fills req's templates: its URL (a template that cannot be filled
// is the call's invalid params), its headers with the body's Content-Type
// unless they set one, and its body.
func (r *run) fill(what string, req Request) (u string, headers map[string]string, body []byte, err error) {
	if u, err = r.v.fillURL(req.URL); err != nil {
		return "", nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: r.scrub(err.Error())}
	}
	headers = req.Headers
	switch {
	case req.Body != nil:
		if body, err = json.Marshal(r.v.fillBody(req.Body)); err != nil {
			return "", nil, nil, r.fail("%s: encoding the request's body: %v", what, err)
		}
		headers = withDefault(headers, "Content-Type", "application/json")
	case req.BodyText != "":
		body = []byte(r.v.fillText(req.BodyText))
		headers = withDefault(headers, "Content-Type", "text/plain; charset=utf-8")
	}
	return u, headers, body, nil
}

// withDefault is h with the header k set to v unless h sets it (in any
// case); h itself is not changed.
func withDefault(h map[string]string, k, v string) map[string]string {
	for name := range h {
		if http.CanonicalHeaderKey(name) == k {
			return h
		}
	}
	out := make(map[string]string, len(h)+1)
	for name, val := range h {
		out[name] = val
	}
	out[k] = v
	return out
}

// do sends one request, retrying connection errors, 5xx and 429 with
// backoff until ctx ends; it returns the first other answer's status and
// body (at most MaxAnswer bytes).
func (r *run) do(ctx context.Context, what, method, u string, headers map[string]string, body []byte, key string) (int, []byte, error) {
	for attempt := 1; ; attempt++ {
		code, answer, err := r.once(ctx, what, method, u, headers, body, key)
		if err != nil && ctx.Err() == nil {
			if msg := permanent(err); msg != "" {
				r.log.Error("the job API's answer cannot be used; not retried", "task", r.taskID(), "job", r.ref.JobID, "what", what, "err", r.scrub(msg))
				return 0, nil, r.fail("%s: job %s: %s: %s", r.Name, r.jobName(), what, msg)
			}
		}
		if err == nil && code < 500 && code != http.StatusTooManyRequests {
			if r.outage != "" {
				r.log.Info("the job API answers again", "task", r.taskID(), "job", r.ref.JobID, "attempts", attempt)
				r.note("the job API answers again %s, after %d attempts", what, attempt)
				r.outage = ""
				r.show(ctx, r.steady) // the job's own message, not the outage's
			}
			return code, answer, nil
		}
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		problem := ""
		if err != nil {
			problem = r.describe(err)
		} else {
			problem = fmt.Sprintf("HTTP %d: %s", code, r.apiError(answer))
		}
		pause := backoff(attempt)
		r.outage = fmt.Sprintf("the job API failed %d times in a row %s, last: %s", attempt, what, problem)
		r.log.Warn("the job API failed; retrying", "task", r.taskID(), "job", r.ref.JobID, "what", what, "attempt", attempt, "pause", pause, "err", problem)
		r.note("the job API failed %s (attempt %d): %s; retrying in %v", what, attempt, problem, pause)
		r.show(ctx, fmt.Sprintf("%s; retrying in %v", r.outage, pause))
		if err := sleep(ctx, pause); err != nil {
			return 0, nil, err
		}
	}
}

// once sends one request, in a client span carrying its trace context to
// the job API as the traceparent header.
func (r *run) once(ctx context.Context, what, method, u string, headers map[string]string, body []byte, key string) (_ int, _ []byte, err error) {
	ctx, span := r.tracer.Start(ctx, tracing.SpanJob, trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	code := 0
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrTool, r.Name), attribute.String(tracing.AttrJobStep, what),
			attribute.String("http.request.method", method), attribute.String("server.address", hostOf(u)))
		defer func() {
			if code != 0 {
				span.SetAttributes(attribute.Int("http.response.status_code", code))
			}
			if err != nil || code >= 500 {
				span.SetStatus(codes.Error, r.describeCall(code, err))
			}
		}()
	}
	caller := ctx
	defer func() { r.noteHealth(caller, code, err) }()
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Accept", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	code = resp.StatusCode
	answer, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1))
	if err != nil {
		return 0, nil, err
	}
	if len(answer) > MaxAnswer {
		return resp.StatusCode, nil, errTooLarge
	}
	return resp.StatusCode, answer, nil
}

// describeCall is the status description of a failed job request's span:
// the error, scrubbed of the tool's secrets, or the HTTP status.
func (r *run) describeCall(code int, err error) string {
	if err != nil {
		return r.describe(err)
	}
	return fmt.Sprintf("HTTP %d", code)
}

// backoff is the pause after the attempt-th failure in a row: 250ms,
// doubling up to 10s.
func backoff(attempt int) time.Duration {
	d := 250 * time.Millisecond
	for i := 1; i < attempt && d < 10*time.Second; i++ {
		d *= 2
	}
	return min(d, 10*time.Second)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// setMessage sets the task's status message, the job's own (see
// steady), when it changed.
func (r *run) setMessage(ctx context.Context, msg string) {
	r.steady = msg
	r.show(ctx, msg)
}

// show sets the task's status message when it changed.
func (r *run) show(ctx context.Context, msg string) {
	if r.tk == nil || msg == r.last || msg == "" {
		return
	}
	r.last = msg
	_ = r.tk.SetStatusMessage(ctx, r.scrub(msg))
}

// note writes a line to the task's log (mcptask logs, the dashboard),
// without secrets.
func (r *run) note(format string, args ...any) {
	if r.logTo != nil {
		r.logTo.Log(r.bounded(fmt.Sprintf(format, args...)))
	}
}

func (r *run) taskID() string {
	if r.tk == nil {
		return ""
	}
	return r.tk.ID()
}

// fail is the task's error: a failed task whose message says what
// happened (never a secret).
func (r *run) fail(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: r.scrub(fmt.Sprintf(format, args...))}
}

// mismatch fails the task loudly with an answer that maps to nothing:
// what was expected, and the answer's first bytes (also logged).
func (r *run) mismatch(what string, answer []byte) error {
	job := r.jobName()
	r.log.Error("the job API's answer matches no mapping", "task", r.taskID(), "job", job, "problem", r.scrub(what), "answer", r.excerpt(answer))
	return r.fail("%s: job %s: %s; the answer begins: %s", r.Name, job, what, r.excerpt(answer))
}

// apiError is the job system's error in an answer: the value of a usual
// error field if there is one, else the answer's first bytes.
func (r *run) apiError(answer []byte) string {
	if doc, err := decode(answer); err == nil {
		for _, p := range []string{"/error/message", "/error", "/message", "/detail", "/title"} {
			if v, err := lookup(doc, p); err == nil {
				if s, ok := v.(string); ok && s != "" {
					return r.bounded(s)
				}
			}
		}
	}
	return r.excerpt(answer)
}

// excerpt is the first bytes of an answer, without secrets.
func (r *run) excerpt(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "(empty)"
	}
	return r.bounded(string(b))
}

// bounded is s cut to Excerpt bytes (at a character boundary), without
// secrets.
func (r *run) bounded(s string) string {
	s = r.scrub(s)
	if len(s) <= Excerpt {
		return s
	}
	cut := Excerpt
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d bytes)", len(s))
}

// scrub replaces the secrets in s.
func (jt *jobTool) scrub(s string) string { return jt.secrets.String(s) }

// describe is a request's error without its URL's query (an argument may
// be there) and without secrets.
func (r *run) describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		u := ue.URL
		if p, err := url.Parse(u); err == nil {
			p.RawQuery, p.User = "", nil
			u = p.String()
		}
		err = fmt.Errorf("%s %s: %w", ue.Op, u, ue.Err)
	}
	return r.scrub(err.Error())
}

// decode decodes a JSON answer, numbers as json.Number.
func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// textOf is a value as text: a string as it is, anything else as JSON.
func textOf(v any) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// settle records what the job system said of the job on its operation:
// submitted (its ID as the receipt), confirmed (completed), rejected
// (failed or cancelled). A failure is logged: the task's outcome does
// not depend on it.
func (r *run) settle(ctx context.Context, to task.OpState, detail string) {
	if r.op == nil || r.op.State() == to {
		return
	}
	var err error
	switch to {
	case task.OpSubmitted:
		err = r.op.Submitted(ctx, r.ref.JobID)
	case task.OpConfirmed:
		if r.op.State() == task.OpIntended {
			_ = r.op.Submitted(ctx, r.ref.JobID) // a re-attachment of an older run
		}
		err = r.op.Confirmed(ctx, detail)
	case task.OpRejected:
		if r.op.State() == task.OpIntended && r.ref.JobID != "" {
			_ = r.op.Submitted(ctx, r.ref.JobID)
		}
		err = r.op.Rejected(ctx, r.bounded(detail))
	case task.OpUnknown:
		if r.op.State() == task.OpIntended && r.ref.JobID != "" {
			_ = r.op.Submitted(ctx, r.ref.JobID)
		}
		err = r.op.Unknown(ctx, r.bounded(detail))
	}
	if err != nil {
		r.log.Warn("recording the job on the operation ledger", "task", r.taskID(), "job", r.ref.JobID, "state", to, "err", err)
	}
}

// reconcile is the tool's ToolOptions.Reconcile: an operation with a
// receipt names a job; a job the job API no longer knows (404, 410) was
// not applied, so the task runs again; any other job is left to the
// re-attachment (mcptask.ErrNoReconcile), which follows it to its end and
// records its outcome. A status URL that needs the call's arguments
// cannot be asked from the operation alone, and is left likewise.
func (jt *jobTool) reconcile(ctx context.Context, op task.Operation) (task.OpState, string, error) {
	if op.Receipt == "" {
		return "", "", mcptask.ErrNoReconcile
	}
	r := &run{jobTool: jt, v: vars{args: map[string]json.RawMessage{}, jobID: op.Receipt}, ref: ref{JobID: op.Receipt}}
	u, err := r.v.fillURL(jt.Status.URL)
	if err != nil {
		return "", "", mcptask.ErrNoReconcile
	}
	code, answer, err := r.once(ctx, "reconciling the job's operation", http.MethodGet, u, jt.Status.Headers, nil, "")
	if err != nil {
		return "", "", fmt.Errorf("reading the status of job %s: %s", op.Receipt, r.describe(err))
	}
	if code == http.StatusNotFound || code == http.StatusGone {
		return task.OpRejected, fmt.Sprintf("the job API does not know job %s (HTTP %d: %s)", op.Receipt, code, r.apiError(answer)), nil
	}
	return "", "", mcptask.ErrNoReconcile
}
