package httpjob_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/source/httpjob"
	"github.com/mcptask/mcptask/task"
)

// shadowJob is a job of shadowAPI.
type shadowJob struct {
	State    string `json:"state"`
	Progress string `json:"progress,omitempty"`
	Error    string `json:"error,omitempty"`
	Output   any    `json:"output,omitempty"`
}

// shadowAPI is a job API on loopback HTTP whose jobs were started by
// someone else (the test sets them): it counts every request it gets,
// the starts and cancels an observe tool must never send among them.
type shadowAPI struct {
	URL string
	mu  sync.Mutex
	// jobs by ID; requests counts all requests, posts those of method
	// POST, starts those to the start URL (/jobs), cancels those to a
	// cancel URL (/jobs/ID/cancel).
	jobs                             map[string]shadowJob
	requests, posts, starts, cancels int
	statusPolls                      map[string]int
}

func newShadowAPI(t *testing.T) *shadowAPI {
	a := &shadowAPI{jobs: map[string]shadowJob{}, statusPolls: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		j, ok := a.jobs[r.PathValue("id")]
		a.statusPolls[r.PathValue("id")]++
		a.mu.Unlock()
		if !ok {
			// A job API that echoes the request's credentials.
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "no job " + r.PathValue("id") + " for " + r.Header.Get("Authorization")}})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"id": r.PathValue("id"), "state": j.State, "progress": j.Progress,
			"error": map[string]any{"message": j.Error}})
	})
	mux.HandleFunc("GET /jobs/{id}/result", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		j := a.jobs[r.PathValue("id")]
		a.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"data": j.Output})
	})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.requests++
		if r.Method == http.MethodPost {
			a.posts++
		}
		if strings.TrimSuffix(r.URL.Path, "/") == "/jobs" {
			a.starts++
		}
		if strings.HasSuffix(r.URL.Path, "/cancel") {
			a.cancels++
		}
		a.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	a.URL = hs.URL
	return a
}

// set sets job id as the job system has it now.
func (a *shadowAPI) set(id string, j shadowJob) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.jobs[id] = j
}

// job returns job id as the job system has it now.
func (a *shadowAPI) job(id string) shadowJob {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.jobs[id]
}

// counts returns the counters: all requests, POSTs, starts, cancels.
func (a *shadowAPI) counts() (requests, posts, starts, cancels int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests, a.posts, a.starts, a.cancels
}

// polls returns how many status requests job id got.
func (a *shadowAPI) polls(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.statusPolls[id]
}

// noChange fails the test if the API got a start, a cancel or any POST.
func (a *shadowAPI) noChange(t *testing.T) {
	t.Helper()
	if _, posts, starts, cancels := a.counts(); posts != 0 || starts != 0 || cancels != 0 {
		t.Fatalf("the job API got %d POSTs, %d start and %d cancel requests; want none: observing never changes a job", posts, starts, cancels)
	}
}

// shadowTool is a tool in observe mode of the API at base, with a start
// and a cancel configured (as for the day it leaves observe mode) that
// it must never send.
func shadowTool(base string) httpjob.Tool {
	auth := map[string]string{"Authorization": "Bearer " + token}
	return httpjob.Tool{
		Name:        "shadow",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"ref": map[string]any{"type": "string"}}},
		Start:       httpjob.Start{Request: httpjob.Request{URL: base + "/jobs", Headers: auth, Body: map[string]any{"ref": "{ref}"}}, JobID: "/id"},
		Status: httpjob.Status{Request: httpjob.Request{URL: base + "/jobs/{jobId}", Headers: auth}, State: "/state", Message: "/progress",
			Error: "/error/message", Working: []string{"queued", "running"}, Completed: []string{"succeeded"}, Failed: []string{"failed"},
			Cancelled: []string{"cancelled"}},
		Result:       httpjob.Result{Request: httpjob.Request{URL: base + "/jobs/{jobId}/result", Headers: auth}, Pointer: "/data"},
		Cancel:       httpjob.Cancel{Request: httpjob.Request{URL: base + "/jobs/{jobId}/cancel", Headers: auth}},
		PollInterval: 20 * time.Millisecond,
		Observe:      true,
		Support:      mcptask.Optional,
	}
}

// serveTools starts an mcptask server on the SQLite file db (a temporary
// one for "") with tl's tools.
func serveTools(t *testing.T, db string, logs *proctest.Buffer, tl func(*slog.Logger) *httpjob.Tools) *servertest.Server {
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return servertest.Start(t, servertest.Options{
		DB: db, Logger: log,
		Engine: engine.Options{Policy: task.Policy{PollInterval: 20 * time.Millisecond}},
		Register: func(ts *mcptask.Server) (func(), error) {
			return nil, tl(log).Register(t.Context(), ts)
		},
	})
}

