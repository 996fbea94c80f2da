package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/clitest"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"
)

// exampleCommandsConfig writes a configuration with the commands section
// of examples/mcptaskd.yaml (its programs made absolute), no demo tools,
// and the extra commands of extra (YAML, indented under commands:).
func exampleCommandsConfig(t *testing.T, extra string) string {
	t.Helper()
	raw, err := os.ReadFile("../../examples/mcptaskd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Commands map[string]map[string]any `yaml:"commands"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	examples, _ := filepath.Abs("../../examples")
	for _, c := range doc.Commands {
		argv := c["argv"].([]any)
		argv[0] = filepath.Join(examples, argv[0].(string))
	}
	var section bytes.Buffer
	enc := yaml.NewEncoder(&section)
	enc.SetIndent(2) // as extra is
	if err := enc.Encode(map[string]any{"commands": doc.Commands}); err != nil {
		t.Fatal(err)
	}
	body := "demo: false\n" + section.String() + extra
	path := filepath.Join(t.TempDir(), "mcptaskd.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// treeScript writes a script that starts a grandchild (sleep 1000 &),
// records its own PID, its parent's (the supervisor) and the
// grandchild's in the file named by its argument, and waits.
func treeScript(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tree.sh")
	body := "#!/bin/sh\nsleep 1000 &\necho \"$$ $PPID $!\" > \"$1.tmp\" && mv \"$1.tmp\" \"$1\"\necho started\nwait\n"
	if err := os.WriteFile(path, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

const treeTool = `  tree:
    description: starts a grandchild and waits
    inputSchema: {type: object, properties: {pidfile: {type: string}}, required: [pidfile]}
    argv: [%q, "{pidfile}"]
    killGrace: 2s
`

// alive reports whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// pid (comm) STATE ...: comm may hold spaces; the state follows the last ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// readPIDs waits for the tree script's PID file.
func readPIDs(t *testing.T, path string) (script, supervisor, grandchild int) {
	t.Helper()
	var pids []int
	waitUntil(t, 30*time.Second, "the command's PID file", func() (bool, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return false, nil
		}
		pids = nil
		for _, f := range strings.Fields(string(b)) {
			n, err := strconv.Atoi(f)
			if err != nil {
				return false, err
			}
			pids = append(pids, n)
		}
		return len(pids) == 3, nil
	})
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("process %d is not running", pid)
		}
	}
	return pids[0], pids[1], pids[2]
}

func waitGone(t *testing.T, what string, pids ...int) {
	t.Helper()
	waitUntil(t, 30*time.Second, what, func() (bool, error) {
		for _, pid := range pids {
			if alive(pid) {
				return false, nil
			}
		}
		return true, nil
	})
}

// TestCommandCancelKillsProcessGroup: tasks/cancel kills the command's
// whole process group, a grandchild too, and the task ends cancelled; the
// supervisor, mcptaskd's one for all its commands, stays.
func TestCommandCancelKillsProcessGroup(t *testing.T) {
	t.Parallel()
	config := exampleCommandsConfig(t, fmt.Sprintf(treeTool, treeScript(t)))
	d := startDaemon(t, "commands", filepath.Join(t.TempDir(), "tasks.db"), "-config", config)
	c := d.client(true)
	pidFile := filepath.Join(t.TempDir(), "pids")
	id := startTask(t, c, "tree", map[string]any{"pidfile": pidFile})
	script, supervisor, grandchild := readPIDs(t, pidFile)
	if err := c.Result(context.Background(), "tasks/cancel", map[string]any{"taskId": id}, nil); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "the script and its grandchild to be gone", script, grandchild)
	if tk := waitTask(t, c, id, 30*time.Second, "the end", terminal); tk.Status != "cancelled" {
		t.Fatalf("task %s, want cancelled", tk.Status)
	}
	if !alive(supervisor) {
		t.Fatalf("the supervisor %d is gone with one of its commands", supervisor)
	}
	// The next command runs under the same one.
	pidFile = filepath.Join(t.TempDir(), "pids")
	startTask(t, c, "tree", map[string]any{"pidfile": pidFile})
	if _, again, _ := readPIDs(t, pidFile); again != supervisor {
		t.Fatalf("the next command's supervisor is %d, not %d", again, supervisor)
	}
}

// TestCommandSupervisorKilled: kill -9 of the supervisor of mcptaskd's
// commands kills the groups of the commands it ran (mcptaskd kills them:
// nobody else would) and fails their tasks saying why; the next command
// runs under a new supervisor.
func TestCommandSupervisorKilled(t *testing.T) {
	t.Parallel()
	config := exampleCommandsConfig(t, fmt.Sprintf(treeTool, treeScript(t)))
	d := startDaemon(t, "commands", filepath.Join(t.TempDir(), "tasks.db"), "-config", config)
	c := d.client(true)
	pidFile := filepath.Join(t.TempDir(), "pids")
	id := startTask(t, c, "tree", map[string]any{"pidfile": pidFile})
	script, supervisor, grandchild := readPIDs(t, pidFile)
	if err := syscall.Kill(supervisor, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "the script and its grandchild to die with their supervisor", script, grandchild)
	tk := waitTask(t, c, id, 30*time.Second, "the end", terminal)
	if tk.Status != "failed" || !strings.Contains(fmt.Sprint(tk.Error, tk.StatusMessage), "supervisor died") {
		t.Fatalf("task %s (%s %+v), want failed: the supervisor died", tk.Status, tk.StatusMessage, tk.Error)
	}
	pidFile = filepath.Join(t.TempDir(), "pids")
	startTask(t, c, "tree", map[string]any{"pidfile": pidFile})
	if _, again, _ := readPIDs(t, pidFile); again == supervisor {
		t.Fatalf("the next command ran under the dead supervisor %d", supervisor)
	}
}

// TestCommandKill9LeavesNoOrphan: kill -9 of mcptaskd leaves no process
// of a running command behind (the script, its grandchild, their
// supervisor); restarted, mcptaskd fails the task "outcome unknown".
func TestCommandKill9LeavesNoOrphan(t *testing.T) {
	t.Parallel()
	config := exampleCommandsConfig(t, fmt.Sprintf(treeTool, treeScript(t)))
	db := filepath.Join(t.TempDir(), "tasks.db")
	d := startDaemon(t, "commands", db, "-config", config)
	pidFile := filepath.Join(t.TempDir(), "pids")
	id := startTask(t, d.client(true), "tree", map[string]any{"pidfile": pidFile})
	script, supervisor, grandchild := readPIDs(t, pidFile)
	d.kill9()
	waitGone(t, "the script, its grandchild and their supervisor to die with mcptaskd", script, grandchild, supervisor)

	d2 := startDaemon(t, "commands#2", db, "-config", config)
	tk := waitTask(t, d2.client(true), id, 30*time.Second, "the recovery", terminal)
	if tk.Status != "failed" || tk.Error == nil || !strings.Contains(tk.Error.Message, "outcome is unknown") {
		t.Fatalf("after the crash: task %s %+v, want failed, outcome unknown", tk.Status, tk.Error)
	}
}

// TestCommandInputBothWires: the example deploy.sh asks for confirmation
// through the line protocol; on both wires the Go client's Elicit
// handler answers, and the answer reaches the script's stdin. A decline
// deploys nothing.
func TestCommandInputBothWires(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "commands", filepath.Join(t.TempDir(), "tasks.db"), "-config", exampleCommandsConfig(t, ""))
	for _, wire := range []string{client.Wire20260728, client.Wire20251125} {
		for _, confirm := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s confirm=%v", wire, confirm), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var asked string
				c, err := client.Dial(ctx, d.URL, &client.Options{ProtocolVersion: wire,
					Elicit: func(ctx context.Context, taskID string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
						asked = p.Message
						if !confirm {
							return &mcp.ElicitResult{Action: "decline"}, nil
						}
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
					}})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				call, err := c.CallTool(ctx, "deploy", map[string]any{"service": "api", "version": "2.0; $(reboot)", "steps": 2})
				if err != nil || call.Task == nil {
					t.Fatalf("deploy: %v %+v", err, call)
				}
				res, err := c.Wait(ctx, call.Task.ID, &client.WaitOptions{Deadline: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				if asked != "Deploy api 2.0; $(reboot) to production?" {
					t.Fatalf("asked %q", asked)
				}
				sc, _ := json.Marshal(res.StructuredContent)
				want := fmt.Sprintf(`{"deployed":%v,"service":"api","version":"2.0; $(reboot)"}`, confirm)
				if res.IsError || string(sc) != want {
					t.Fatalf("result: isError %v, structured %s, want %s", res.IsError, sc, want)
				}
			})
		}
	}
}

