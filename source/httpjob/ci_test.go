package httpjob_test

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/mcptask/mcptask/source/httpjob"
)

// ciTool is a tool of the job service's CI API, as docs/adapters.md's
// worked example declares it: a JSON-RPC start answered with a build
// request's ID, a numeric result (null while running), the build found
// by a lookup, a plain-text log with progress lines, the failure's reason
// in the build, a JSON-RPC cancel.
func ciTool(base string) httpjob.Tool {
	tool := httpjob.Tool{
		Name: "bb_build",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"branch": map[string]any{"type": "string", "default": "main"}}},
		Start: httpjob.Start{Request: httpjob.Request{URL: base + "/ci/forceschedulers/build",
			Body: map[string]any{"jsonrpc": "2.0", "id": 1, "method": "force", "params": map[string]any{"branch": "{branch}"}}},
			JobID: "/result/0"},
		Status: httpjob.Status{Request: httpjob.Request{URL: base + "/ci/buildrequests/{jobId}"},
			State: "/buildrequests/0/results", Working: []string{""}, Completed: []string{"0"}, Failed: []string{"2"}, Cancelled: []string{"6"}},
		Result: httpjob.Result{Pointer: "/buildrequests/0"},
		Lookups: map[string]httpjob.Request{"build": {URL: base + "/ci/buildrequests/{jobId}/builds",
			Capture: map[string]string{"buildId": "/builds/0/buildid", "buildNumber": "/builds/0/number"}}},
		Log: httpjob.Log{Request: httpjob.Request{URL: base + "/ci/builds/{buildId}/steps/work/logs/stdio/raw"},
			Progress: regexp.MustCompile(`^progress (\d+/\d+)`)},
		Failure: httpjob.Failure{Request: httpjob.Request{URL: base + "/ci/builds/{buildId}"}, Pointer: "/builds/0/state_string"},
		Cancel: httpjob.Cancel{Request: httpjob.Request{URL: base + "/ci/buildrequests/{jobId}",
			Body: map[string]any{"jsonrpc": "2.0", "id": 1, "method": "cancel"}}, OK: "/result"},
		Links:        map[string]string{"build": base + "/ci/builds/{buildId}", "request": base + "/ci/buildrequests/{jobId}"},
		PollInterval: 20 * time.Millisecond,
	}
	auth := map[string]string{"Authorization": "Bearer " + token}
	for _, req := range []*httpjob.Request{&tool.Start.Request, &tool.Status.Request, &tool.Log.Request, &tool.Failure.Request, &tool.Cancel.Request} {
		req.Headers = auth
	}
	b := tool.Lookups["build"]
	b.Headers = auth
	tool.Lookups["build"] = b
	return tool
}

// ciLog appends text to the log of the CI job num.
func ciLog(t *testing.T, js *jobs, job, text string) {
	t.Helper()
	resp, err := http.Post(js.URL+"/test/jobs/"+job+"/log", "text/plain", bytes.NewReader([]byte(text)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// TestCIServer: a CI server's API, which the first adapters could not
// express, end to end on both wires: the build found by a lookup and
// captured (kept with the task), progress from its plain-text log, the
// log's lines in the task's log, the failure's reason read from the
// build, a JSON-RPC cancel confirmed by the numeric result, and a
// default argument filled in.
func TestCIServer(t *testing.T) {
	js := newJobs(t)
	s := serve(t, "", &proctest.Buffer{}, ciTool(js.URL))
	n := 0
	next := func() string { n++; return "job-" + string(rune('0'+n)) }
	for _, w := range []string{client.Wire20260728, client.Wire20251125} {
		t.Run(w, func(t *testing.T) {
			c := dial(t, s.URL, w)
			ctx := t.Context()

			// Succeeds: progress from the log, the build captured.
			call, err := c.CallTool(ctx, "bb_build", map[string]any{})
			if err != nil || call.Task == nil {
				t.Fatalf("bb_build: %+v, %v", call, err)
			}
			id, job := call.Task.ID, next()
			if js.svc.Stats().Jobs[job] == nil {
				st, _ := c.Get(ctx, id)
				t.Fatalf("no %s: %+v; task %+v", job, js.svc.Stats(), st)
			}
			if p := string(js.svc.Stats().Jobs[job].Params); !strings.Contains(p, `"branch":"main"`) {
				t.Errorf("the force request's params %s: want the default branch", p)
			}
			ciLog(t, js, job, "compiling\nprogress 1/3\npartial")
			waitStatus(t, c, id, "showing the log's progress", func(st *client.TaskStatus) bool { return st.StatusMessage == "1/3" })
			ciLog(t, js, job, " line\nprogress 3/3\n")
			waitStatus(t, c, id, "showing the log's progress", func(st *client.TaskStatus) bool { return st.StatusMessage == "3/3" })
			js.hook(t, "/test/jobs/"+job+"/finish", map[string]any{})
			res, err := c.Wait(ctx, id, nil)
			if err != nil || res.IsError || !strings.Contains(text(res), `"complete":true`) {
				t.Fatalf("the build: %q, %v", text(res), err)
			}
			st, err := c.Get(ctx, id)
			if err != nil || st.Links["build"] != js.URL+"/ci/builds/10"+job[len("job-"):] || st.Links["request"] != js.URL+"/ci/buildrequests/"+job[len("job-"):] {
				t.Errorf("the task's links: %v, %v; want its build's and its request's", st.Links, err)
			}
			log := logText(t, c, id)
			for _, want := range []string{"captured buildId = 10", "captured buildNumber = ", "compiling\n", "partial line\n", "progress 3/3\n"} {
				if !strings.Contains(log, want) {
					t.Errorf("the task's log lacks %q:\n%s", want, log)
				}
			}

			// Fails: the reason read from the build.
			call, err = c.CallTool(ctx, "bb_build", map[string]any{"branch": "broken"})
			if err != nil || call.Task == nil {
				t.Fatalf("bb_build: %+v, %v", call, err)
			}
			id, job = call.Task.ID, next()
			waitStatus(t, c, id, "the build captured", func(*client.TaskStatus) bool {
				return strings.Contains(logText(t, c, id), "captured buildId")
			})
			js.hook(t, "/test/jobs/"+job+"/fail", map[string]any{"error": "step 'work' (exit 1)"})
			res, err = c.Wait(ctx, id, nil)
			var msg string
			switch {
			case err == nil && res.IsError:
				msg = text(res)
			case err != nil:
				msg = err.Error()
			}
			if !strings.Contains(msg, "failed: failed step 'work' (exit 1)") {
				t.Errorf("the failed build: %q (%+v, %v); want the build's reason", msg, res, err)
			}

			// Cancelled: the JSON-RPC cancel, confirmed by result 6.
			call, err = c.CallTool(ctx, "bb_build", map[string]any{})
			if err != nil || call.Task == nil {
				t.Fatalf("bb_build: %+v, %v", call, err)
			}
			id, job = call.Task.ID, next()
			if _, err := c.Cancel(ctx, id); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			if st := js.svc.Stats().Jobs[job].State; st != "cancelled" {
				t.Fatalf("the build request is %s after the cancel", st)
			}
			waitStatus(t, c, id, "cancelled", func(st *client.TaskStatus) bool { return st.Status == "cancelled" })
		})
	}
}
