package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/jobservice"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// The HTTP job tools of mcptaskd against a job service running as a
// process of its own (internal/jobservice/cmd/jobservice) on loopback: it
// keeps its jobs in a file across its own restarts and honours
// Idempotency-Key.

const jobToken = "jt-5c1e7b2a9d04-very-secret"

var (
	jobServiceOnce sync.Once
	jobServiceBin  string
	jobServiceErr  error
)

// jobSvc is the job service process.
type jobSvc struct {
	t     *testing.T
	p     *proctest.Process
	state string
	addr  string // host:port, kept across restarts
	URL   string
}

// startJobService builds the job service (once) and starts it on a free
// loopback port with a state file of the test's own.
func startJobService(t *testing.T) *jobSvc {
	t.Helper()
	jobServiceOnce.Do(func() {
		jobServiceBin = filepath.Join(filepath.Dir(daemonBin), "jobservice")
		jobServiceErr = proctest.Build(context.Background(), jobServiceBin, "github.com/mcptask/mcptask/internal/testkit/jobservice/cmd/jobservice", false, os.Stderr)
	})
	if jobServiceErr != nil {
		t.Fatalf("building the job service: %v", jobServiceErr)
	}
	s := &jobSvc{t: t, state: filepath.Join(t.TempDir(), "jobs.json"), addr: "127.0.0.1:0"}
	s.start()
	return s
}

func (s *jobSvc) start() {
	s.t.Helper()
	p, err := proctest.Start(proctest.Config{Path: jobServiceBin, Args: []string{"-addr", s.addr, "-state", s.state},
		Env: append(os.Environ(), "JOBSERVICE_TOKEN="+jobToken)})
	if err != nil {
		s.t.Fatal(err)
	}
	s.p = p
	s.t.Cleanup(p.Kill)
	u, err := p.WaitListening(context.Background(), 30*time.Second)
	if err != nil {
		s.t.Fatalf("the job service did not start: %v\n%s", err, p.Logs())
	}
	s.URL = u
	s.addr = strings.TrimPrefix(u, "http://")
}

// kill9 kills the job service.
func (s *jobSvc) kill9() {
	s.t.Helper()
	_ = s.p.Signal(syscall.SIGKILL)
	<-s.p.Exited()
}

// hook calls a test hook of the job service.
func (s *jobSvc) hook(path string, body any) {
	s.t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(s.URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		s.t.Fatalf("%s: HTTP %d", path, resp.StatusCode)
	}
}

// stats returns the job service's state.
func (s *jobSvc) stats() jobservice.State {
	s.t.Helper()
	resp, err := http.Get(s.URL + "/test/stats")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st jobservice.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		s.t.Fatal(err)
	}
	return st
}

// jobOf waits until the job service has a job for task id and returns it.
func (s *jobSvc) jobOf(id string) string {
	s.t.Helper()
	var job string
	waitUntil(s.t, 30*time.Second, "the job of task "+id, func() (bool, error) {
		job = s.stats().JobOf("mcptask-" + id)
		return job != "", nil
	})
	return job
}

// httpJobTool is the configuration of a tool of the job service at base.
func httpJobTool(name, base, tokenFile string, idempotent bool) string {
	auth := fmt.Sprintf(`{Authorization: "Bearer ${file:%s}"}`, tokenFile)
	return fmt.Sprintf(`  %[1]s:
    description: Builds a ref on the test job service
    inputSchema:
      type: object
      properties: {ref: {type: string}, reject: {type: string}}
      required: [ref]
    start:
      method: POST
      url: %[2]s/jobs
      headers: %[3]s
      body: {ref: "{ref}", reject: "{reject}"}
      jobId: /id
    status:
      url: %[2]s/jobs/{jobId}
      headers: %[3]s
      state: /state
      message: /progress
      error: /error/message
      working: [running]
      completed: [succeeded]
      failed: [failed]
      cancelled: [cancelled]
    result: {url: "%[2]s/jobs/{jobId}/result", headers: %[3]s, pointer: /data}
    cancel: {url: "%[2]s/jobs/{jobId}/cancel", headers: %[3]s}
    idempotentStart: %[4]v
    pollInterval: 50ms
`, name, base, auth, idempotent)
}

