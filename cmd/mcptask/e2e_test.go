package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
)

var wires = []string{"2026-07-28", "2025-11-25"}

func TestHelp(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "")
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := c.run(args...)
		expect(t, r, exitOK, []string{"Usage:", "Commands:", "call", "resume", "Exit codes:", "MCPTASK_URL", "MCPTASK_JOURNAL", "--timeout"}, nil)
		for _, e := range exitCodes {
			if !strings.Contains(r.stdout, e.meaning) {
				t.Errorf("help lacks exit code %d", e.code)
			}
		}
	}
	for _, args := range [][]string{{"help", "call"}, {"call", "--help"}, {"call", "-h"}} {
		expect(t, c.run(args...), exitOK, []string{"Usage: mcptask call", "key=value", "--detach", "--answer", "--json", "Exit codes:"}, nil)
	}
	for _, cmd := range commands {
		expect(t, c.run("help", cmd.name), exitOK, []string{"Usage: mcptask " + cmd.name}, nil)
	}
	expect(t, c.run("version"), exitOK, []string{"mcptask"}, nil)
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	// No server: usage errors are found before connecting.
	c := newCLI(t, freeURL(t))
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{nil, "Usage:"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"help", "bogus"}, `unknown command "bogus"`},
		{[]string{"--nope", "tools"}, "flag provided but not defined"},
		{[]string{"tools", "--nope"}, "flag provided but not defined"},
		{[]string{"call"}, "which tool?"},
		{[]string{"call", "echo", "novalue"}, "is not key=value"},
		{[]string{"call", "echo", "=x"}, "no key"},
		{[]string{"call", "echo", "k:=notjson"}, "must be JSON"},
		{[]string{"call", "echo", "--args", "{bad"}, "--args"},
		{[]string{"call", "echo", "--args", "[1]"}, "JSON object"},
		{[]string{"call", "echo", "--args", "@/does/not/exist.json"}, "--args"},
		{[]string{"call", "echo", "--answer", "nonsense"}, "--answer"},
		{[]string{"call", "echo", "--timeout", "soon"}, "invalid value"},
		{[]string{"--wire", "1999-01-01", "tools"}, "--wire"},
		{[]string{"--url", "ftp://example/mcp", "tools"}, "--url"},
		{[]string{"--timeout", "-1s", "tools"}, "--timeout"},
		{[]string{"--stdio", "'unterminated", "tools"}, "--stdio"},
		{[]string{"wait"}, "one task ID"},
		{[]string{"wait", "a", "b"}, "one task ID"},
		{[]string{"status"}, "task ID"},
		{[]string{"cancel"}, "task ID"},
		{[]string{"list", "extra"}, "no arguments"},
		{[]string{"resume", "extra"}, "no arguments"},
		{[]string{"--journal", "off", "resume"}, "journal is off"},
	} {
		r := c.run(tc.args...)
		expect(t, r, exitUsage, nil, []string{tc.msg})
		if tc.args != nil && !strings.Contains(r.stderr, "mcptask help") {
			t.Errorf("%q: no pointer to the help\n%s", tc.args, r)
		}
	}
}

func TestConnectionErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t, freeURL(t))
	for _, args := range [][]string{{"tools"}, {"call", "echo", "text=hi"}, {"status", "abc"}, {"wait", "abc"}, {"cancel", "abc"}} {
		expect(t, c.run(args...), exitConnection, nil, []string{"is the server running?"})
	}

	r := c.run("--json", "tools")
	var e struct {
		Status   string
		ExitCode int
		Error    struct{ Message string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &e); err != nil || e.ExitCode != exitConnection || r.code != exitConnection || e.Error.Message == "" {
		t.Fatalf("--json when unreachable: %+v %v\n%s", e, err, r)
	}
	// Nothing to resume needs no server.
	expect(t, c.run("resume"), exitOK, nil, []string{"nothing to resume"})
	expect(t, c.run("list"), exitOK, nil, []string{"no tasks in flight"})

	// A server that answers garbage.
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("this is not JSON-RPC"))
	}))
	t.Cleanup(garbage.Close)
	expect(t, newCLI(t, garbage.URL+"/mcp").run("tools"), exitConnection, nil, []string{"mcptask:"})
}