// TestCommandExampleTestSuite: the example test-suite.sh, its progress
// lines the status message, passing and failing by its argument.
func TestCommandExampleTestSuite(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "commands", filepath.Join(t.TempDir(), "tasks.db"), "-config", exampleCommandsConfig(t, ""))
	c := d.client(true)
	tk := waitTask(t, c, startTask(t, c, "test_suite", map[string]any{"tests": 4}), time.Minute, "the end", terminal)
	if r := resultOf(t, tk); r.IsError || !strings.Contains(r.text(), "[4/4] test_4 ... ok\n4 passed, 0 failed") {
		t.Fatalf("passing suite: %+v", r)
	}
	if tk.StatusMessage != "[4/4] test_4" {
		t.Errorf("status message %q, want the last progress line's", tk.StatusMessage)
	}
	tk = waitTask(t, c, startTask(t, c, "test_suite", map[string]any{"tests": 3, "exitCode": 3}), time.Minute, "the end", terminal)
	r := resultOf(t, tk)
	if !r.IsError || !strings.Contains(r.text(), "exited with code 3") || !strings.Contains(r.text(), "test_3: expected 42, got 41") ||
		!strings.Contains(r.text(), "2 passed, 1 failed") {
		t.Fatalf("failing suite: %+v", r)
	}
}