// httpJobsConfig writes a configuration with the tools build
// (idempotentStart) and build_once (not) of the job service js.
func httpJobsConfig(t *testing.T, js *jobSvc) string {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(jobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return writeConfig(t, "demo: false\nhttpJobs:\n"+httpJobTool("build", js.URL, tokenFile, true)+httpJobTool("build_once", js.URL, tokenFile, false))
}

// noSecret fails the test if the token shows in any of texts.
func noSecret(t *testing.T, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(s, jobToken) || strings.Contains(s, jobToken[:12]) {
			t.Fatalf("the job service's token shows: %s", s)
		}
	}
}

// TestHTTPJobConfigErrors: the httpJobs section's problems, by line and
// field.
func TestHTTPJobConfigErrors(t *testing.T) {
	t.Parallel()
	cfg := `demo: false
httpJobs:
  deploy:
    inputSchema: {type: object, properties: {service: {type: string}}}
    start:
      url: http://127.0.0.1:1/deploy/{service}/{region}
      headers: {Authorization: "Bearer ${HTTPJOB_TEST_UNSET}"}
      jobId: id
    status:
      url: http://127.0.0.1:1/jobs/{jobId}
      state: /state~
      working: [running]
    cancel: {method: DELETE}
    pollInterval: 1ms
`
	_, err := parseFileConfig([]byte(cfg), func(string) string { return "" })
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"6: httpJobs.deploy.start.url: {region} names no argument of inputSchema.properties (declared: service)",
		"7: httpJobs.deploy.start.headers.Authorization: names the environment variable HTTPJOB_TEST_UNSET, which is not set",
		`8: httpJobs.deploy.start.jobId: "id" is not a JSON pointer`,
		`11: httpJobs.deploy.status.state: "/state~" is not a JSON pointer`,
		"9: httpJobs.deploy.status.completed: list the states of a job that succeeded",
		"13: httpJobs.deploy.cancel.url: required with a method, headers or a body",
		"14: httpJobs.deploy.pollInterval: 1ms: want at least 10ms",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors:\n%v\nwant one with %q", err, want)
		}
	}
	noSecret(t, err.Error())

	// A good entry, its secret expanded.
	getenv := func(name string) string { return map[string]string{"HTTPJOB_TEST_TOKEN": jobToken}[name] }
	fc, err := parseFileConfig([]byte("demo: false\nhttpJobs:\n"+httpJobTool("build", "http://127.0.0.1:1", "/nonexistent", true)), getenv)
	if err == nil || !strings.Contains(err.Error(), "names the file /nonexistent") {
		t.Fatalf("a missing secret file: %v", err)
	}
	good := strings.ReplaceAll(httpJobTool("build", "http://127.0.0.1:1", "x", true), "${file:x}", "${HTTPJOB_TEST_TOKEN}")
	if fc, err = parseFileConfig([]byte("demo: false\nhttpJobs:\n"+good), getenv); err != nil {
		t.Fatal(err)
	}
	if h := fc.HTTPJobs["build"].Start.Headers["Authorization"]; h != "Bearer "+jobToken {
		t.Errorf("the expanded header: %q", h)
	}
}

