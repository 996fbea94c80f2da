package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/upstreamtest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
)

// workedExample returns the configuration of docs/workflows.md's worked
// example, its addresses and files replaced by the test's: the job
// service js, the upstream up, the token file.
func workedExample(t *testing.T, js *jobSvc, up *upstreamtest.TaskServer) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/workflows.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "## The worked example")
	_, block, ok2 := strings.Cut(after, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/workflows.md has no worked example's yaml block")
	}
	tokenFile := filepath.Join(t.TempDir(), "ci-token")
	if err := os.WriteFile(tokenFile, []byte(jobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("../../examples/workflow/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{
		{"http://127.0.0.1:9001", js.URL}, {"http://127.0.0.1:9002/mcp", up.URL + "/mcp"},
		{"/run/secrets/ci-token", tokenFile}, {"examples/workflow/build.sh", script}, {"pollInterval: 2s", "pollInterval: 50ms"},
	} {
		if !strings.Contains(block, r[0]) {
			t.Fatalf("the worked example no longer holds %q", r[0])
		}
		block = strings.ReplaceAll(block, r[0], r[1])
	}
	return writeConfig(t, block)
}

// childrenOf reads the children tasks/get lists for a task.
func childrenOf(t *testing.T, tk *wiretest.Task) map[string]wire.Child {
	t.Helper()
	var list []wire.Child
	if raw := tk.Meta[wire.MetaChildren]; raw != nil {
		if err := json.Unmarshal(raw, &list); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
	}
	out := map[string]wire.Child{}
	for _, c := range list {
		out[c.Step] = c
	}
	return out
}

// TestWorkflowWorkedExample runs docs/workflows.md's worked example end
// to end: build (a command) → unit ∥ e2e (jobs of an HTTP job API) →
// deploy (an upstream MCP server's tool, approved by alice). mcptaskd is
// killed with SIGKILL while the tests run and again while the deploy
// runs; each time the restarted mcptaskd runs the workflow again, which
// finds its steps: the build ran once, the job API started two jobs, the
// upstream deployed once, and every step is one child task.
func TestWorkflowWorkedExample(t *testing.T) {
	t.Parallel()
	js := startJobService(t)
	up := upstreamtest.New(t)
	config := workedExample(t, js, up)
	admin := filepath.Join(t.TempDir(), "admins.json")
	if err := os.WriteFile(admin, []byte(`[{"token": "alice-token-0123456789abcdef", "operator": "alice"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "tasks.db")
	args := []string{"-config", config, "-admin-token-file", admin, "-poll-interval", "20ms"}
	d := startDaemon(t, "mcptaskd#1", db, args...)
	c := d.client(true)
	id := startTask(t, c, "release", map[string]any{"ref": "v1"})
	waitUntil(t, 30*time.Second, "both test jobs started", func() (bool, error) { return js.stats().Created == 2, nil })
	tk := waitTask(t, c, id, 30*time.Second, "the workflow naming its running steps", func(tk *wiretest.Task) bool {
		return strings.HasPrefix(tk.StatusMessage, "running unit, e2e (1 of 4 steps ended)")
	})
	if ch := childrenOf(t, tk); ch["build"].Status != "completed" || ch["unit"].Status != "working" || ch["e2e"].Status != "working" {
		t.Fatalf("children before the crash: %+v", ch)
	}

	d.kill9()
	d = startDaemon(t, "mcptaskd#2", db, args...)
	c = d.client(true)
	tk = waitTask(t, c, id, 30*time.Second, "the workflow run again", func(tk *wiretest.Task) bool {
		return strings.HasPrefix(tk.StatusMessage, "running unit, e2e")
	})
	for _, step := range []string{"unit", "e2e"} {
		child := childrenOf(t, tk)[step].TaskID
		js.hook("/test/jobs/"+js.jobOf(child)+"/finish", map[string]any{"suite": step, "passed": 42})
	}
	tk = waitTask(t, c, id, 30*time.Second, "the deploy held for approval", func(tk *wiretest.Task) bool {
		return strings.Contains(childrenOf(t, tk)["deploy"].StatusMessage, "waiting for approval by alice or bob")
	})
	deploy := childrenOf(t, tk)["deploy"].TaskID
	if up.Deploys.Load() != 0 {
		t.Fatal("the deploy ran before its approval")
	}
	decide := func(token string) int {
		body := strings.NewReader(`{"taskId": "` + deploy + `", "approve": true, "reason": "tests green"}`)
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, d.Base+"/admin/decide", body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := decide("alice-token-0123456789abcdef"); code != http.StatusOK {
		t.Fatalf("alice's approval: HTTP %d", code)
	}
	// Killed once the upstream task's ID is durable (the gateway's
	// external reference): before, the deploy's outcome is unknown.
	waitUntil(t, 30*time.Second, "the deploy started upstream", func() (bool, error) {
		return up.Deploys.Load() == 1 && logged(d, "upstream task created", deploy), nil
	})

	d.kill9()
	d = startDaemon(t, "mcptaskd#3", db, args...)
	c = d.client(true)
	up.Release()
	tk = waitTask(t, c, id, 60*time.Second, "terminal", terminal)
	var res struct {
		IsError           bool `json:"isError"`
		StructuredContent struct {
			Outcome string `json:"outcome"`
			Steps   map[string]struct {
				Outcome string
				Result  any
			} `json:"steps"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(tk.Result, &res); err != nil || tk.Status != "completed" || res.IsError || res.StructuredContent.Outcome != "ok" {
		t.Fatalf("the workflow ended %s: %s (%v)", tk.Status, tk.Result, err)
	}
	if got := res.StructuredContent.Steps["deploy"].Result; got != "app-v1.tgz deployed" {
		t.Errorf("deploy's result %v", got)
	}
	if r, _ := res.StructuredContent.Steps["unit"].Result.(map[string]any); r["suite"] != "unit" {
		t.Errorf("unit's result %v", res.StructuredContent.Steps["unit"].Result)
	}
	if n := up.Deploys.Load(); n != 1 {
		t.Errorf("the upstream deployed %d times, want once", n)
	}
	if st := js.stats(); st.Created != 2 {
		t.Errorf("the job service created %d jobs, want 2 (one per test step)", st.Created)
	}
	// The steps this process waited for, by outcome.
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, d.Base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer alice-token-0123456789abcdef")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`mcptask_workflow_steps_total{outcome="ok",step="deploy",workflow="release"} 1`, `mcptask_workflow_step_duration_seconds_count{outcome="ok",step="build",workflow="release"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	d.kill9()

	// Every step is one child task; the build, finished before the first
	// crash, started once.
	st, err := sqlite.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	children, _, err := st.Browse(context.Background(), store.BrowseQuery{Root: task.ID(id)})
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string]*task.Task{}
	for _, ch := range children {
		steps[task.StepOf(ch)] = ch
	}
	if len(children) != 4 || steps["build"] == nil || steps["unit"] == nil || steps["e2e"] == nil || steps["deploy"] == nil {
		t.Fatalf("the workflow's tree holds %d tasks: %v", len(children), steps)
	}
	if b := steps["build"]; b.Attempts != 1 || b.Status != task.Completed {
		t.Errorf("the build ran %d times (%s), want once", b.Attempts, b.Status)
	}
	for name, ch := range steps {
		t.Logf("step %s: task %s %s, %d runs", name, ch.ID, ch.Status, ch.Attempts)
	}
}

// TestWorkflowPostgresTakeover: two mcptaskd on one PostgreSQL schema;
// the one running a workflow (first → tests → last) is killed with
// SIGKILL while its tests job runs. The other takes the workflow and
// the job's task over after the lease: the finished step is not run
// again, the job is re-attached (one job), and the pending step starts
// once.
func TestWorkflowPostgresTakeover(t *testing.T) {
	t.Parallel()
	dsn := pgDSN(t)
	schema := pgSchema(t, dsn)
	js := startJobService(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(jobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	counted := func(name string) string {
		return "  " + name + ":\n    argv: [/bin/sh, -c, 'echo run >> " + filepath.Join(dir, name+".runs") + "']\n    task: required\n    rerunnable: true\n"
	}
	config := writeConfig(t, "demo: false\ncommands:\n"+counted("first")+counted("last")+"httpJobs:\n"+httpJobTool("tests", js.URL, tokenFile, true)+`workflows:
  pipeline:
    steps:
      - {name: first, tool: first}
      - {name: tests, tool: tests, needs: [first], arguments: {ref: "${args/ref}"}}
      - {name: last, tool: last, needs: [tests], when: "${steps.tests/suite} == all"}
`)
	const lease = 2 * time.Second
	ds := startTogether(t, []string{"A", "B"}, append(pgFlags(t, dsn, schema, lease), "-config", config)...)
	a, b := ds[0], ds[1]
	id := startTask(t, a.client(true), "pipeline", map[string]any{"ref": "r1"})
	cb := b.client(true)
	tk := waitTask(t, cb, id, 30*time.Second, "the tests step running", func(tk *wiretest.Task) bool {
		return childrenOf(t, tk)["tests"].Status == "working"
	})
	job := js.jobOf(childrenOf(t, tk)["tests"].TaskID)
	a.kill9()
	killed := time.Now()
	waitUntil(t, 30*lease, "B's takeover of the workflow", func() (bool, error) { return logged(b, "task re-run after restart", id), nil })
	t.Logf("B took the workflow over %v after SIGKILL of A (lease %v)", time.Since(killed).Round(time.Millisecond), lease)
	js.hook("/test/jobs/"+job+"/finish", map[string]any{"suite": "all"})
	tk = waitTask(t, cb, id, 60*time.Second, "terminal", terminal)
	if r := resultOf(t, tk); tk.Status != "completed" || r.IsError {
		t.Fatalf("the workflow ended %s: %s", tk.Status, tk.Result)
	}
	for _, name := range []string{"first", "last"} {
		runs, err := os.ReadFile(filepath.Join(dir, name+".runs"))
		if err != nil || strings.Count(string(runs), "run") != 1 {
			t.Errorf("step %s ran %d times (%v), want once", name, strings.Count(string(runs), "run"), err)
		}
	}
	if st := js.stats(); st.Created != 1 {
		t.Errorf("the job service created %d jobs, want 1", st.Created)
	}
	if n := len(childrenOf(t, tk)); n != 3 {
		t.Errorf("the workflow has %d children, want 3", n)
	}
}

// TestWorkflowConfigErrors: a bad workflows section is refused with the
// line of each problem; the worked example passes -check-config's
// parsing as it is.
func TestWorkflowConfigErrors(t *testing.T) {
	t.Parallel()
	cfg := `demo: true
commands:
  build: {argv: [/bin/true]}
workflows:
  build: {steps: [{name: a, tool: long_computation}]}
  loop:
    steps:
      - {name: a, tool: long_computation, needs: [b]}
      - {name: b, tool: long_computation, needs: [a]}
  refs:
    steps:
      - name: first
        tool: long_computation
      - name: second
        tool: nonesuch
        arguments: {x: "${steps.first/y}"}
        when: "${args/x} =="
`
	_, err := parseFileConfig([]byte(cfg), func(string) string { return "" })
	if err == nil {
		t.Fatal("a bad workflows section parsed")
	}
	for _, want := range []string{
		"5: workflows.build: the name is also a commands entry's",
		"8: workflows.loop.steps.a: needs: a cycle: a → b → a",
		"14: workflows.refs.steps.second: ${steps.first...}: the step reads first without needing it",
		"14: workflows.refs.steps.second: when:",
		`15: workflows.refs.steps.second.tool: "nonesuch" names no tool of this file`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the errors lack %q:\n%v", want, err)
		}
	}
	js := &jobSvc{URL: "http://127.0.0.1:1"}
	doc := workedExample(t, js, &upstreamtest.TaskServer{URL: "http://127.0.0.1:2"})
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseFileConfig(b, func(string) string { return "" }); err != nil {
		t.Fatalf("the worked example: %v", err)
	}
}