// observeCall calls the shadow tool on job and returns its task's ID.
func observeCall(t *testing.T, c *client.Client, job string) string {
	t.Helper()
	call, err := c.CallTool(t.Context(), "shadow", map[string]any{"jobId": job})
	if err != nil || call.Task == nil {
		t.Fatalf("shadow %s: %+v, %v; want a task", job, call, err)
	}
	return call.Task.ID
}

// TestObserveFollowsJob: an observe tool called with a job's ID follows
// it (through a restart that re-attaches to it) from working, with its
// progress message, to completed, with its result; it sent no start, no
// cancel, no POST at all, and recorded no operation; tools/list shows
// jobId required. Both wires.
func TestObserveFollowsJob(t *testing.T) {
	api := newShadowAPI(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	logs := &proctest.Buffer{}
	tools := func(log *slog.Logger) *httpjob.Tools {
		return httpjob.New([]httpjob.Tool{shadowTool(api.URL)}, &http.Client{}, log)
	}
	s1 := serveTools(t, db, logs, tools)
	for _, w := range []string{client.Wire20260728, client.Wire20251125} {
		t.Run(w, func(t *testing.T) {
			c := dial(t, s1.URL, w)
			job := "J-" + strings.ReplaceAll(w, "-", "")
			api.set(job, shadowJob{State: "queued"})
			id := observeCall(t, c, job)
			waitStatus(t, c, id, "observing", func(st *client.TaskStatus) bool { return st.Status == "working" && api.polls(job) > 0 })
			api.set(job, shadowJob{State: "running", Progress: "compiling 2 of 3"})
			st := waitStatus(t, c, id, "showing the job's progress", func(st *client.TaskStatus) bool { return st.StatusMessage == "compiling 2 of 3" })
			if st.Operation != nil {
				t.Errorf("an observe tool's task shows an operation: %+v; it starts nothing", st.Operation)
			}
			api.set(job, shadowJob{State: "succeeded", Output: map[string]any{"artifact": "main.tgz"}})
			res, err := c.Wait(t.Context(), id, nil)
			if err != nil || res.IsError || text(res) != `{"artifact":"main.tgz"}` {
				t.Fatalf("the observed job completed: %q (isError %v), %v", text(res), res != nil && res.IsError, err)
			}
			if st, err := c.Get(t.Context(), id); err != nil || st.Status != "completed" {
				t.Fatalf("the task: %+v, %v", st, err)
			}
			if l := logText(t, c, id); !strings.Contains(l, "observing job "+job) {
				t.Errorf("the task's log:\n%s", l)
			}
			api.noChange(t)
		})
	}

	c := dial(t, s1.URL, client.Wire20260728)
	list, err := c.Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(tl client.Tool) bool { return tl.Name == "shadow" })
	b, _ := json.Marshal(list[i].InputSchema)
	var schema struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(b, &schema); err != nil || schema.Properties["jobId"].Type != "string" || schema.Properties["ref"].Type != "string" ||
		!slices.Contains(schema.Required, "jobId") {
		t.Errorf("the observe tool's input schema: %s; want ref kept and jobId a required string", b)
	}

	// A server stopped at once (as a crash stops it) while a task
	// observes a job: the next one re-attaches to the recorded job.
	api.set("J-restart", shadowJob{State: "running", Progress: "half way"})
	id := observeCall(t, c, "J-restart")
	waitStatus(t, c, id, "showing the job's progress", func(st *client.TaskStatus) bool { return st.StatusMessage == "half way" })
	now, stop := context.WithCancel(context.Background())
	stop()
	s1.Close(now)
	s2 := serveTools(t, db, logs, tools)
	c2 := dial(t, s2.URL, client.Wire20251125)
	waitStatus(t, c2, id, "re-attached", func(st *client.TaskStatus) bool {
		return strings.HasPrefix(st.StatusMessage, "re-attached to job J-restart")
	})
	api.set("J-restart", shadowJob{State: "succeeded", Output: "done"})
	if res, err := c2.Wait(t.Context(), id, nil); err != nil || text(res) != "done" {
		t.Fatalf("after the restart: %q, %v", text(res), err)
	}
	api.noChange(t)
	if strings.Contains(logs.String(), token) {
		t.Errorf("the token shows in the logs")
	}
}

