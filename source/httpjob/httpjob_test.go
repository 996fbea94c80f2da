package httpjob_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/jobservice"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/source/httpjob"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const token = "tok-9f8e7d6c5b4a-secret"

// buildTool is a tool of the job service at base: its result from a
// result request, or inline (the status answer's /output).
func buildTool(base string, inline bool) httpjob.Tool {
	auth := map[string]string{"Authorization": "Bearer " + token}
	t := httpjob.Tool{
		Name: "build",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"ref": map[string]any{"type": "string"}, "count": map[string]any{"type": "integer"},
			"reject": map[string]any{"type": "string"}}},
		Start:           httpjob.Start{Request: httpjob.Request{URL: base + "/jobs", Headers: auth, Body: map[string]any{"ref": "{ref}", "count": "{count}", "note": "build of {ref}", "reject": "{reject}"}}, JobID: "/id"},
		Status:          httpjob.Status{Request: httpjob.Request{URL: base + "/jobs/{jobId}", Headers: auth}, State: "/state", Message: "/progress", Error: "/error/message", Working: []string{"running"}, Completed: []string{"succeeded"}, Failed: []string{"failed"}, Cancelled: []string{"cancelled"}},
		Result:          httpjob.Result{Request: httpjob.Request{URL: base + "/jobs/{jobId}/result", Headers: auth}, Pointer: "/data"},
		Cancel:          httpjob.Cancel{Request: httpjob.Request{URL: base + "/jobs/{jobId}/cancel", Headers: auth}},
		PollInterval:    20 * time.Millisecond,
		IdempotentStart: true,
		Support:         mcptask.Optional,
	}
	if inline {
		t.Result = httpjob.Result{Pointer: "/output"}
	}
	return t
}

// jobs is the job service on loopback HTTP, in process.
type jobs struct {
	svc *jobservice.Service
	URL string
}

func newJobs(t *testing.T) *jobs {
	svc, err := jobservice.Open(filepath.Join(t.TempDir(), "jobs.json"), token)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(svc.Handler())
	t.Cleanup(hs.Close)
	return &jobs{svc: svc, URL: hs.URL}
}

// hook calls a test hook of the job service.
func (j *jobs) hook(t *testing.T, path string, body any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(j.URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("%s: HTTP %d", path, resp.StatusCode)
	}
}

// jobOf waits until the job service has the job of task id, and returns
// its ID.
func (j *jobs) jobOf(t *testing.T, id string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if job := j.svc.Stats().JobOf(httpjob.KeyPrefix + id); job != "" {
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job service never saw the start of task %s", id)
		}
		time.Sleep(5 * time.Millisecond) // polling the service, not timing the test
	}
}

// serve starts an mcptask server on the SQLite file db with the tools.
func serve(t *testing.T, db string, logs *proctest.Buffer, tools ...httpjob.Tool) *servertest.Server {
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return servertest.Start(t, servertest.Options{
		DB: db, Logger: log,
		Engine: engine.Options{Policy: task.Policy{PollInterval: 20 * time.Millisecond}},
		Register: func(ts *mcptask.Server) (func(), error) {
			return nil, httpjob.New(tools, &http.Client{}, log).Register(t.Context(), ts)
		},
	})
}

func dial(t *testing.T, url, wire string) *client.Client {
	c, err := client.Dial(t.Context(), url+"/mcp", &client.Options{ProtocolVersion: wire})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func start(t *testing.T, c *client.Client, args map[string]any) string {
	t.Helper()
	call, err := c.CallTool(t.Context(), "build", args)
	if err != nil || call.Task == nil {
		t.Fatalf("build: %+v, %v; want a task", call, err)
	}
	return call.Task.ID
}

func waitStatus(t *testing.T, c *client.Client, id, what string, cond func(*client.TaskStatus) bool) *client.TaskStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.Get(t.Context(), id)
		if err == nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) || (err == nil && st.Terminal()) {
			t.Fatalf("task %s: never %s (last %+v, %v)", id, what, st, err)
		}
		time.Sleep(5 * time.Millisecond) // polling the task, not timing the test
	}
}

