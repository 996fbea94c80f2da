package main

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/source/httpjob"
	"go.yaml.in/yaml/v3"
)

// HTTPJobConfig is one entry of the configuration file's httpJobs: a job
// of an HTTP job API run as a tool (see docs/adapters.md and package
// source/httpjob):
//
//	httpJobs:
//	  build:
//	    description: Builds a git ref on the CI
//	    inputSchema: {type: object, properties: {ref: {type: string}}, required: [ref]}
//	    start:
//	      method: POST
//	      url: https://ci.example.com/api/jobs
//	      headers: {Authorization: "Bearer ${CI_TOKEN}"}
//	      body: {ref: "{ref}", pipeline: build}
//	      jobId: /id
//	    status:
//	      url: https://ci.example.com/api/jobs/{jobId}
//	      headers: {Authorization: "Bearer ${CI_TOKEN}"}
//	      state: /state
//	      message: /progress
//	      error: /error/message
//	      working: [queued, running]
//	      completed: [succeeded]
//	      failed: [failed]
//	      cancelled: [cancelled]
//	    result: {pointer: /output}     # or {url: ..., headers: ..., pointer: /data}
//	    cancel: {method: POST, url: "https://ci.example.com/api/jobs/{jobId}/cancel"}
//	    # and, for APIs that need them (docs/adapters.md): a body or bodyText
//	    # on any request, capture: {name: /pointer or "re:regexp"} on any
//	    # request, lookups: {name: {url, capture}}, log: {url, lines,
//	    # progress}, failure: {url, pointer, message}, cancel.ok, links
//	    idempotentStart: true
//	    pollInterval: 5s
//	    timeout: 2h
//
// With observe: true (shadow mode, for a rollout) the tool starts
// nothing: a call names an existing job by its argument jobId and the
// task follows it; start may be left out, and neither start nor cancel is
// ever sent (see httpjob.Tool.Observe).
type HTTPJobConfig struct {
	Description string         `yaml:"description"`
	InputSchema map[string]any `yaml:"inputSchema"`
	Start       struct {
		RequestConfig `yaml:",inline"`
		JobID         string `yaml:"jobId"`
	} `yaml:"start"`
	Status struct {
		RequestConfig `yaml:",inline"`
		State         string    `yaml:"state"`
		Message       string    `yaml:"message"`
		Error         string    `yaml:"error"`
		Working       stateList `yaml:"working"`
		Completed     stateList `yaml:"completed"`
		Failed        stateList `yaml:"failed"`
		Cancelled     stateList `yaml:"cancelled"`
	} `yaml:"status"`
	Result struct {
		RequestConfig `yaml:",inline"`
		Pointer       string `yaml:"pointer"`
	} `yaml:"result"`
	Cancel struct {
		RequestConfig `yaml:",inline"`
		OK            string `yaml:"ok"`
	} `yaml:"cancel"`
	Lookups map[string]RequestConfig `yaml:"lookups"`
	Log     struct {
		RequestConfig `yaml:",inline"`
		Lines         string `yaml:"lines"`
		Progress      string `yaml:"progress"`
	} `yaml:"log"`
	Failure struct {
		RequestConfig `yaml:",inline"`
		Pointer       string `yaml:"pointer"`
		Message       string `yaml:"message"`
	} `yaml:"failure"`
	// Links are URL templates of {jobId} and captured values, shown
	// with the task (tasks/get, mcptask status, the dashboard).
	Links map[string]string `yaml:"links"`
	// IdempotentStart declares that the job API honours Idempotency-Key:
	// a start interrupted by a crash is sent again with the same key.
	IdempotentStart bool `yaml:"idempotentStart"`
	// Observe puts the tool in observe (shadow) mode: it watches the job
	// whose ID is its argument jobId, never sending a start or a cancel
	// request (start is then optional).
	Observe       bool     `yaml:"observe"`
	PollInterval  Duration `yaml:"pollInterval"`
	Timeout       Duration `yaml:"timeout"`
	Task          string   `yaml:"task"`
	MaxConcurrent int      `yaml:"maxConcurrent"`
	MaxTTL        Duration `yaml:"maxTtl"`

	secrets  []string       // the values of its ${...} references
	progress *regexp.Regexp // log.progress, compiled by validateHTTPJobs
}

// lookups returns the httpjob lookups of the entry.
func (hc *HTTPJobConfig) lookups() map[string]httpjob.Request {
	if len(hc.Lookups) == 0 {
		return nil
	}
	out := make(map[string]httpjob.Request, len(hc.Lookups))
	for name, rc := range hc.Lookups {
		out[name] = rc.request()
	}
	return out
}

// tool returns the httpjob tool of the entry name.
func (hc *HTTPJobConfig) tool(name string) httpjob.Tool {
	return httpjob.Tool{
		Name: name, Description: hc.Description, InputSchema: hc.InputSchema,
		Start: httpjob.Start{Request: hc.Start.request(), JobID: hc.Start.JobID},
		Status: httpjob.Status{Request: hc.Status.request(), State: hc.Status.State, Message: hc.Status.Message, Error: hc.Status.Error,
			Working: hc.Status.Working, Completed: hc.Status.Completed, Failed: hc.Status.Failed, Cancelled: hc.Status.Cancelled},
		Result:          httpjob.Result{Request: hc.Result.request(), Pointer: hc.Result.Pointer},
		Cancel:          httpjob.Cancel{Request: hc.Cancel.request(), OK: hc.Cancel.OK},
		Lookups:         hc.lookups(),
		Links:           hc.Links,
		Log:             httpjob.Log{Request: hc.Log.request(), Lines: hc.Log.Lines, Progress: hc.progress},
		Failure:         httpjob.Failure{Request: hc.Failure.request(), Pointer: hc.Failure.Pointer, Message: hc.Failure.Message},
		PollInterval:    time.Duration(hc.PollInterval),
		Timeout:         time.Duration(hc.Timeout),
		IdempotentStart: hc.IdempotentStart,
		Observe:         hc.Observe,
		Support:         mcptask.TaskSupport(hc.Task),
		MaxConcurrent:   hc.MaxConcurrent,
		MaxTTL:          time.Duration(hc.MaxTTL),
		Secrets:         hc.secrets,
	}
}

