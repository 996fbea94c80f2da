// Package httpjob turns jobs of an HTTP job API (a CI pipeline, a batch
// job, a workflow engine: a system that runs long work and keeps its
// state) into tools of an mcptask server, whose tasks follow the job:
//
//	jobs := httpjob.New([]httpjob.Tool{{
//		Name:        "build",
//		Description: "Builds a git ref",
//		InputSchema: map[string]any{"type": "object",
//			"properties": map[string]any{"ref": map[string]any{"type": "string"}}},
//		Start: httpjob.Start{Request: httpjob.Request{Method: "POST", URL: "https://ci.example.com/jobs",
//			Headers: map[string]string{"Authorization": "Bearer " + token},
//			Body:    map[string]any{"ref": "{ref}"}}, JobID: "/id"},
//		Status: httpjob.Status{Request: httpjob.Request{URL: "https://ci.example.com/jobs/{jobId}"},
//			State: "/state", Message: "/progress", Error: "/error/message",
//			Working: []string{"queued", "running"}, Completed: []string{"succeeded"},
//			Failed: []string{"failed"}, Cancelled: []string{"cancelled"}},
//		Result:  httpjob.Result{Pointer: "/output"},
//		Cancel:  httpjob.Cancel{Request: httpjob.Request{URL: "https://ci.example.com/jobs/{jobId}/cancel"}},
//		Support: mcptask.Optional,
//	}}, http.DefaultClient, logger)
//	err := jobs.Register(ctx, ts)
//
// A call sends the start request, with the header Idempotency-Key:
// mcptask-TASKID, recorded on the task (Task.SetProvisionalExternalRef)
// before it is sent; the job's ID, found in the answer at the JobID JSON
// pointer (RFC 6901), is recorded as the task's external reference
// ({"key":..., "jobId":...}) before the client's create is answered
// (ToolOptions.AwaitExternalRef). The task then polls the status request
// every PollInterval: the value at Status.Message is its status message,
// the value at Status.State says whether the job is still working or how
// it ended. A completed job's result (at Result.Pointer in the status
// answer, or in the answer to a result request) is the task's result, a
// failed job's error (at Status.Error) an isError result, a cancel of the
// task sends the cancel request.
//
// Every request (start, status, result, cancel) has a method, a URL,
// headers and a body: JSON (Body) or text (BodyText). Templates: {name}
// is the call's argument name (escaped for a path segment, or for a query
// value after the '?', in URLs), {jobId} the job's ID. An argument the
// call omits takes its default from the input schema, if it has one. In
// a JSON body template, a string that is exactly "{name}" becomes the
// argument's JSON value (a number stays a number), and an object member
// of an argument given neither by the call nor by a default is left out;
// other strings get the values interpolated as text, as in a text body.
//
// A tool in observe (shadow) mode (Tool.Observe), used to roll a tool
// out alongside the system that starts its jobs today, starts nothing:
// its call names an existing job by its ID (the required string argument
// jobId), which is recorded as the task's external reference at once,
// and the task follows that job as a re-attached task does (status polls,
// lookups, log, links, result, failure). It never sends the start
// request, nor the cancel request: a cancel of the task (or its timeout)
// stops the watching and leaves the job as it is; and it records no
// operation on the ledger. [Tools.Observe] reads a job's state once, as a
// task would show it, e.g. for a report comparing the tasks' outcomes
// with the job API's.
//
// After a crash, a restart, a graceful hand-back or a takeover by another
// instance, the task's work runs again (ToolOptions.Reattach) and
// re-attaches: it watches the recorded job instead of starting another.
// A run that stopped between sending the start and recording the job's ID
// left only the idempotency key: with IdempotentStart the start is sent
// again with the same key (the job API answers with the job it started
// then); without, the task fails saying its outcome is unknown and naming
// the key, for an operator to look up in the job system.
//
// Errors lose nothing: a start refused with 4xx fails the task with the
// job system's error; 5xx, 429 and connection errors are retried with
// backoff within the timeout; a status answer that matches no mapping
// fails the task with the answer's first bytes (also logged), and so
// does an answer above MaxAnswer. Header values are secrets: they never
// appear in status messages, results, logs or errors, even when a job
// system echoes them, and never reach another origin: a redirect to
// another scheme, host or port than the request's fails the task instead
// of being followed. A path segment an argument or the job's ID fills
// whole may not be "", "." or "..".
package httpjob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is a tool whose calls are jobs of an HTTP job API.
type Tool struct {
	// Name and Description are the tool's; InputSchema its arguments'
	// JSON Schema (an object schema; nil means no arguments), whose
	// properties name the arguments templates may use.
	Name        string
	Description string
	InputSchema map[string]any

	Start  Start
	Status Status
	Result Result
	Cancel Cancel
	// Lookups are more requests, by name, sent at each status poll until
	// all their captures have a value, then never again: e.g. the ID of
	// the build that a build request started, needed for its log. A
	// lookup is sent once the values its templates need are known; an
	// answer other than 2xx is asked again at the next poll.
	Lookups map[string]Request
	// Log, if its URL is set, follows the job's log.
	Log Log
	// Failure, if set, says why a failed or cancelled job ended so.
	Failure Failure
	// Links are links about a task, by name: URL templates of {jobId}
	// and captured values (not of the call's arguments), shown by
	// tasks/get (wire.MetaLinks), 'mcptask status' and the dashboard
	// once their values are known, e.g. the build's page:
	// "https://ci.example.com/#/builders/1/builds/{buildNumber}".
	Links map[string]string

	// PollInterval is the pause between two status requests; zero means
	// DefaultPollInterval.
	PollInterval time.Duration
	// Timeout, if positive, bounds the task from its first start (a
	// re-attached task keeps the time it had): the job is then cancelled
	// (with a cancel request; in observe mode it is left running) and the
	// task fails saying so.
	Timeout time.Duration
	// IdempotentStart declares that the job API honours Idempotency-Key
	// (a start with a key it has seen answers with that key's job): a
	// task that crashed between sending the start and recording the job's
	// ID sends it again with the same key instead of failing "outcome
	// unknown".
	IdempotentStart bool
	// Observe puts the tool in observe (shadow) mode: a call watches an
	// existing job, whose ID is its argument jobId (a string the input
	// schema then requires, added to InputSchema's properties), and
	// never changes it. The job's ID is recorded as the task's external
	// reference at once, and the task follows the job as a re-attached
	// task does: status polls, lookups, log, links, result, failure. The
	// start request is never sent (Start may be left out, or kept for the
	// day the tool leaves observe mode: it is checked, not sent); nor is
	// the cancel request: a cancel of the task, or its Timeout, stops the
	// watching and leaves the job running. The tool records no operation
	// on the ledger (it starts nothing), so it has no Reconcile.
	Observe bool

	// Support is the tool's task support (empty means mcptask.Optional);
	// MaxConcurrent, Queue and MaxTTL are as in mcptask.ToolOptions.
	Support       mcptask.TaskSupport
	MaxConcurrent int
	Queue         string
	MaxTTL        time.Duration

	// Secrets are more values (besides the headers', which always are)
	// never to show in status messages, logs or errors.
	Secrets []string
}