// TestObserveFailedJob: a failed job observed gives the task's isError
// result (outcome tool_error), with the job's error (its echo of the token scrubbed).
func TestObserveFailedJob(t *testing.T) {
	api := newShadowAPI(t)
	s := serve(t, "", &proctest.Buffer{}, shadowTool(api.URL))
	c := dial(t, s.URL, client.Wire20260728)
	api.set("J-bad", shadowJob{State: "running"})
	id := observeCall(t, c, "J-bad")
	waitStatus(t, c, id, "observing", func(st *client.TaskStatus) bool { return api.polls("J-bad") > 0 })
	api.set("J-bad", shadowJob{State: "failed", Error: "3 tests failed (auth " + token + ")"})
	res, err := c.Wait(t.Context(), id, nil)
	msg := ""
	var te *client.TaskError
	switch {
	case err == nil && res.IsError:
		msg = text(res)
	case errors.As(err, &te):
		msg = te.Message
	default:
		t.Fatalf("the observed job failed: %+v, %v; want an isError result", res, err)
	}
	if !strings.Contains(msg, "job J-bad failed: 3 tests failed") || strings.Contains(msg, token) {
		t.Errorf("the failed job's error: %q", msg)
	}
	// An isError result: the task ends with the tool's error.
	st, err := c.Get(t.Context(), id)
	if err != nil || st.Outcome != "tool_error" {
		t.Errorf("the task of the failed job: %+v, %v; want the outcome tool_error", st, err)
	}
	api.noChange(t)
}

// TestObserveCancel: a cancel of an observing task ends the task
// cancelled and stops the watching, without sending the cancel request:
// the job runs on.
func TestObserveCancel(t *testing.T) {
	api := newShadowAPI(t)
	s := serve(t, "", &proctest.Buffer{}, shadowTool(api.URL))
	for _, w := range []string{client.Wire20260728, client.Wire20251125} {
		t.Run(w, func(t *testing.T) {
			c := dial(t, s.URL, w)
			job := "J-long-" + strings.ReplaceAll(w, "-", "")
			api.set(job, shadowJob{State: "running", Progress: "working hard"})
			id := observeCall(t, c, job)
			waitStatus(t, c, id, "showing the job's progress", func(st *client.TaskStatus) bool { return st.StatusMessage == "working hard" })
			if _, err := c.Cancel(t.Context(), id); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			waitStatus(t, c, id, "cancelled", func(st *client.TaskStatus) bool { return st.Status == "cancelled" })
			// The watching stopped: the log says so once the handler
			// returned, and the polls no longer grow after that.
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(logText(t, c, id), "stopped observing job "+job) {
				if time.Now().After(deadline) {
					t.Fatalf("the task's log never said the watching stopped:\n%s", logText(t, c, id))
				}
				time.Sleep(5 * time.Millisecond) // polling the log, not timing the test
			}
			api.noChange(t)
			if j := api.job(job); j.State != "running" {
				t.Errorf("the job after the task's cancel: %+v; want it left running", j)
			}
		})
	}
}

// TestObserveNoJobID: a call without a usable jobId is refused and sends
// nothing.
func TestObserveNoJobID(t *testing.T) {
	api := newShadowAPI(t)
	s := serve(t, "", &proctest.Buffer{}, shadowTool(api.URL))
	c := dial(t, s.URL, client.Wire20260728)
	for _, args := range []map[string]any{{}, {"ref": "main"}, {"jobId": ""}, {"jobId": 42}, {"jobId": ".."}, {"jobId": "."}, {"jobId": "  "}} {
		call, err := c.CallTool(t.Context(), "shadow", args)
		msg := ""
		var te *client.TaskError
		switch {
		case err != nil:
			msg = err.Error() // refused at the call (the input schema)
		case call.Task != nil:
			_, err = c.Wait(t.Context(), call.Task.ID, nil)
			if !errors.As(err, &te) {
				t.Fatalf("%v: the task ended %v; want it failed", args, err)
			}
			msg = te.Message
		case call.Result != nil && call.Result.IsError:
			msg = text(call.Result)
		default:
			t.Fatalf("%v: %+v; want the call refused", args, call)
		}
		t.Logf("%v: %s", args, msg)
		if !strings.Contains(msg, "jobId") {
			t.Errorf("%v: refused with %q; want it to name jobId", args, msg)
		}
	}
	if requests, _, _, _ := api.counts(); requests != 0 {
		t.Fatalf("the job API got %d requests; want none", requests)
	}
}