// stateList is a list of job states: strings, numbers (as their text) and
// null, the state of a job whose state is null (e.g. the result of a job
// not complete yet), read as "".
type stateList []string

// UnmarshalYAML reads a sequence of scalars, null included (a []string
// would drop it).
func (l *stateList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return fmt.Errorf("line %d: want a list of states, such as [queued, running]", n.Line)
	}
	out := make(stateList, 0, len(n.Content))
	for _, e := range n.Content {
		switch {
		case e.Kind != yaml.ScalarNode:
			return fmt.Errorf("line %d: a state is a string, a number or null", e.Line)
		case e.Tag == "!!null":
			out = append(out, "")
		default:
			out = append(out, e.Value)
		}
	}
	*l = out
	return nil
}

// RequestConfig is a request of an httpJobs entry: start, status, result
// and cancel each take one (see httpjob.Request).
type RequestConfig struct {
	Method   string            `yaml:"method"`
	URL      string            `yaml:"url"`
	Headers  map[string]string `yaml:"headers"`
	Body     any               `yaml:"body"`     // a JSON body template
	BodyText string            `yaml:"bodyText"` // a text body template
	// Capture names values to keep from the answer: a JSON pointer, or
	// "re:" and a regular expression.
	Capture map[string]string `yaml:"capture"`
}

// request returns the httpjob request of rc.
func (rc RequestConfig) request() httpjob.Request {
	return httpjob.Request{Method: strings.ToUpper(rc.Method), URL: rc.URL, Headers: rc.Headers,
		Body: jsonBody(rc.Body), BodyText: rc.BodyText, Capture: rc.Capture}
}

// jsonBody returns a body template decoded from YAML as JSON values:
// maps with string keys (YAML may give other keys).
func jsonBody(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = jsonBody(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[fmt.Sprint(k)] = jsonBody(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = jsonBody(e)
		}
		return out
	}
	return v
}

// validateHTTPJobs checks the httpJobs section, expanding its ${NAME} and
// ${file:PATH} references (see expand); each error starts with its line
// (see FileConfig.line).
func (fc *FileConfig) validateHTTPJobs(getenv func(string) string) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(fc.HTTPJobs)) {
		hc := fc.HTTPJobs[name]
		bad := func(field, msg string) {
			path := []string{"httpJobs", name}
			if field != "" {
				path = append(path, strings.Split(field, ".")...)
			}
			errs = append(errs, fmt.Errorf("%d: %s: %s", fc.line(path...), strings.Join(path, "."), msg))
		}
		if _, ok := fc.Commands[name]; ok {
			bad("", "the name is also a command's (commands."+name+"): tool names must differ")
		}
		if hc.Log.Progress != "" {
			re, err := regexp.Compile(hc.Log.Progress)
			if err != nil {
				bad("log.progress", fmt.Sprintf("%q is not a regular expression: %v", hc.Log.Progress, err))
			}
			hc.progress = re
		}
		headers := []struct {
			field string
			m     map[string]string
		}{{"start.headers", hc.Start.Headers}, {"status.headers", hc.Status.Headers}, {"result.headers", hc.Result.Headers},
			{"cancel.headers", hc.Cancel.Headers}, {"log.headers", hc.Log.Headers}, {"failure.headers", hc.Failure.Headers}}
		for _, name := range slices.Sorted(maps.Keys(hc.Lookups)) {
			headers = append(headers, struct {
				field string
				m     map[string]string
			}{"lookups." + name + ".headers", hc.Lookups[name].Headers})
		}
		for _, h := range headers {
			for _, k := range slices.Sorted(maps.Keys(h.m)) {
				v := h.m[k]
				val, problems := expand(v, getenv)
				for _, p := range problems {
					bad(h.field+"."+k, p)
				}
				if val != v {
					// The values of ${...}: never shown, even if the job
					// API echoes them.
					for _, ref := range envRef.FindAllString(v, -1) {
						if sec, _ := expand(ref, getenv); sec != "" {
							hc.secrets = append(hc.secrets, sec)
						}
					}
				}
				h.m[k] = val
			}
		}
		for _, p := range hc.tool(name).Check() {
			bad(p.Field, p.Message)
		}
		fc.HTTPJobs[name] = hc
	}
	return errs
}

// httpJobTools returns the HTTP job tools of fc, in name order.
func (fc *FileConfig) httpJobTools() []httpjob.Tool {
	if fc == nil {
		return nil
	}
	var tools []httpjob.Tool
	for _, name := range slices.Sorted(maps.Keys(fc.HTTPJobs)) {
		hc := fc.HTTPJobs[name]
		tools = append(tools, hc.tool(name))
	}
	return tools
}