// TestHTTPJobDaemon: jobs through mcptaskd, on both wires: completed with
// the job's result and progress, failed, cancelled, refused at start
// (4xx), and a status that maps to nothing; the token, read from a file,
// shows in no message and no log.
func TestHTTPJobDaemon(t *testing.T) {
	js := startJobService(t)
	d := startDaemon(t, "mcptaskd", filepath.Join(t.TempDir(), "tasks.db"), "-config", httpJobsConfig(t, js), "-poll-interval", "20ms")
	var messages []string

	// 2026-07-28 (the raw wire client).
	c := d.client(true)
	id := startTask(t, c, "build", map[string]any{"ref": "main"})
	job := js.jobOf(id)
	js.hook("/test/jobs/"+job+"/progress", map[string]any{"progress": "linking"})
	waitTask(t, c, id, 30*time.Second, "the job's progress", func(tk *wiretest.Task) bool { return tk.StatusMessage == "linking" })
	js.hook("/test/jobs/"+job+"/finish", map[string]any{"artifact": "main.tgz"})
	tk := waitTask(t, c, id, 30*time.Second, "terminal", terminal)
	if r := resultOf(t, tk); r.text() != `{"artifact":"main.tgz"}` || r.IsError {
		t.Errorf("2026 result: %q (isError %v)", r.text(), r.IsError)
	}

	// Failed.
	id = startTask(t, c, "build", map[string]any{"ref": "red"})
	js.hook("/test/jobs/"+js.jobOf(id)+"/fail", map[string]any{"error": "2 tests failed"})
	tk = waitTask(t, c, id, 30*time.Second, "terminal", terminal)
	if r := resultOf(t, tk); !r.IsError || !strings.Contains(r.text(), "failed: 2 tests failed") {
		t.Errorf("failed job: %q (isError %v)", r.text(), r.IsError)
	}

	// Cancelled.
	id = startTask(t, c, "build", map[string]any{"ref": "long"})
	job = js.jobOf(id)
	if _, err := c.Call(context.Background(), "tasks/cancel", map[string]any{"taskId": id}, nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the job cancelled", func() (bool, error) { return js.stats().Jobs[job].State == "cancelled", nil })
	if tk, _ := c.Get(context.Background(), id); tk == nil || tk.Status != "cancelled" {
		t.Errorf("the cancelled task: %+v", tk)
	}

	// Refused at start.
	id = startTask(t, c, "build", map[string]any{"ref": "x", "reject": "no runner for x"})
	tk = waitTask(t, c, id, 30*time.Second, "terminal", terminal)
	if tk.Status != "failed" || tk.Error == nil || !strings.Contains(tk.Error.Message, "HTTP 422: no runner for x") {
		t.Errorf("refused start: %s %+v", tk.Status, tk.Error)
	} else {
		messages = append(messages, tk.Error.Message)
	}

	// A state in no list: fails loudly, with the answer's first bytes.
	id = startTask(t, c, "build", map[string]any{"ref": "odd"})
	js.hook("/test/jobs/"+js.jobOf(id)+"/state", map[string]any{"state": "paused-by-operator"})
	tk = waitTask(t, c, id, 30*time.Second, "terminal", terminal)
	if tk.Status != "failed" || tk.Error == nil || !strings.Contains(tk.Error.Message, `"paused-by-operator"`) ||
		!strings.Contains(tk.Error.Message, `the answer begins: {"id":"job-`) {
		t.Errorf("unmapped state: %s %+v", tk.Status, tk.Error)
	} else {
		messages = append(messages, tk.Error.Message)
	}
	if recs := d.LogRecords("the job API's answer matches no mapping"); len(recs) != 1 || !strings.Contains(fmt.Sprint(recs[0]["answer"]), "paused-by-operator") {
		t.Errorf("the unmapped state's log records: %v", recs)
	}

	// 2025-11-25 (the Go client).
	c25, err := client.Dial(t.Context(), d.URL, &client.Options{ProtocolVersion: client.Wire20251125})
	if err != nil {
		t.Fatal(err)
	}
	defer c25.Close()
	call, err := c25.CallTool(t.Context(), "build", map[string]any{"ref": "v2"})
	if err != nil || call.Task == nil {
		t.Fatalf("2025 call: %+v, %v", call, err)
	}
	js.hook("/test/jobs/"+js.jobOf(call.Task.ID)+"/finish", "built v2")
	res, err := c25.Wait(t.Context(), call.Task.ID, nil)
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("2025 result: %+v, %v", res, err)
	}
	if b, _ := json.Marshal(res.Content[0]); !strings.Contains(string(b), "built v2") {
		t.Errorf("2025 result: %s", b)
	}
	call, err = c25.CallTool(t.Context(), "build", map[string]any{"ref": "x", "reject": "nope"})
	if err != nil || call.Task == nil {
		t.Fatalf("2025 call: %+v, %v", call, err)
	}
	var te *client.TaskError
	if _, err := c25.Wait(t.Context(), call.Task.ID, nil); !errors.As(err, &te) || !strings.Contains(te.Message, "HTTP 422: nope") {
		t.Errorf("2025 refused start: %v", err)
	}

	if st := js.stats(); st.Created != 5 {
		t.Errorf("the job service created %d jobs, want 5 (the refused starts create none)", st.Created)
	}
	noSecret(t, append(messages, d.Logs())...)
}