func TestTools(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	for _, wire := range wires {
		r := c.run("--wire", wire, "tools")
		expect(t, r, exitOK, []string{"long_computation", "deploy_with_confirmation", "flaky_migration", "lint_report", "echo"}, nil)
		if wire == "2025-11-25" && !regexp.MustCompile(`deploy_with_confirmation\s+required`).MatchString(r.stdout) {
			t.Errorf("tools on 2025-11-25 lacks task support\n%s", r)
		}
	}
	expect(t, c.run("tools", "long_computation"), exitOK, []string{"Counts the prime numbers", "Arguments:", "step_delay_ms", "integer"}, nil)
	expect(t, c.run("tools", "no_such_tool"), exitUsage, nil, []string{`no tool "no_such_tool"`})

	r := c.run("--json", "tools")
	var tools []struct {
		Name        string         `json:"name"`
		InputSchema map[string]any `json:"inputSchema"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &tools); err != nil || len(tools) < 5 {
		t.Fatalf("tools --json: %v\n%s", err, r)
	}
}

// TestCallOutcomes calls each demo tool on both wires and checks output
// and exit code.
func TestCallOutcomes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d.URL)
			r := c.run("--wire", wire, "call", "long_computation", "n=1000", "steps=3", "step_delay_ms=150")
			expect(t, r, exitOK, []string{"There are 168 primes up to 1000 (computed in 3 steps)."},
				[]string{"started (long_computation)", "mcptask: working: step "})

			r = c.run("--wire", wire, "call", "lint_report", "line_delay_ms=0")
			expect(t, r, exitToolError, []string{"Found 3 problems in 6 lines:"}, []string{"isError"})

			r = c.run("--wire", wire, "call", "flaky_migration", "step_delay_ms=0")
			expect(t, r, exitFailed, nil, []string{"failed at step 2 of 3", "-32603", `"failedStep":2`})

			r = c.run("--wire", wire, "call", "echo", "text=hello world")
			expect(t, r, exitOK, []string{"hello world"}, nil)

			// The value of a string property stays text even when it reads
			// as JSON.
			r = c.run("--wire", wire, "call", "echo", "text=1.50")
			expect(t, r, exitOK, []string{"1.50"}, nil)

			// Arguments as JSON: --args, a JSON object, key:=json, stdin.
			expect(t, c.run("--wire", wire, "call", "long_computation", `--args={"n": 100, "steps": 1}`, "step_delay_ms:=0"),
				exitOK, []string{"There are 25 primes up to 100 (computed in 1 steps)."}, nil)
			expect(t, c.run("--wire", wire, "call", "long_computation", `{"n": 30, "step_delay_ms": 0}`, "steps=2"),
				exitOK, []string{"There are 10 primes up to 30 (computed in 2 steps)."}, nil)
			expect(t, c.runInput(`{"n": 10, "steps": 1, "step_delay_ms": 0}`, "--wire", wire, "call", "long_computation", "--args", "-"),
				exitOK, []string{"There are 4 primes up to 10"}, nil)

			// Invalid arguments: the tool answers with isError.
			expect(t, c.run("--wire", wire, "call", "long_computation", "n=1", "step_delay_ms=0"), exitToolError, []string{"n must be between 2"}, nil)

			// Nothing is left in the journal.
			r = c.run("list")
			expect(t, r, exitOK, nil, []string{"no tasks in flight"})
		})
	}
}

func TestUnknownTool(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := newCLI(t, d.URL).run("call", "no_such_tool")
	expect(t, r, exitFailed, nil, []string{"no_such_tool"})
}

func TestJSONOutput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)

	type envelope struct {
		TaskID string `json:"taskId"`
		Tool   string `json:"tool"`
		Status string `json:"status"`
		Result *struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			StructuredContent map[string]any `json:"structuredContent"`
			IsError           bool           `json:"isError"`
		} `json:"result"`
		Error *struct {
			Code    int64          `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
		ExitCode int `json:"exitCode"`
	}
	decode := func(r result) envelope {
		t.Helper()
		var e envelope
		if err := json.Unmarshal([]byte(r.stdout), &e); err != nil {
			t.Fatalf("stdout is not the JSON outcome: %v\n%s", err, r)
		}
		if e.ExitCode != r.code {
			t.Fatalf("exitCode %d in JSON, %d for the process\n%s", e.ExitCode, r.code, r)
		}
		return e
	}

	r := c.run("--json", "call", "long_computation", "n=1000", "steps=2", "step_delay_ms=50")
	e := decode(r)
	if r.code != exitOK || e.TaskID == "" || e.Status != "completed" || e.Tool != "long_computation" ||
		e.Result == nil || e.Result.StructuredContent["primes"] != float64(168) {
		t.Fatalf("%+v\n%s", e, r)
	}
	if strings.Contains(r.stderr, "working") {
		t.Errorf("--json without a terminal printed status lines\n%s", r)
	}

	e = decode(c.run("--json", "call", "lint_report", "line_delay_ms=0"))
	if e.ExitCode != exitToolError || e.Status != "completed" || e.Result == nil || !e.Result.IsError {
		t.Fatalf("lint_report: %+v", e)
	}
	e = decode(c.run("--json", "call", "flaky_migration", "step_delay_ms=0"))
	if e.ExitCode != exitFailed || e.Status != "failed" || e.Error == nil || e.Error.Code != -32603 || e.Error.Data["failedStep"] != float64(2) {
		t.Fatalf("flaky_migration: %+v", e)
	}
	e = decode(c.run("--json", "call", "echo", "text=hi"))
	if e.ExitCode != exitOK || e.TaskID != "" || e.Result == nil || e.Result.Content[0].Text != "hi" {
		t.Fatalf("echo: %+v", e)
	}

	// status and list of a detached task.
	r = c.run("--json", "call", "--detach", "long_computation", "n=1000", "steps=5", "step_delay_ms=60000")
	var st struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
		Tool   string `json:"tool"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.TaskID == "" || st.Status != "working" || r.code != exitOK {
		t.Fatalf("call --detach --json: %+v %v\n%s", st, err, r)
	}
	r = c.run("--json", "status", st.TaskID)
	var st2 struct {
		TaskID, Status, StatusMessage string
		CreatedAt                     time.Time
	}
	if err := json.Unmarshal([]byte(r.stdout), &st2); err != nil || st2.TaskID != st.TaskID || st2.Status != "working" || st2.CreatedAt.IsZero() {
		t.Fatalf("status --json: %+v %v\n%s", st2, err, r)
	}
	r = c.run("--json", "list")
	var list []struct{ TaskID, Status, Tool string }
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0].TaskID != st.TaskID || list[0].Tool != "long_computation" {
		t.Fatalf("list --json: %+v %v\n%s", list, err, r)
	}
	r = c.run("--json", "cancel", st.TaskID)
	if err := json.Unmarshal([]byte(r.stdout), &st2); err != nil || st2.Status != "cancelled" || r.code != exitOK {
		t.Fatalf("cancel --json: %+v %v\n%s", st2, err, r)
	}
	e = decode(c.run("--json", "wait", st.TaskID))
	if e.ExitCode != exitCancelled || e.Status != "cancelled" {
		t.Fatalf("wait of a cancelled task: %+v", e)
	}
}

func TestDetachThenWait(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d.URL)
			r := c.run("--wire", wire, "call", "--detach", "long_computation", "n=1000", "steps=4", "step_delay_ms=100")
			expect(t, r, exitOK, nil, []string{"wait for it with"})
			id := strings.TrimSpace(r.stdout)
			if !regexp.MustCompile(`^[a-z2-7]{20,}$`).MatchString(id) {
				t.Fatalf("--detach printed %q, not a task ID\n%s", id, r)
			}
			expect(t, c.run("list"), exitOK, []string{id, "long_computation"}, nil)
			expect(t, c.run("status", id), exitOK, []string{"task " + id, "status:"}, nil)
			expect(t, c.run("--wire", wire, "wait", id), exitOK, []string{"There are 168 primes up to 1000 (computed in 4 steps)."}, nil)
			expect(t, c.run("list"), exitOK, nil, []string{"no tasks in flight"})
			// A task that has ended is still there to see and to wait for.
			expect(t, c.run("status", id), exitOK, nil, nil)
		})
	}
}

func TestCancelEndsTheWaiter(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d.URL)
			waiter := c.start("--wire", wire, "call", "long_computation", "n=1000", "steps=5", "step_delay_ms=60000")
			id := waiter.waitStderr(taskStarted, 30*time.Second)[1]
			waiter.waitStderr(regexp.MustCompile(`step 1 of 5`), 30*time.Second)
			expect(t, c.run("--wire", wire, "cancel", id), exitOK, []string{"task " + id + ": cancelled"}, nil)
			r := waiter.wait(30 * time.Second)
			expect(t, r, exitCancelled, nil, []string{"was cancelled"})
			// Cancelling again changes nothing.
			expect(t, c.run("--wire", wire, "cancel", id), exitOK, []string{id}, nil)
		})
	}
}

// TestInterrupt stops waits with SIGINT (Ctrl-C): the task keeps running,
// or is cancelled with --cancel-on-interrupt.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	p := c.start("call", "long_computation", "n=1000", "steps=3", "step_delay_ms=500")
	id := p.waitStderr(taskStarted, 30*time.Second)[1]
	p.waitStderr(regexp.MustCompile(`working: step`), 30*time.Second)
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	expect(t, p.wait(30*time.Second), exitInterrupted, nil, []string{"interrupted; task " + id + " keeps running", "wait " + id, "resume"})
	expect(t, c.run("wait", id), exitOK, []string{"There are 168 primes up to 1000 (computed in 3 steps)."}, nil)

	p = c.start("call", "--cancel-on-interrupt", "long_computation", "n=1000", "steps=3", "step_delay_ms=60000")
	id = p.waitStderr(taskStarted, 30*time.Second)[1]
	p.waitStderr(regexp.MustCompile(`working: step`), 30*time.Second)
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	expect(t, p.wait(30*time.Second), exitCancelled, nil, []string{"task " + id + " is cancelled"})
	expect(t, c.run("status", id), exitOK, []string{"cancelled"}, nil)
	expect(t, c.run("resume"), exitOK, nil, []string{"nothing to resume"})
}

func TestDeadline(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	r := c.run("call", "--timeout", "1s", "long_computation", "n=1000", "steps=5", "step_delay_ms=60000")
	expect(t, r, exitDeadline, nil, []string{"keeps running", "wait for it again with: mcptask", " wait "})
	id := strings.TrimSpace(r.stdout)
	if id == "" || strings.Contains(id, "\n") {
		t.Fatalf("want the task ID alone on stdout\n%s", r)
	}
	expect(t, c.run("--deadline", "200ms", "wait", id), exitDeadline, []string{id}, nil)
	expect(t, c.run("status", id), exitOK, []string{"working"}, nil)
	expect(t, c.run("--timeout", "300ms", "resume"), exitDeadline, []string{id}, nil)
	expect(t, c.run("cancel", id), exitOK, []string{"cancelled"}, nil)
	expect(t, c.run("wait", id), exitCancelled, nil, nil)
	expect(t, c.run("resume"), exitOK, nil, []string{"nothing to resume"})
}

func TestUnknownTask(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	c := newCLI(t, d.URL)
	for _, args := range [][]string{{"status", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}, {"wait", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}} {
		expect(t, c.run(args...), exitConnection, nil, []string{"not found"})
	}
}

// TestElicitation answers deploy_with_confirmation's question without a
// terminal: with --answer, --answers, and by declining.
func TestElicitation(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t, d.URL)
			deploy := []string{"--wire", wire, "call", "deploy_with_confirmation", "service=api", "version=2.0", "build_steps=1", "step_delay_ms=0"}

			r := c.run(append(deploy, "--answer", "confirm=true")...)
			expect(t, r, exitOK, []string{"Deployed api@2.0 to production."}, []string{"Roll it out to production now?", "answered from --answer"})

			r = c.run(deploy...)
			expect(t, r, exitOK, []string{"aborted: the user declined"}, []string{"declined: standard input is not a terminal"})

			answers := filepath.Join(t.TempDir(), "answers.json")
			if err := os.WriteFile(answers, []byte(`{"confirm": false}`), 0o600); err != nil {
				t.Fatal(err)
			}
			expect(t, c.run(append(deploy, "--answers", answers)...), exitOK, []string{"aborted: the user did not confirm"}, nil)
			expect(t, c.runInput(`{"action": "cancel"}`, append(deploy, "--answers", "-")...), exitOK, []string{`dismissed (action "cancel")`}, nil)
			expect(t, c.run(append(deploy, "--answer", "decline")...), exitOK, []string{"aborted: the user declined"}, nil)
		})
	}
}

// TestResumeAfterCrash kills mcptask while it waits for a task, then
// 'mcptask resume' delivers the result without running the tool again.
func TestResumeAfterCrash(t *testing.T) {
	t.Parallel()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			d := startDaemon(t)
			c := newCLI(t, d.URL)
			p := c.start("--wire", wire, "call", "long_computation", "n=100000", "steps=20", "step_delay_ms=100")
			id := p.waitStderr(taskStarted, 30*time.Second)[1]
			p.waitStderr(regexp.MustCompile(`working: step \d+ of 20`), 30*time.Second)
			p.kill9()

			entries, err := client.ReadJournal(c.journal)
			i := slices.IndexFunc(entries, func(e client.JournalEntry) bool { return e.TaskID == id })
			if err != nil || i < 0 || entries[i].Target != d.URL || entries[i].Wire != wire || entries[i].Tool != "long_computation" {
				t.Fatalf("the journal does not hold task %s: %+v %v", id, entries, err)
			}
			expect(t, c.run("list"), exitOK, []string{id, "long_computation"}, nil)

			r := c.run("resume")
			expect(t, r, exitOK, []string{"There are 9592 primes up to 100000 (computed in 20 steps)."}, []string{"resuming 1 task(s)", id})
			if n := d.count("task created"); n != 1 {
				t.Fatalf("%d tasks created, want 1: the tool ran again\n%s", n, d.Logs())
			}
			expect(t, c.run("list"), exitOK, nil, []string{"no tasks in flight"})
			expect(t, c.run("resume"), exitOK, nil, []string{"nothing to resume"})
		})
	}
}

// TestResumeSeveral resumes tasks of several outcomes and servers at once.
func TestResumeSeveral(t *testing.T) {
	t.Parallel()
	d1, d2 := startDaemon(t), startDaemon(t)
	c := newCLI(t, d1.URL)
	other := &cli{t: t, url: d2.URL, journal: c.journal}
	var ids []string
	for _, args := range [][]string{
		{"long_computation", "n=1000", "steps=2", "step_delay_ms=100"},
		{"lint_report", "line_delay_ms=50"},
	} {
		r := c.run(append([]string{"call", "--detach"}, args...)...)
		expect(t, r, exitOK, nil, nil)
		ids = append(ids, strings.TrimSpace(r.stdout))
	}
	r := other.run("call", "--detach", "flaky_migration", "step_delay_ms=50")
	expect(t, r, exitOK, nil, nil)
	ids = append(ids, strings.TrimSpace(r.stdout))

	// Without --url or MCPTASK_URL, list and resume visit every server of
	// the journal.
	all := &cli{t: t, journal: c.journal}
	expect(t, all.run("list"), exitOK, append([]string{"SERVER", d1.URL, d2.URL}, ids...), nil)
	r = all.run("--json", "resume")
	var outs []struct {
		TaskID   string `json:"taskId"`
		Status   string `json:"status"`
		ExitCode int    `json:"exitCode"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &outs); err != nil || len(outs) != 3 {
		t.Fatalf("resume --json: %v\n%s", err, r)
	}
	got := map[string]int{}
	for _, o := range outs {
		got[o.TaskID] = o.ExitCode
	}
	if got[ids[0]] != exitOK || got[ids[1]] != exitToolError || got[ids[2]] != exitFailed || r.code != exitFailed {
		t.Fatalf("resume outcomes %v (exit %d), want %s:0 %s:1 %s:2, exit 2\n%s", got, r.code, ids[0], ids[1], ids[2], r)
	}
}

func TestStdio(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "")
	server := daemonBin + " -stdio -db " + filepath.Join(t.TempDir(), "tasks.db")
	expect(t, c.run("--stdio", server, "tools"), exitOK, []string{"long_computation"}, nil)
	expect(t, c.run("--stdio", server, "call", "long_computation", "n=1000", "steps=2", "step_delay_ms=20"),
		exitOK, []string{"There are 168 primes up to 1000 (computed in 2 steps)."}, nil)
	expect(t, c.run("--stdio", server, "call", "--answer", "confirm=true", "deploy_with_confirmation", "service=db", "build_steps=1", "step_delay_ms=0"),
		exitOK, []string{"Deployed db@latest to production."}, nil)
}