func text(r *mcp.CallToolResult) string {
	if r == nil || len(r.Content) == 0 {
		return ""
	}
	if tc, ok := r.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// TestJobs: jobs of the job service through both wires: completed (with
// a result request, and inline), failed, cancelled, refused at start,
// and a status that maps to nothing; the token never shows.
func TestJobs(t *testing.T) {
	js := newJobs(t)
	logs := &proctest.Buffer{}
	inline := buildTool(js.URL, true)
	inline.Name = "build_inline"
	s := serve(t, "", logs, buildTool(js.URL, false), inline)
	for _, wire := range []string{client.Wire20260728, client.Wire20251125} {
		t.Run(wire, func(t *testing.T) {
			c := dial(t, s.URL, wire)
			ctx := t.Context()
			var messages []string

			// Completed, through a result request.
			id := start(t, c, map[string]any{"ref": "main/v1 x", "count": 3})
			job := js.jobOf(t, id)
			js.hook(t, "/test/jobs/"+job+"/progress", map[string]any{"progress": "compiling 2 of 3"})
			st := waitStatus(t, c, id, "showing the job's progress", func(st *client.TaskStatus) bool { return st.StatusMessage == "compiling 2 of 3" })
			messages = append(messages, st.StatusMessage)
			js.hook(t, "/test/jobs/"+job+"/finish", map[string]any{"artifact": "main.tgz"})
			res, err := c.Wait(ctx, id, nil)
			if err != nil || res.IsError || text(res) != `{"artifact":"main.tgz"}` {
				t.Fatalf("completed job: %q (isError %v), %v", text(res), res != nil && res.IsError, err)
			}
			stats := js.svc.Stats()
			var params map[string]any
			_ = json.Unmarshal(stats.Jobs[job].Params, &params)
			if params["ref"] != "main/v1 x" || params["count"] != float64(3) || params["note"] != "build of main/v1 x" || params["reject"] != nil {
				t.Errorf("the start's body: %v; want the arguments filled in", params)
			}

			// Completed, inline.
			call, err := c.CallTool(ctx, "build_inline", map[string]any{"ref": "dev"})
			if err != nil || call.Task == nil {
				t.Fatalf("build_inline: %+v, %v", call, err)
			}
			js.hook(t, "/test/jobs/"+js.jobOf(t, call.Task.ID)+"/finish", "all good")
			if res, err := c.Wait(ctx, call.Task.ID, nil); err != nil || text(res) != "all good" {
				t.Fatalf("inline result: %q, %v", text(res), err)
			}

			// Failed: the job system's error, as an isError result.
			id = start(t, c, map[string]any{"ref": "broken"})
			js.hook(t, "/test/jobs/"+js.jobOf(t, id)+"/fail", map[string]any{"error": "3 tests failed (auth " + token + ")"})
			res, err = c.Wait(ctx, id, nil)
			var te *client.TaskError
			switch {
			case err == nil && res.IsError:
				messages = append(messages, text(res))
			case errors.As(err, &te):
				messages = append(messages, te.Message)
			default:
				t.Fatalf("failed job: %+v, %v; want an isError result", res, err)
			}
			if m := messages[len(messages)-1]; !strings.Contains(m, "failed: 3 tests failed") {
				t.Errorf("failed job's error: %q", m)
			}

			// Cancelled: the cancel reaches the job.
			id = start(t, c, map[string]any{"ref": "long"})
			job = js.jobOf(t, id)
			cancels := js.svc.Stats().Cancels
			if _, err := c.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, c, id, "cancelled", func(st *client.TaskStatus) bool { return st.Status == "cancelled" })
			deadline := time.Now().Add(30 * time.Second)
			for js.svc.Stats().Jobs[job].State != "cancelled" {
				if time.Now().After(deadline) {
					t.Fatalf("the job was not cancelled: %+v (cancels %d before)", js.svc.Stats().Jobs[job], cancels)
				}
				time.Sleep(5 * time.Millisecond) // polling the service, not timing the test
			}

			// Refused at start (4xx): the job system's error.
			id = start(t, c, map[string]any{"ref": "x", "reject": "quota exceeded for x"})
			_, err = c.Wait(ctx, id, nil)
			if !errors.As(err, &te) || !strings.Contains(te.Message, "HTTP 422: quota exceeded for x") {
				t.Fatalf("refused start: %v; want the job system's error", err)
			}
			messages = append(messages, te.Message)

			// A state in no list: the task fails loudly, with the answer.
			id = start(t, c, map[string]any{"ref": "odd"})
			js.hook(t, "/test/jobs/"+js.jobOf(t, id)+"/state", map[string]any{"state": "exploded"})
			_, err = c.Wait(ctx, id, nil)
			if !errors.As(err, &te) || !strings.Contains(te.Message, `"exploded"`) || !strings.Contains(te.Message, `the answer begins: {"id":"job-`) {
				t.Fatalf("unmapped state: %v; want a failure naming the state and showing the answer", err)
			}
			messages = append(messages, te.Message)
			if !strings.Contains(logs.String(), "the job API's answer matches no mapping") {
				t.Errorf("the unmapped state was not logged")
			}
			for _, m := range append(messages, logs.String()) {
				if strings.Contains(m, token) {
					t.Fatalf("the token shows: %s", m)
				}
			}
		})
	}
}