// Request is a request to the job API. Its URL and body are templates
// (see the package doc): {name} is an argument of the call, {jobId} the
// job's ID once known. Header values are sent as they are (secrets).
type Request struct {
	// Method defaults to POST for a start or a cancel, GET for the others.
	Method string
	// URL is an http:// or https:// URL template; no placeholder may
	// stand in its scheme, host or port.
	URL     string
	Headers map[string]string
	// Body is a JSON body template (decoded JSON: maps, lists, strings,
	// numbers), sent as application/json; BodyText a text body template,
	// sent as text/plain unless Headers set a Content-Type. At most one
	// is set; with neither, no body is sent.
	Body     any
	BodyText string
	// Capture names values to keep from the request's answer: each a
	// JSON pointer into a JSON answer ("/builds/0/buildid"), or "re:"
	// and a regular expression over the answer's text whose first group
	// (else the whole match) is the value. A value, once captured, is
	// kept with the task (a re-attachment has it), written to its log,
	// and is {name} in the templates of later requests; it is not
	// captured again. Values are scalars (a number as its JSON text) of
	// at most MaxCapture bytes.
	Capture map[string]string
}

// Log is a request for the job's log, polled with the status while the
// job runs (and once more at its end), once the values its templates
// need are known. Its lines go to the task's log (stream "job"); a line
// that matches Progress sets the task's status message.
type Log struct {
	Request
	// Lines, if set, is the JSON pointer of an array of lines in a JSON
	// answer, read on from the line count reached ({logOffset} in the
	// template, if the API takes it: then the answer's lines start
	// there). Without it the answer is text, read on from the byte
	// offset reached: asked with a Range header, and a server that
	// ignores it sends the whole text, of which the part already read is
	// skipped. The offset is kept with the task: after a restart the log
	// is read on from there (at most the last LogRecordEvery of lines
	// may be written twice).
	Lines string
	// Progress, if set, picks status messages from the lines: the last
	// line of a poll that matches sets the task's status message to the
	// first group, or the whole line without one.
	Progress *regexp.Regexp
}