// TestObserveOnce: Tools.Observe reads a job's state once and maps it as
// a task would; its errors are clear and hold no secret.
func TestObserveOnce(t *testing.T) {
	api := newShadowAPI(t)
	built := shadowTool(api.URL)
	built.Name, built.Observe = "build", false // any tool can be observed
	var tl *httpjob.Tools
	serveTools(t, "", &proctest.Buffer{}, func(log *slog.Logger) *httpjob.Tools {
		tl = httpjob.New([]httpjob.Tool{shadowTool(api.URL), built}, &http.Client{}, log)
		return tl
	})
	api.set("J-w", shadowJob{State: "running", Progress: "step 3 of 7"})
	api.set("J-c", shadowJob{State: "succeeded", Output: "ok"})
	api.set("J-f", shadowJob{State: "failed", Error: "disk full near " + token})
	api.set("J-x", shadowJob{State: "cancelled", Error: "stopped by alice"})
	api.set("J-odd", shadowJob{State: "exploded"})
	for _, c := range []struct {
		tool, job string
		want      httpjob.Observation
	}{
		{"shadow", "J-w", httpjob.Observation{Status: httpjob.ObservedWorking, Message: "step 3 of 7"}},
		{"build", "J-c", httpjob.Observation{Status: "completed"}},
		{"shadow", "J-f", httpjob.Observation{Status: "failed", Error: "disk full near [redacted]"}},
		{"shadow", "J-x", httpjob.Observation{Status: "cancelled", Error: "stopped by alice"}},
	} {
		before, _, _, _ := api.counts()
		got, err := tl.Observe(t.Context(), c.tool, c.job)
		if err != nil {
			t.Fatalf("%s %s: %v", c.tool, c.job, err)
		}
		if got != c.want {
			t.Errorf("%s %s: %+v; want %+v", c.tool, c.job, got, c.want)
		}
		if after, _, _, _ := api.counts(); after != before+1 {
			t.Errorf("%s %s: %d requests; want the status request alone", c.tool, c.job, after-before)
		}
	}
	for _, c := range []struct{ tool, job, want string }{
		{"nope", "J-w", `no HTTP job tool is named "nope"`},
		{"shadow", "J-odd", `the job's state "exploded" at /state is in none of the lists`},
		{"shadow", "J-gone", "the job API does not know the job (HTTP 404: no job J-gone for [redacted])"},
		{"shadow", "", "the job's ID is empty"},
		{"shadow", "..", `cannot be a whole path segment`},
	} {
		_, err := tl.Observe(t.Context(), c.tool, c.job)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), token) {
			t.Errorf("%s %q: %v; want an error with %q, without the token", c.tool, c.job, err, c.want)
		}
	}
	api.noChange(t)

	// An HTTP failure: the API is gone.
	down := shadowTool("http://127.0.0.1:1")
	dl := httpjob.New([]httpjob.Tool{down}, &http.Client{}, nil)
	if _, err := dl.Observe(t.Context(), "shadow", "J-w"); err == nil || !strings.Contains(err.Error(), "not registered yet") {
		t.Errorf("before Register: %v", err)
	}
	serveTools(t, "", &proctest.Buffer{}, func(*slog.Logger) *httpjob.Tools { return dl })
	if _, err := dl.Observe(t.Context(), "shadow", "J-w"); err == nil || !strings.Contains(err.Error(), "reading the job's status") ||
		strings.Contains(err.Error(), token) {
		t.Errorf("an API that does not answer: %v", err)
	}
}

// TestObserveCheck: an observe tool needs no start; jobId, if declared,
// is a string; a tool not in observe mode still needs its start.
func TestObserveCheck(t *testing.T) {
	tool := shadowTool("http://127.0.0.1:1")
	tool.Start = httpjob.Start{}
	if ps := tool.Check(); len(ps) != 0 {
		t.Fatalf("an observe tool without a start: %v", ps)
	}
	tool.InputSchema = map[string]any{"type": "object", "properties": map[string]any{"jobId": map[string]any{"type": "integer"}}}
	if ps := tool.Check(); len(ps) != 1 || ps[0].Field != "inputSchema.properties.jobId" {
		t.Errorf("jobId an integer: %v", ps)
	}
	tool.InputSchema, tool.Observe = nil, false
	if ps := tool.Check(); len(ps) == 0 || ps[0].Field != "start.url" {
		t.Errorf("no start, not observing: %v", ps)
	}
}

// TestObserveTimeout: an observing task that reaches its timeout fails
// saying so, and the job is not cancelled.
func TestObserveTimeout(t *testing.T) {
	api := newShadowAPI(t)
	tool := shadowTool(api.URL)
	tool.Timeout = 300 * time.Millisecond
	s := serve(t, "", &proctest.Buffer{}, tool)
	c := dial(t, s.URL, client.Wire20260728)
	api.set("J-slow", shadowJob{State: "running"})
	id := observeCall(t, c, "J-slow")
	_, err := c.Wait(t.Context(), id, nil)
	var te *client.TaskError
	if !errors.As(err, &te) || !strings.Contains(te.Message, "shadow timed out after 300ms") || !strings.Contains(te.Message, "was not cancelled (observe mode") {
		t.Fatalf("timed out: %v", err)
	}
	api.noChange(t)
}