// vmHWM is a process's peak resident set, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestCommandHugeOutput: 50 MB of output keep the result at the log's
// tail and mcptaskd's memory flat (its peak RSS grows by far less than
// the output), while the log file gets all of it.
func TestCommandHugeOutput(t *testing.T) {
	t.Parallel()
	logDir := t.TempDir()
	config := exampleCommandsConfig(t, fmt.Sprintf(`  huge:
    argv: [/bin/sh, -c, "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 50000000; echo; echo the end"]
    log: {tailKiB: 16, dir: %q}
    progress: 'never matches (\d+)$'
`, logDir))
	d := startDaemon(t, "commands", filepath.Join(t.TempDir(), "tasks.db"), "-config", config)
	c := d.client(true)
	// Warm up (the first task's allocations), then measure.
	waitTask(t, c, startTask(t, c, "test_suite", map[string]any{"tests": 1}), time.Minute, "the warm-up", terminal)
	before := vmHWM(t, d.Pid())
	id := startTask(t, c, "huge", nil)
	tk := waitTask(t, c, id, 2*time.Minute, "the end", terminal)
	after := vmHWM(t, d.Pid())
	r := resultOf(t, tk)
	if r.IsError || !strings.HasSuffix(r.text(), "\nthe end\n") || !strings.Contains(r.text(), "0123456789abcdefghijklmnopqrstuvwxyz\n0123") || len(r.text()) > 17<<10 ||
		!strings.Contains(r.text(), "bytes of output are not shown; the whole output is in "+filepath.Join(logDir, id+".log")) {
		t.Fatalf("result: %d bytes, starting %q", len(r.text()), r.text()[:min(200, len(r.text()))])
	}
	fi, err := os.Stat(filepath.Join(logDir, id+".log"))
	if err != nil || fi.Size() != int64(50_000_000+len("\nthe end\n")) {
		t.Fatalf("log file: %v %v", fi, err)
	}
	t.Logf("mcptaskd peak RSS: %.1f MB before, %.1f MB after 50 MB of output (growth %.1f MB)", float64(before)/1e6, float64(after)/1e6, float64(after-before)/1e6)
	// The race detector's own bookkeeping grows with the work done (62 MB
	// here, measured): the bound holds for the binary as shipped.
	if !clitest.Race && after-before > 16<<20 {
		t.Fatalf("mcptaskd's peak RSS grew by %d bytes for 50 MB of output", after-before)
	}
}