// Failure says why a job failed or was cancelled, beyond Status.Error:
// with a URL, its request is sent once the job failed (capturing values
// as any request does); Pointer is the error's JSON pointer in its answer
// (or, without a URL, in the last status answer); Message, if set, is a
// template of the error filled with the values known ("step '{step}'
// exit {code}"), used when Pointer gives none.
type Failure struct {
	Request
	Pointer string
	Message string
}

// Start is the request that starts a job.
type Start struct {
	Request
	// JobID is the JSON pointer of the job's ID in the answer (a string
	// or a number).
	JobID string
}

// Status is the request that reads a job's state, and how its answer maps
// to the task.
type Status struct {
	// Request's URL needs {jobId}.
	Request
	// State is the JSON pointer of the job's state, whose value is one of
	// Working, Completed, Failed or Cancelled; any other value (or none)
	// fails the task loudly.
	State string
	// Message, if set, is the JSON pointer of the job's progress: the
	// task's status message.
	Message string
	// Error, if set, is the JSON pointer of a failed job's error.
	Error string

	Working   []string
	Completed []string
	Failed    []string
	Cancelled []string
}

// Result says where a completed job's result is: with no URL, at Pointer
// in the last status answer; with a URL (a template with {jobId}), at
// Pointer in the answer to its request. Pointer "" is the whole answer.
// The result is the task's: a string as text, anything else as JSON text
// (and, for an object, as structured content).
type Result struct {
	Request
	Pointer string
}

// Cancel is the request that cancels a job, sent when the task is
// cancelled or times out (never by a tool in observe mode: see
// Tool.Observe). A task is marked cancelled only once the job
// API accepted it: a 2xx answer (with a value at OK, if set) and, when
// Status lists Cancelled states, a status that says so within
// CancelConfirmWait. A refused or failed cancel (or a tool with no cancel
// URL) leaves the task running, and the canceller is told why.
type Cancel struct {
	Request
	// OK, if set, is the JSON pointer of a value a 2xx answer must hold
	// for the cancel to count as accepted (e.g. /result of a JSON-RPC
	// answer, whose errors come with HTTP 200 too).
	OK string
}

// Defaults and bounds.
const (
	// DefaultPollInterval is the default of Tool.PollInterval.
	DefaultPollInterval = 2 * time.Second
	// AwaitJobID bounds how long a create waits for the job's ID before
	// the client is answered all the same (ToolOptions.AwaitExternalRef).
	AwaitJobID = 30 * time.Second
	// RequestTimeout bounds one HTTP request to the job API.
	RequestTimeout = 30 * time.Second
	// MaxAnswer bounds the answers read from the job API.
	MaxAnswer = 4 << 20
	// Excerpt is how much of an unexpected answer is shown.
	Excerpt = 256
	// CancelConfirmWait bounds how long a cancel waits for the job's
	// status to say cancelled (when Status lists Cancelled states).
	CancelConfirmWait = 30 * time.Second
	// MaxCapture bounds a captured value; a longer one is not captured
	// (the task's log says so).
	MaxCapture = 1024
	// LogRecordEvery is how often, at most, the log's offset is recorded
	// with the task while lines come.
	LogRecordEvery = 5 * time.Second
)