// TestRestartReattach: a server stopped at once (as a crash stops it)
// with a job running; the next server on the same file re-attaches to
// the job, which the job service started once, and the task ends with the
// job's result.
func TestRestartReattach(t *testing.T) {
	js := newJobs(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	logs := &proctest.Buffer{}
	s1 := serve(t, db, logs, buildTool(js.URL, false))
	c1 := dial(t, s1.URL, client.Wire20260728)
	id := start(t, c1, map[string]any{"ref": "main"})
	job := js.jobOf(t, id)
	now, stop := context.WithCancel(context.Background())
	stop()
	s1.Close(now)

	s2 := serve(t, db, logs, buildTool(js.URL, false))
	c2 := dial(t, s2.URL, client.Wire20251125)
	waitStatus(t, c2, id, "re-attached", func(st *client.TaskStatus) bool {
		return strings.HasPrefix(st.StatusMessage, "re-attached to job "+job)
	})
	js.hook(t, "/test/jobs/"+job+"/finish", map[string]any{"artifact": "main.tgz"})
	res, err := c2.Wait(t.Context(), id, nil)
	if err != nil || text(res) != `{"artifact":"main.tgz"}` {
		t.Fatalf("after the restart: %q, %v", text(res), err)
	}
	if st := js.svc.Stats(); st.Created != 1 || st.StartRequests != 1 {
		t.Errorf("the job service created %d jobs from %d start requests, want 1 and 1", st.Created, st.StartRequests)
	}
}

// TestTimeout: a job still running at the tool's timeout is cancelled,
// and the task fails saying so.
func TestTimeout(t *testing.T) {
	js := newJobs(t)
	tool := buildTool(js.URL, false)
	tool.Timeout = 300 * time.Millisecond
	s := serve(t, "", &proctest.Buffer{}, tool)
	c := dial(t, s.URL, client.Wire20260728)
	id := start(t, c, map[string]any{"ref": "slow"})
	job := js.jobOf(t, id)
	_, err := c.Wait(t.Context(), id, nil)
	var te *client.TaskError
	if !errors.As(err, &te) || !strings.Contains(te.Message, "build timed out after 300ms") || !strings.Contains(te.Message, "was sent a cancel request") {
		t.Fatalf("timed out: %v", err)
	}
	if st := js.svc.Stats(); st.Jobs[job].State != "cancelled" {
		t.Errorf("the job after the timeout: %+v", st.Jobs[job])
	}
}

// TestCheck: the problems of a tool, each naming its field.
func TestCheck(t *testing.T) {
	good := buildTool("http://127.0.0.1:1", false)
	if ps := good.Check(); len(ps) != 0 {
		t.Fatalf("a good tool: %v", ps)
	}
	for _, c := range []struct {
		field, want string
		edit        func(*httpjob.Tool)
	}{
		{"start.jobId", "not a JSON pointer", func(t *httpjob.Tool) { t.Start.JobID = "id" }},
		{"status.state", "'~' must be followed by 0 or 1", func(t *httpjob.Tool) { t.Status.State = "/a~2" }},
		{"start.url", "{branch} names no argument", func(t *httpjob.Tool) { t.Start.URL += "?b={branch}" }},
		{"start.body", "{jobId} is not known yet", func(t *httpjob.Tool) { t.Start.Body = map[string]any{"x": "{jobId}"} }},
		{"status.url", "want {jobId}", func(t *httpjob.Tool) { t.Status.URL = "http://x/jobs" }},
		{"status.completed", "terminal state", func(t *httpjob.Tool) { t.Status.Completed = nil }},
		{"status.failed", `"running" is also in status.working`, func(t *httpjob.Tool) { t.Status.Failed = []string{"running"} }},
		{"cancel.url", "http:// or https://", func(t *httpjob.Tool) { t.Cancel.URL = "ftp://x/{jobId}" }},
		{"start.headers", "Idempotency-Key is set by mcptask", func(t *httpjob.Tool) { t.Start.Headers = map[string]string{"idempotency-key": "k"} }},
		{"task", "want optional", func(t *httpjob.Tool) { t.Support = "sometimes" }},
		{"start.url", "an argument never chooses where", func(t *httpjob.Tool) { t.Start.URL = "http://{ref}.example.com/jobs" }},
		{"status.url", "an argument never chooses where", func(t *httpjob.Tool) { t.Status.URL = "http://127.0.0.1:{ref}/jobs/{jobId}" }},
	} {
		tool := good
		tool.Start.Headers = map[string]string{}
		c.edit(&tool)
		ps := tool.Check()
		found := false
		for _, p := range ps {
			found = found || (p.Field == c.field && strings.Contains(p.Message, c.want))
		}
		if !found {
			t.Errorf("%s: problems %v; want one containing %q", c.field, ps, c.want)
		}
	}
}

func ExampleTool_Check() {
	t := httpjob.Tool{Name: "deploy",
		Start:  httpjob.Start{Request: httpjob.Request{URL: "https://jobs.example.com/deploy/{service}"}, JobID: "/id"},
		Status: httpjob.Status{Request: httpjob.Request{URL: "https://jobs.example.com/jobs/{jobId}"}, State: "state", Working: []string{"running"}, Completed: []string{"done"}}}
	for _, p := range t.Check() {
		fmt.Println(p)
	}
	// Output:
	// start.url: {service} names no argument of inputSchema.properties (none declared)
	// status.state: "state" is not a JSON pointer: it must be empty or start with '/' (e.g. /data/id)
}

// TestJobOnLedger: a job tool records its job on the operation ledger,
// the job's ID as the receipt, confirmed when the job completed, across a
// restart that re-attaches to the job; tasks/get shows it apart from the
// task's status.
func TestJobOnLedger(t *testing.T) {
	js := newJobs(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	logs := &proctest.Buffer{}
	s1 := serve(t, db, logs, buildTool(js.URL, false))
	c1 := dial(t, s1.URL, client.Wire20260728)
	id := start(t, c1, map[string]any{"ref": "main"})
	job := js.jobOf(t, id)
	raw := func(url string) wire.Operation { return operationOf(t, url, id) }
	deadline := time.Now().Add(30 * time.Second)
	for op := raw(s1.URL); op.State != "submitted" || op.Receipt != job; op = raw(s1.URL) {
		if time.Now().After(deadline) {
			t.Fatalf("operation while the job runs: %+v, want submitted with receipt %s", op, job)
		}
		time.Sleep(5 * time.Millisecond) // polling the task, not timing the test
	}
	now, stop := context.WithCancel(context.Background())
	stop()
	s1.Close(now)

	s2 := serve(t, db, logs, buildTool(js.URL, false))
	c2 := dial(t, s2.URL, client.Wire20260728)
	waitStatus(t, c2, id, "re-attached", func(st *client.TaskStatus) bool {
		return strings.HasPrefix(st.StatusMessage, "re-attached to job "+job)
	})
	js.hook(t, "/test/jobs/"+job+"/finish", map[string]any{"artifact": "main.tgz"})
	if _, err := c2.Wait(t.Context(), id, nil); err != nil {
		t.Fatal(err)
	}
	if op := raw(s2.URL); op.State != "confirmed" || op.Receipt != job {
		t.Errorf("operation after the job completed: %+v", op)
	}

	// The create's answer, which waited for the job's ID, shows the
	// submitted operation already (2026-07-28).
	var created struct {
		TaskID string                     `json:"taskId"`
		Meta   map[string]json.RawMessage `json:"_meta"`
	}
	wc := &wiretest.Client{URL: s2.URL + "/mcp", Tasks: true}
	if err := wc.Result(t.Context(), "tools/call", map[string]any{"name": "build", "arguments": map[string]any{"ref": "next"}}, &created); err != nil {
		t.Fatal(err)
	}
	var op wire.Operation
	if err := json.Unmarshal(created.Meta[wire.MetaOperation], &op); err != nil || op.State != "submitted" || op.Receipt != js.jobOf(t, created.TaskID) {
		t.Errorf("operation on the create's answer: %+v, %v (_meta %v)", op, err, created.Meta)
	}
}