// TestCommandConfigErrors: the commands section's problems, each with
// its line and field.
func TestCommandConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.sh")
	if err := os.WriteFile(ok, []byte("#!/bin/sh\ntrue\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	body := fmt.Sprintf(`demo: false
commands:
  empty:
    argv: []
  unknown_placeholder:
    inputSchema: {type: object, properties: {a: {type: string}}}
    argv: [%[1]q, "{b}"]
  bad_regex:
    argv: [%[1]q]
    progress: "(unclosed"
  missing_program:
    argv: [scripts/none.sh]
  secret:
    argv: [%[1]q]
    env: {set: {TOKEN: "${MCPTASK_TEST_UNSET_SECRET}"}}
  "two words":
    argv: [%[1]q]
  chosen_program:
    inputSchema: {type: object, properties: {p: {type: string}}}
    argv: ["{p}"]
  bad_task:
    argv: [%[1]q]
    task: sometimes
  bad_tail:
    argv: [%[1]q]
    log: {tailKiB: 0}
`, ok)
	if err := os.WriteFile(bad, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(daemonBin, "-check-config", bad).CombinedOutput()
	if ee, isExit := err.(*exec.ExitError); !isExit || ee.ExitCode() != 2 {
		t.Fatalf("-check-config: %v\n%s", err, out)
	}
	for _, want := range []string{
		bad + ":4: commands.empty.argv: argv is empty",
		bad + ":7: commands.unknown_placeholder.argv: argv: {b} names no property of the input schema (its properties: a)",
		bad + ":10: commands.bad_regex.progress: not a regular expression",
		bad + ":12: commands.missing_program.argv: program " + filepath.Join(dir, "scripts/none.sh") + ": no such file or directory",
		bad + ":15: commands.secret.env.set.TOKEN: names the environment variable MCPTASK_TEST_UNSET_SECRET, which is not set",
		bad + `:16: commands.two words: "two words" is not a tool name`,
		bad + ":20: commands.chosen_program.argv: argv[0] (the program) must not hold a placeholder",
		bad + ":23: commands.bad_task.task",
		bad + ":26: commands.bad_tail.log.tailKiB: 0: want 1 to 65536",
	} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("-check-config output lacks %q:\n%s", want, out)
		}
	}
	// A command named like a demo tool: -check-config says so, and
	// mcptaskd refuses to start.
	clash := filepath.Join(dir, "clash.yaml")
	if err := os.WriteFile(clash, []byte(fmt.Sprintf("commands:\n  echo:\n    argv: [%q]\n", ok)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(daemonBin, "-addr", "127.0.0.1:0", "-db", filepath.Join(dir, "x.db"), "-config", clash).CombinedOutput()
	if err == nil || !strings.Contains(string(out), clash+":2: commands.echo: the name is also a demo tool's") {
		t.Fatalf("a command named like a demo tool: %v\n%s", err, out)
	}
}

// BenchmarkCommandOverhead: the cost of running /bin/true as a task of
// mcptaskd (over loopback HTTP: the durable create, the command started
// by mcptaskd's supervisor, the result stored, polls every 2 ms) against
// running it directly with os/exec, in the same run; reports both and
// their ratio, and a plain (synchronous) call's cost: the supervisor
// without the task. (BenchmarkCommandTask in source/command compares
// with a no-op Go task on the same path.)
func BenchmarkCommandOverhead(b *testing.B) {
	config := filepath.Join(b.TempDir(), "mcptaskd.yaml")
	if err := os.WriteFile(config, []byte("demo: false\ncommands:\n  true:\n    argv: [/bin/true]\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	d := startDaemon(b, "commands", filepath.Join(b.TempDir(), "tasks.db"), "-config", config, "-poll-interval", "2ms")
	c, plainC := d.client(true), d.client(false)
	ctx := context.Background()
	var direct, plain, task time.Duration
	for b.Loop() {
		start := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		direct += time.Since(start)
		start = time.Now()
		h, err := c.CallTool(ctx, "true", nil)
		if err != nil || h.TaskID == "" {
			b.Fatalf("%v %+v", err, h)
		}
		tk, err := c.WaitFor(ctx, h.TaskID, terminal)
		if err != nil || tk.Status != "completed" {
			b.Fatalf("%v %+v", err, tk)
		}
		task += time.Since(start)
		start = time.Now()
		if r, err := plainC.CallTool(ctx, "true", nil); err != nil || r.IsError {
			b.Fatalf("%v %+v", err, r)
		}
		plain += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(float64(direct.Microseconds())/n, "direct-µs/op")
	b.ReportMetric(float64(plain.Microseconds())/n, "plain-call-µs/op")
	b.ReportMetric(float64(task.Microseconds())/n, "task-µs/op")
	b.ReportMetric(float64(task)/float64(direct), "ratio")
}

// TestCommandKill9RunDirRemoved: kill -9 of mcptaskd during a command
// leaves the run's directory behind (nothing could remove it); the next
// mcptaskd with commands removes it at start.
func TestCommandKill9RunDirRemoved(t *testing.T) {
	t.Parallel()
	sc := filepath.Join(t.TempDir(), "where.sh")
	body := "#!/bin/sh\ndirname \"$MCPTASK_RESULT\" > \"$1.tmp\" && mv \"$1.tmp\" \"$1\"\nexec sleep 1000\n"
	if err := os.WriteFile(sc, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	config := exampleCommandsConfig(t, fmt.Sprintf(`  where:
    inputSchema: {type: object, properties: {file: {type: string}}, required: [file]}
    argv: [%q, "{file}"]
`, sc))
	db := filepath.Join(t.TempDir(), "tasks.db")
	// The runs' directories in a temporary directory of this test's own:
	// any mcptaskd of this user sweeps the dead runs of the system's one
	// as it starts, those of the other tests' daemons too.
	env := []string{"TMPDIR=" + t.TempDir()}
	d := startDaemonEnv(t, "commands", db, env, "-config", config)
	file := filepath.Join(t.TempDir(), "dir")
	startTask(t, d.client(true), "where", map[string]any{"file": file})
	var dir string
	waitUntil(t, 30*time.Second, "the run's directory", func() (bool, error) {
		b, err := os.ReadFile(file)
		dir = strings.TrimSpace(string(b))
		return err == nil, nil
	})
	d.kill9()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the run's directory after kill -9: %v; want it left behind", err)
	}
	startDaemonEnv(t, "commands#2", db, env, "-config", config)
	waitUntil(t, 30*time.Second, "the dead run's directory to be removed", func() (bool, error) {
		_, err := os.Stat(dir)
		return os.IsNotExist(err), nil
	})
}

// environScript prints the environment of the command's parent (its
// supervisor) and tries its grandparent's (mcptaskd's).
const environScript = `#!/bin/sh
echo "parent $PPID:"; tr '\0' '\n' < /proc/$PPID/environ 2>&1 || echo "(unreadable)"
gp=$(awk '{print $4}' /proc/$PPID/stat)
echo "grandparent $gp:"; tr '\0' '\n' < /proc/$gp/environ 2>&1 || echo "(unreadable)"
`

// TestCommandCannotReadDaemonEnv: a command reading /proc/$PPID/environ
// reads its supervisor's environment, which is empty but for its mode
// (nothing of mcptaskd's, such as a secret in its environment, nor of
// another command's); mcptaskd's own,
// /proc/PID/environ of the grandparent, a command of the same user that
// is not root cannot read (mcptaskd is not dumpable). Root reads it: run
// commands as another user than mcptaskd's for that.
func TestCommandCannotReadDaemonEnv(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("/proc/PID/environ is Linux's")
	}
	// Everything as a user other than root may read it.
	dir, err := os.MkdirTemp("", "mcptask-environ-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	sc := filepath.Join(dir, "environ.sh")
	config := filepath.Join(dir, "mcptaskd.yaml")
	bin := filepath.Join(dir, "mcptaskd")
	exe, err := os.ReadFile(daemonBin)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path, body string
		mode       os.FileMode
	}{{sc, environScript, 0o755}, {config, fmt.Sprintf("demo: false\ncommands:\n  environ:\n    argv: [%q]\n", sc), 0o644}, {bin, string(exe), 0o755}} {
		if err := os.WriteFile(f.path, []byte(f.body), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(data, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, data} {
		if err := os.Chmod(p, map[bool]os.FileMode{true: 0o777, false: 0o755}[p == data]); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, prefix ...string) (parent, grandparent string) {
		t.Helper()
		args := append(prefix, bin, "-addr", "127.0.0.1:0", "-db", filepath.Join(data, name+".db"), "-config", config, "-log-format", "json",
			"-max-active-tasks", "0", "-create-rate", "0", "-request-rate", "0", "-max-poll-interval", "0")
		p, err := proctest.Start(proctest.Config{Path: args[0], Args: args[1:], Env: append(os.Environ(), "MCPTASK_TEST_SECRET=hunter2")})
		if err != nil {
			t.Fatal(err)
		}
		d := &daemon{Process: p, t: t, name: name}
		t.Cleanup(func() {
			d.Kill()
			if t.Failed() {
				t.Logf("--- log of %s ---\n%s", name, d.Logs())
			}
		})
		if d.URL, err = d.WaitListening(context.Background(), 60*time.Second); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, d.Logs())
		}
		c := d.client(true)
		tk := waitTask(t, c, startTask(t, c, "environ", nil), 60*time.Second, "the end", terminal)
		out := resultOf(t, tk).text()
		parent, grandparent, _ = strings.Cut(out, "grandparent ")
		if strings.Contains(parent, "hunter2") {
			t.Errorf("%s: the command's parent has mcptaskd's secret in its environment:\n%s", name, out)
		}
		return parent, grandparent
	}
	// As root: the supervisor's environment, readable, is its mode
	// alone; mcptaskd's own is readable too (root).
	parent, gp := run("root")
	if vars := strings.Fields(parent); len(vars) != 3 || vars[2] != "MCPTASK_COMMAND_SUPERVISOR=shared" {
		t.Errorf("the command's parent's environment, want its mode alone:\n%s", parent)
	}
	t.Logf("root reads mcptaskd's environment: %v", strings.Contains(gp, "hunter2"))
	setpriv, err := exec.LookPath("setpriv")
	if os.Getuid() != 0 || err != nil {
		t.Skip("the same-user case needs root and setpriv (to run mcptaskd as nobody)")
	}
	// As another user: neither the supervisor's nor mcptaskd's.
	parent, gp = run("nobody", setpriv, "--reuid=65534", "--regid=65534", "--clear-groups")
	if strings.Contains(gp, "hunter2") || !strings.Contains(gp, "(unreadable)") || !strings.Contains(parent, "(unreadable)") {
		t.Errorf("a command of the same user (not root) read its supervisor's or mcptaskd's environment:\nparent %s\ngrandparent %s", parent, gp)
	}
}