// KeyPrefix starts the Idempotency-Key of a task's start request, followed
// by the task's ID.
const KeyPrefix = "mcptask-"

// Problem is what is wrong with one field of a Tool, named as in the
// configuration file (e.g. "status.state", "start.url").
type Problem struct {
	Field   string
	Message string
}

// Error returns the problem as "field: message".
func (p Problem) Error() string {
	if p.Field == "" {
		return p.Message
	}
	return p.Field + ": " + p.Message
}

var (
	placeholderName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)
	toolName        = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	methodToken     = regexp.MustCompile(`^[A-Z]+$`)
	headerName      = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
)

// Check returns the problems of t, each naming its field.
func (t Tool) Check() []Problem {
	var ps []Problem
	bad := func(field, format string, args ...any) {
		ps = append(ps, Problem{field, fmt.Sprintf(format, args...)})
	}
	if !toolName.MatchString(t.Name) {
		bad("", "the tool name %q: want 1 to 64 letters, digits, '_', '-' or '.'", t.Name)
	}
	args := map[string]bool{}
	if t.InputSchema != nil {
		if ty, _ := t.InputSchema["type"].(string); ty != "object" {
			bad("inputSchema", "want a JSON Schema of type object")
		}
		if props, ok := t.InputSchema["properties"].(map[string]any); ok {
			for k := range props {
				args[k] = true
			}
		} else if t.InputSchema["properties"] != nil {
			bad("inputSchema.properties", "want a map of argument names to schemas")
		}
	}
	// The values captured, by the request that captures them.
	captures := map[string]string{}
	capturing := []struct {
		field string
		spec  map[string]string
	}{{"start.capture", t.Start.Capture}, {"status.capture", t.Status.Capture}, {"result.capture", t.Result.Capture},
		{"cancel.capture", t.Cancel.Capture}, {"log.capture", t.Log.Capture}, {"failure.capture", t.Failure.Capture}}
	for _, name := range slices.Sorted(maps.Keys(t.Lookups)) {
		capturing = append(capturing, struct {
			field string
			spec  map[string]string
		}{"lookups." + name + ".capture", t.Lookups[name].Capture})
	}
	for _, c := range capturing {
		for _, name := range slices.Sorted(maps.Keys(c.spec)) {
			field := c.field + "." + name
			switch {
			case !placeholderName.MatchString(name):
				bad(field, "%q cannot be a placeholder's name (letters, digits, '_', '.', '-', not first a digit)", name)
			case name == jobIDName || name == logOffsetName || args[name]:
				bad(field, "%q is also an argument's (or mcptask's) name", name)
			case captures[name] != "":
				bad(field, "%q is also captured by %s", name, captures[name])
			}
			captures[name] = c.field
			if err := checkCapture(c.spec[name]); err != nil {
				bad(field, "%v", err)
			}
		}
	}
	known := func(field string, withJobID bool, ns []string) {
		for _, n := range ns {
			switch {
			case n == jobIDName && withJobID:
			case n == jobIDName:
				bad(field, "{jobId} is not known yet here")
			case n == logOffsetName && strings.HasPrefix(field, "log."):
			case captures[n] != "" && withJobID:
			case captures[n] != "":
				bad(field, "{%s} is captured only after the start", n)
			case !args[n] && len(captures) > 0:
				bad(field, "{%s} names no argument of inputSchema.properties (%s) nor a captured value", n, argList(args))
			case !args[n]:
				bad(field, "{%s} names no argument of inputSchema.properties (%s)", n, argList(args))
			}
		}
	}
	checkURL := func(field, u string, withJobID, required bool) {
		switch {
		case u == "" && required:
			bad(field, "required")
		case u == "":
		case !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://"):
			bad(field, "%q: want an http:// or https:// URL", u)
		case len(names(origin(u))) > 0:
			bad(field, "%q: a placeholder in the scheme, host or port: an argument never chooses where the request (and its headers) go", u)
		default:
			known(field, withJobID, names(u))
		}
	}
	checkMethod := func(field, m string) {
		if m != "" && !methodToken.MatchString(m) {
			bad(field, "%q: want an HTTP method such as POST", m)
		}
	}
	checkHeaders := func(field string, h map[string]string) {
		for k := range h {
			if !headerName.MatchString(k) {
				bad(field, "%q is not a header name", k)
			}
			if http.CanonicalHeaderKey(k) == "Idempotency-Key" && field == "start.headers" {
				bad(field, "Idempotency-Key is set by mcptask (mcptask-TASKID)")
			}
		}
	}
	checkPtr := func(field, p string, required bool) {
		if p == "" && required {
			bad(field, "required: a JSON pointer such as /id")
			return
		}
		if err := checkPointer(p); err != nil {
			bad(field, "%v", err)
		}
	}

	checkRequest := func(field string, req Request, withJobID, required bool) {
		checkMethod(field+".method", req.Method)
		checkURL(field+".url", req.URL, withJobID, required)
		checkHeaders(field+".headers", req.Headers)
		known(field+".body", withJobID, bodyNames(req.Body))
		known(field+".bodyText", withJobID, names(req.BodyText))
		if req.Body != nil && req.BodyText != "" {
			bad(field+".bodyText", "set body (JSON) or bodyText, not both")
		}
		if req.URL == "" && !required && (req.Method != "" || len(req.Headers) > 0 || req.Body != nil || req.BodyText != "") {
			bad(field+".url", "required with a method, headers or a body")
		}
	}

	// An observe tool sends no start: one configured is checked (for the
	// day the tool leaves observe mode) but not required.
	checkRequest("start", t.Start.Request, false, !t.Observe)
	checkPtr("start.jobId", t.Start.JobID, !t.Observe)
	if t.Observe {
		if props, ok := t.InputSchema["properties"].(map[string]any); ok && props[jobIDName] != nil {
			p, _ := props[jobIDName].(map[string]any)
			if ty, ok := p["type"]; p == nil || (ok && ty != "string") {
				bad("inputSchema.properties.jobId", "an observe tool's jobId argument is the job's ID: a string schema such as {type: string}, or leave it out")
			}
		}
	}

	checkRequest("status", t.Status.Request, true, true)
	if t.Status.URL != "" && !slices.Contains(names(t.Status.URL), jobIDName) && !slices.Contains(bodyNames(t.Status.Body), jobIDName) &&
		!slices.Contains(names(t.Status.BodyText), jobIDName) {
		bad("status.url", "want {jobId} in it (or in the status body)")
	}
	checkPtr("status.state", t.Status.State, true)
	checkPtr("status.message", t.Status.Message, false)
	checkPtr("status.error", t.Status.Error, false)
	if len(t.Status.Working) == 0 {
		bad("status.working", "list the states of a job still working (e.g. [queued, running])")
	}
	if len(t.Status.Completed) == 0 {
		bad("status.completed", "list the states of a job that succeeded: a job needs a terminal state")
	}
	seen := map[string]string{}
	for _, l := range []struct {
		field string
		vals  []string
	}{{"status.working", t.Status.Working}, {"status.completed", t.Status.Completed}, {"status.failed", t.Status.Failed}, {"status.cancelled", t.Status.Cancelled}} {
		for _, v := range l.vals {
			if prev, ok := seen[v]; ok {
				bad(l.field, "%q is also in %s", v, prev)
			}
			seen[v] = l.field
		}
	}

	checkRequest("result", t.Result.Request, true, false)
	checkPtr("result.pointer", t.Result.Pointer, false)

	checkRequest("cancel", t.Cancel.Request, true, false)
	for _, name := range slices.Sorted(maps.Keys(t.Lookups)) {
		checkRequest("lookups."+name, t.Lookups[name], true, true)
		if len(t.Lookups[name].Capture) == 0 {
			bad("lookups."+name+".capture", "required: a lookup is asked until its captures yield")
		}
	}
	checkRequest("log", t.Log.Request, true, false)
	checkPtr("log.lines", t.Log.Lines, false)
	if t.Log.URL == "" && (t.Log.Lines != "" || t.Log.Progress != nil) {
		bad("log.url", "required with log.lines or log.progress")
	}
	for _, name := range slices.Sorted(maps.Keys(t.Links)) {
		field := "links." + name
		u := t.Links[name]
		switch {
		case !toolName.MatchString(name):
			bad(field, "%q: want 1 to 64 letters, digits, '_', '-' or '.'", name)
		case !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://"):
			bad(field, "%q: want an http:// or https:// URL", u)
		case len(names(origin(u))) > 0:
			bad(field, "%q: a placeholder in the scheme, host or port", u)
		}
		for _, n := range names(u) {
			if n != jobIDName && captures[n] == "" {
				bad(field, "{%s} is neither {jobId} nor a captured value (a link is made from what the task keeps)", n)
			}
		}
	}
	checkRequest("failure", t.Failure.Request, true, false)
	checkPtr("failure.pointer", t.Failure.Pointer, false)
	known("failure.message", true, names(t.Failure.Message))
	checkPtr("cancel.ok", t.Cancel.OK, false)
	if t.Cancel.OK != "" && t.Cancel.URL == "" {
		bad("cancel.url", "required with cancel.ok")
	}

	if t.PollInterval < 0 {
		bad("pollInterval", "must not be negative")
	} else if t.PollInterval > 0 && t.PollInterval < 10*time.Millisecond {
		bad("pollInterval", "%v: want at least 10ms", t.PollInterval)
	}
	if t.Timeout < 0 {
		bad("timeout", "must not be negative")
	}
	switch t.Support {
	case "", mcptask.Optional, mcptask.Required, mcptask.Forbidden:
	default:
		bad("task", "%q: want optional, required or forbidden", t.Support)
	}
	if t.MaxConcurrent < 0 {
		bad("maxConcurrent", "must not be negative")
	}
	if t.MaxTTL < 0 {
		bad("maxTtl", "must not be negative")
	}
	return ps
}