// TestHTTPJobKillReattach: mcptaskd is killed (SIGKILL) while a job runs
// and restarted on the same SQLite file; the task re-attaches to the job
// (started once) and ends with its result. Five rounds; the median time
// from the restart to the task showing it re-attached is logged.
func TestHTTPJobKillReattach(t *testing.T) {
	js := startJobService(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	args := []string{"-config", httpJobsConfig(t, js), "-poll-interval", "20ms"}
	d := startDaemon(t, "mcptaskd#1", db, args...)
	const rounds = 5
	var took []time.Duration
	for round := 1; round <= rounds; round++ {
		c := d.client(true)
		ref := fmt.Sprintf("r%d", round)
		id := startTask(t, c, "build", map[string]any{"ref": ref})
		job := js.jobOf(id)
		js.hook("/test/jobs/"+job+"/progress", map[string]any{"progress": "compiling " + ref})
		waitTask(t, c, id, 30*time.Second, "the job's progress", func(tk *wiretest.Task) bool { return tk.StatusMessage == "compiling "+ref })

		d.kill9()
		restart := time.Now()
		d = startDaemon(t, fmt.Sprintf("mcptaskd#%d", round+1), db, args...)
		c = d.client(true)
		tk := waitTask(t, c, id, 30*time.Second, "re-attached", func(tk *wiretest.Task) bool {
			if terminal(tk) {
				t.Fatalf("the task ended before its job: %+v (error %+v)", tk, tk.Error)
			}
			return strings.HasPrefix(tk.StatusMessage, "re-attached to job "+job)
		})
		took = append(took, time.Since(restart))
		if !logged(d, "re-attaching to a job", id) {
			t.Errorf("round %d: no re-attachment logged", round)
		}
		// The job's message comes back, still saying it re-attached.
		waitTask(t, c, id, 30*time.Second, "the job's progress after re-attaching", func(tk *wiretest.Task) bool {
			return tk.StatusMessage == "re-attached to job "+job+": compiling "+ref
		})
		_ = tk
		js.hook("/test/jobs/"+job+"/finish", map[string]any{"artifact": ref + ".tgz"})
		tk = waitTask(t, c, id, 30*time.Second, "terminal", terminal)
		if r := resultOf(t, tk); r.text() != fmt.Sprintf(`{"artifact":"%s.tgz"}`, ref) {
			t.Errorf("round %d: result %q", round, r.text())
		}
		if st := js.stats(); st.Created != round || st.StartRequests != round {
			t.Errorf("round %d: the job service created %d jobs from %d start requests, want %d and %d", round, st.Created, st.StartRequests, round, round)
		}
	}
	t.Logf("re-attach after kill -9 and restart (restart → status re-attached), %d runs: median %v, all %v", rounds, median(took), took)
}

// TestHTTPJobGracefulHandBack: mcptaskd stopped with SIGTERM while a job
// runs hands the task back; the next mcptaskd re-attaches to the job,
// which was started once and not cancelled.
func TestHTTPJobGracefulHandBack(t *testing.T) {
	js := startJobService(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	args := []string{"-config", httpJobsConfig(t, js), "-poll-interval", "20ms", "-shutdown-grace", "200ms"}
	d := startDaemon(t, "mcptaskd#1", db, args...)
	id := startTask(t, d.client(true), "build", map[string]any{"ref": "term"})
	job := js.jobOf(id)
	js.hook("/test/jobs/"+job+"/progress", map[string]any{"progress": "testing term"})
	waitTask(t, d.client(true), id, 30*time.Second, "the job's progress", func(tk *wiretest.Task) bool { return tk.StatusMessage == "testing term" })
	if err := d.signal(syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("mcptaskd after SIGTERM: %v", err)
	}
	if st := js.stats(); st.Jobs[job].State != "running" || st.Cancels != 0 {
		t.Fatalf("the job after a graceful stop: %+v (cancels %d); want it running", st.Jobs[job], st.Cancels)
	}
	d = startDaemon(t, "mcptaskd#2", db, args...)
	c := d.client(true)
	waitTask(t, c, id, 30*time.Second, "re-attached", func(tk *wiretest.Task) bool {
		return strings.HasPrefix(tk.StatusMessage, "re-attached to job "+job)
	})
	// The re-attachment stays the status message until the job says
	// something new, not one status poll (the takeover tests polled past
	// it under load).
	deadline := time.Now().Add(30 * time.Second)
	for polled := js.stats().StatusRequests; js.stats().StatusRequests < polled+3; {
		if time.Now().After(deadline) {
			t.Fatal("mcptaskd stopped polling the job's status")
		}
		time.Sleep(10 * time.Millisecond) // the job service counts mcptaskd's polls
	}
	if tk := waitTask(t, c, id, 30*time.Second, "read", func(*wiretest.Task) bool { return true }); tk.StatusMessage != "re-attached to job "+job+": testing term" {
		t.Errorf("status message three polls after the re-attachment: %q", tk.StatusMessage)
	}
	js.hook("/test/jobs/"+job+"/finish", "handed back")
	if r := resultOf(t, waitTask(t, c, id, 30*time.Second, "terminal", terminal)); r.text() != "handed back" {
		t.Errorf("result: %q", r.text())
	}
	if st := js.stats(); st.Created != 1 || st.StartRequests != 1 {
		t.Errorf("the job service created %d jobs from %d start requests, want 1 and 1", st.Created, st.StartRequests)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestHTTPJobPostgresTakeover: two mcptaskd on one PostgreSQL schema
// (lease 2s); the instance running a job's task is killed (SIGKILL), the
// other takes the task over after the lease and re-attaches to the job,
// which ends with its result; the job service started it once. Five
// rounds, alternating instances; the median from the kill to the
// re-attachment is logged.
func TestHTTPJobPostgresTakeover(t *testing.T) {
	dsn := pgDSN(t)
	schema := pgSchema(t, dsn)
	js := startJobService(t)
	const lease = 2 * time.Second
	args := append(pgFlags(t, dsn, schema, lease), "-config", httpJobsConfig(t, js), "-poll-interval", "20ms")
	ds := startTogether(t, []string{"A", "B"}, args...)
	const rounds = 5
	var took []time.Duration
	for round := 1; round <= rounds; round++ {
		victim, other := ds[(round+1)%2], ds[round%2]
		cv, co := victim.client(true), other.client(true)
		ref := fmt.Sprintf("pg%d", round)
		id := startTask(t, cv, "build", map[string]any{"ref": ref})
		job := js.jobOf(id)
		js.hook("/test/jobs/"+job+"/progress", map[string]any{"progress": "testing " + ref})
		waitTask(t, co, id, 30*time.Second, "the job's progress, relayed by "+victim.name, func(tk *wiretest.Task) bool { return tk.StatusMessage == "testing "+ref })
		if !logged(victim, "job started", id) {
			t.Fatalf("round %d: the task did not run on %s", round, victim.name)
		}

		victim.kill9()
		killed := time.Now()
		waitTask(t, co, id, 30*lease, "re-attached by "+other.name, func(tk *wiretest.Task) bool {
			if terminal(tk) {
				t.Fatalf("the task ended before its job: %+v (error %+v)", tk, tk.Error)
			}
			return strings.HasPrefix(tk.StatusMessage, "re-attached to job "+job)
		})
		took = append(took, time.Since(killed))
		if !logged(other, "re-attaching to a job", id) {
			t.Errorf("round %d: %s logged no re-attachment", round, other.name)
		}
		js.hook("/test/jobs/"+job+"/finish", map[string]any{"artifact": ref + ".tgz"})
		tk := waitTask(t, co, id, 30*time.Second, "terminal", terminal)
		if r := resultOf(t, tk); r.text() != fmt.Sprintf(`{"artifact":"%s.tgz"}`, ref) {
			t.Errorf("round %d: result %q", round, r.text())
		}
		if st := js.stats(); st.Created != round || st.StartRequests != round {
			t.Errorf("round %d: the job service created %d jobs from %d start requests, want %d", round, st.Created, st.StartRequests, round)
		}
		// The killed instance comes back for the next round.
		ds[(round+1)%2] = spawnDaemon(t, victim.name, args...)()
	}
	t.Logf("re-attach on PostgreSQL takeover (SIGKILL → status re-attached on the other instance, lease %v), %d runs: median %v, all %v", lease, rounds, median(took), took)
}

// TestHTTPJobServiceDown: the job service is killed while a job runs and
// while another task starts; mcptaskd retries (its status message says
// so) and both tasks end with their jobs' results once the service is
// back (on the same port, with the jobs it kept).
func TestHTTPJobServiceDown(t *testing.T) {
	js := startJobService(t)
	d := startDaemon(t, "mcptaskd", filepath.Join(t.TempDir(), "tasks.db"), "-config", httpJobsConfig(t, js), "-poll-interval", "20ms")
	c := d.client(true)
	id1 := startTask(t, c, "build", map[string]any{"ref": "one"})
	job1 := js.jobOf(id1)

	js.kill9()
	waitTask(t, c, id1, 30*time.Second, "retrying", func(tk *wiretest.Task) bool {
		return strings.HasPrefix(tk.StatusMessage, "the job API failed") && strings.Contains(tk.StatusMessage, "retrying")
	})
	// A task created while the service is down: its create waits for the
	// job's ID (up to 30s), its start is retried with the same key.
	type created struct {
		id  string
		err error
	}
	second := make(chan created, 1)
	go func() {
		slow := &wiretest.Client{URL: d.URL, Tasks: true, HTTP: &http.Client{Timeout: 60 * time.Second}}
		tk, err := slow.CallTool(context.Background(), "build", map[string]any{"ref": "two"})
		if err == nil && tk.TaskID == "" {
			err = fmt.Errorf("no task: %+v", tk)
		}
		var id string
		if tk != nil {
			id = tk.TaskID
		}
		second <- created{id, err}
	}()
	waitUntil(t, 30*time.Second, "the second start retried", func() (bool, error) {
		n := 0
		for _, rec := range d.LogRecords("the job API failed; retrying") {
			if rec["what"] == "starting the job" {
				n++
			}
		}
		return n >= 2, nil
	})

	js.start() // same port, same state file
	c2 := <-second
	if c2.err != nil {
		t.Fatalf("the create during the outage: %v", c2.err)
	}
	job2 := js.jobOf(c2.id)
	for id, job := range map[string]string{id1: job1, c2.id: job2} {
		js.hook("/test/jobs/"+job+"/finish", map[string]any{"job": job})
		tk := waitTask(t, c, id, 30*time.Second, "terminal", terminal)
		if r := resultOf(t, tk); r.text() != fmt.Sprintf(`{"job":"%s"}`, job) {
			t.Errorf("task %s after the outage: %q", id, r.text())
		}
	}
	if st := js.stats(); st.Created != 2 || st.StartRequests != 2 {
		t.Errorf("the job service created %d jobs from %d start requests, want 2 and 2", st.Created, st.StartRequests)
	}
	noSecret(t, d.Logs())
}

// TestHTTPJobCrashBeforeRecord: mcptaskd is killed after the job service
// received a start request (and created the job) but before it answered:
// only the idempotency key was recorded. After the restart, the tool
// declared idempotentStart sends the start again with the same key, gets
// the same job and ends with its result; the other fails "outcome
// unknown", naming the key.
func TestHTTPJobCrashBeforeRecord(t *testing.T) {
	js := startJobService(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	args := []string{"-config", httpJobsConfig(t, js), "-poll-interval", "20ms"}
	d := startDaemon(t, "mcptaskd#1", db, args...)
	js.hook("/test/hold", map[string]any{"on": true})
	for tool, ref := range map[string]string{"build": "again", "build_once": "once"} {
		go func() {
			// Never answered: mcptaskd dies first.
			c := &wiretest.Client{URL: d.URL, Tasks: true, HTTP: &http.Client{Timeout: 60 * time.Second}}
			_, _ = c.CallTool(context.Background(), tool, map[string]any{"ref": ref})
		}()
	}
	waitUntil(t, 30*time.Second, "both starts held", func() (bool, error) { return js.stats().Held == 2, nil })
	d.kill9()
	js.hook("/test/hold", map[string]any{"on": false})

	// The tasks, by the keys the job service got.
	st := js.stats()
	ids := map[string]string{} // ref → task ID
	for key, job := range st.Keys {
		var p struct{ Ref string }
		_ = json.Unmarshal(st.Jobs[job].Params, &p)
		ids[p.Ref] = strings.TrimPrefix(key, "mcptask-")
	}
	if len(ids) != 2 {
		t.Fatalf("the job service's keys: %v", st.Keys)
	}

	d = startDaemon(t, "mcptaskd#2", db, args...)
	c := d.client(true)
	job := st.JobOf("mcptask-" + ids["again"])
	waitUntil(t, 30*time.Second, "the start sent again", func() (bool, error) {
		return logged(d, "a previous run stopped before recording the job's ID; sending the start again with the same idempotency key", ids["again"]) &&
			logged(d, "job started", ids["again"]), nil
	})
	js.hook("/test/jobs/"+job+"/finish", "same job")
	tk := waitTask(t, c, ids["again"], 30*time.Second, "terminal", terminal)
	if r := resultOf(t, tk); r.text() != "same job" {
		t.Errorf("idempotentStart: %q", r.text())
	}

	tk = waitTask(t, c, ids["once"], 30*time.Second, "terminal", terminal)
	key := "mcptask-" + ids["once"]
	if tk.Status != "failed" || tk.Error == nil || !strings.Contains(tk.Error.Message, "outcome of build_once is unknown") || !strings.Contains(tk.Error.Message, key) {
		t.Errorf("without idempotentStart: %s %+v; want an outcome unknown naming %s", tk.Status, tk.Error, key)
	}
	if st := js.stats(); st.Created != 2 || st.StartRequests != 3 {
		t.Errorf("the job service created %d jobs from %d start requests, want 2 from 3 (one sent again)", st.Created, st.StartRequests)
	}
}

// TestHTTPJobRedirectElsewhere: through mcptaskd, a job API whose status
// answer is a 302 to another port of the same host gets the task failed
// saying so; the other port receives nothing (neither the token nor the
// request) and its answer never becomes the job's.
func TestHTTPJobRedirectElsewhere(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var stolen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		stolen = append(stolen, r.Method+" "+r.RequestURI+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"x","state":"succeeded","data":"the other port's answer"}`)
	}))
	t.Cleanup(other.Close)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"j1"}`)
			return
		}
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	}))
	t.Cleanup(api.Close)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(jobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := writeConfig(t, "demo: false\nhttpJobs:\n"+httpJobTool("build", api.URL, tokenFile, true))
	d := startDaemon(t, "httpjobs", filepath.Join(t.TempDir(), "tasks.db"), "-config", config)
	c := d.client(true)
	tk := waitTask(t, c, startTask(t, c, "build", map[string]any{"ref": "main"}), 60*time.Second, "the end", terminal)
	if tk.Status != "failed" || tk.Error == nil || !strings.Contains(tk.Error.Message, "redirected to another origin ("+other.URL+")") {
		t.Fatalf("task %s %+v; want it failed, saying the job API redirected to another origin", tk.Status, tk.Error)
	}
	noSecret(t, tk.Error.Message, d.Logs())
	mu.Lock()
	defer mu.Unlock()
	if len(stolen) != 0 {
		t.Errorf("the other port received %q; want nothing", stolen)
	}
}