func argList(args map[string]bool) string {
	if len(args) == 0 {
		return "none declared"
	}
	var ns []string
	for n := range args {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return "declared: " + strings.Join(ns, ", ")
}

// Tools are the HTTP job tools of a server: a tool source (Register,
// Health, Close), made by [New].
type Tools struct {
	given  []Tool // as given to New
	client *http.Client
	log    *slog.Logger
	tools  []*jobTool // registered
}

// New returns the HTTP job tools of tools, which Register checks and
// adds. client carries the requests (nil means http.DefaultClient); log
// receives the tools' records (nil: slog.Default()).
func New(tools []Tool, client *http.Client, log *slog.Logger) *Tools {
	if client == nil {
		client = http.DefaultClient
	}
	if log == nil {
		log = slog.Default()
	}
	return &Tools{given: tools, client: client, log: log}
}

// Close closes the idle connections of the tools' client; the tasks'
// requests end with their tasks.
func (tl *Tools) Close() error {
	tl.client.CloseIdleConnections()
	return nil
}

// Health reports the state of each tool's job API, by tool name: nil when
// the tool's last request to it was answered (with any status below 500)
// or it sent none yet, else what failed (the request's error, scrubbed of
// the tool's secrets, or "HTTP 5xx"). Requests cut by their task's
// cancellation or stop do not count. It is quick: e.g. for a gauge read at
// each scrape (metrics.CollectJobAPIs).
func (tl *Tools) Health() map[string]error {
	h := make(map[string]error, len(tl.tools))
	for _, jt := range tl.tools {
		var err error
		if p := jt.down.Load(); p != nil {
			err = *p
		}
		h[jt.Name] = err
	}
	return h
}

// Register adds the tools to ts, which must not have started yet (its
// recovery of unfinished tasks asks every tool whether it may run again).
// A tool with a problem (Check), or whose name is taken, fails the
// registration of all. Register is called once.
func (tl *Tools) Register(_ context.Context, ts *mcptask.Server) error {
	tools, client, log := tl.given, tl.client, tl.log
	var errs []error
	seen := map[string]bool{}
	for _, t := range tools {
		for _, p := range t.Check() {
			errs = append(errs, fmt.Errorf("jobapi: tool %q: %w", t.Name, p))
		}
		if ts.HasTool(t.Name) || seen[t.Name] {
			errs = append(errs, fmt.Errorf("jobapi: the tool name %q is taken", t.Name))
		}
		seen[t.Name] = true
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, t := range tools {
		jt := newJobTool(t, client, log.With("tool", t.Name), ts.TracerProvider())
		tl.tools = append(tl.tools, jt)
		schema := t.schema()
		desc := t.Description
		if desc == "" && t.Observe {
			desc = "Watches an existing job of " + t.api() + " by its ID (jobId) and follows it to its end, without starting or cancelling it."
		} else if desc == "" {
			desc = "Runs a job of " + t.api() + " and follows it to its end."
		}
		opts := mcptask.ToolOptions{
			Support: t.Support,
			// A re-run is always safe: with the job's ID it re-attaches,
			// with only the key it re-sends the start (IdempotentStart)
			// or fails "outcome unknown", and with nothing recorded no
			// start was sent.
			Rerunnable:       true,
			Reattach:         true,
			AwaitExternalRef: AwaitJobID,
			MaxConcurrent:    t.MaxConcurrent,
			Queue:            t.Queue,
			MaxTTL:           t.MaxTTL,
			Reconcile:        jt.reconcile,
			Cancel:           jt.cancelTask,
		}
		if t.Observe {
			// Observing changes nothing: no operation to reconcile (none
			// is recorded), and a cancel only ends the watching (the
			// handler's context), never reaching the job API.
			opts.Reconcile, opts.Cancel = nil, nil
		}
		if len(t.Links) > 0 {
			opts.Links = jt.links
		}
		if opts.Support == "" {
			opts.Support = mcptask.Optional
		}
		if t.Timeout > 0 {
			opts.AwaitExternalRef = min(t.Timeout, AwaitJobID)
		}
		ts.AddRawTool(&mcp.Tool{Name: t.Name, Description: desc, InputSchema: schema}, jt.handle, opts)
		log.Info("HTTP job tool added", "tool", t.Name, "api", t.api(), "task", opts.Support,
			"idempotentStart", t.IdempotentStart, "observe", t.Observe, "maxConcurrent", t.MaxConcurrent)
	}
	return nil
}

// api is the scheme and host of the tool's job API, for logs and
// descriptions: its start's, or its status request's when it has no
// start (an observe tool).
func (t Tool) api() string {
	if t.Start.URL == "" || t.Observe {
		return hostOf(t.Status.URL)
	}
	return hostOf(t.Start.URL)
}

// schema is the input schema the tool is registered with: InputSchema
// (an object with no properties when nil) and, for an observe tool, the
// required string argument jobId. InputSchema itself is not changed.
func (t Tool) schema() map[string]any {
	schema := map[string]any{"type": "object"}
	if t.InputSchema != nil {
		schema = maps.Clone(t.InputSchema)
	}
	if !t.Observe {
		return schema
	}
	props := map[string]any{}
	if p, ok := schema["properties"].(map[string]any); ok {
		props = maps.Clone(p)
	}
	if _, ok := props[jobIDName]; !ok {
		props[jobIDName] = map[string]any{"type": "string", "minLength": 1,
			"description": "The ID of the job of " + t.api() + " to watch (it is neither started nor cancelled)."}
	}
	schema["properties"] = props
	var required []any
	switch r := schema["required"].(type) {
	case []any:
		required = slices.Clone(r)
	case []string:
		for _, n := range r {
			required = append(required, n)
		}
	}
	if !slices.Contains(required, any(jobIDName)) {
		required = append(required, jobIDName)
	}
	schema["required"] = required
	return schema
}

// origin is the scheme://host[:port] part of a URL template.
func origin(u string) string {
	_, rest, _ := strings.Cut(u, "://")
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	return u[:len(u)-len(rest)+end]
}

// hostOf returns the scheme and host of a URL template, for logs.
func hostOf(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return "?"
	}
	host, _, _ := strings.Cut(rest, "/")
	if _, h, ok := strings.Cut(host, "@"); ok {
		host = h // never credentials in a URL
	}
	return scheme + "://" + host
}
