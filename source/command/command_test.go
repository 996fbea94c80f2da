package command

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

func TestMain(m *testing.M) {
	Supervise() // the commands of these tests run under this binary
	os.Exit(m.Run())
}

// script writes an executable shell script and returns its path.
func script(t testing.TB, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cmd.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// serve registers tools on a test server and returns a wire client of
// it; tasks says whether the client declares task support.
func serve(t testing.TB, tasks bool, tools ...Tool) *wiretest.Client {
	t.Helper()
	s := servertest.Start(t, servertest.Options{Register: func(ts *mcptask.Server) (func(), error) {
		c := New(tools, slog.New(slog.NewTextHandler(io.Discard, nil)))
		err := c.Register(context.Background(), ts)
		if err != nil {
			return nil, err
		}
		return func() { c.Close() }, nil
	}})
	return &wiretest.Client{URL: s.URL, Tasks: tasks}
}

func strSchema(names ...string) map[string]any {
	props := map[string]any{}
	for _, n := range names {
		props[n] = map[string]any{"type": "string"}
	}
	return map[string]any{"type": "object", "properties": props}
}

// result is a CallToolResult as the wire carries it.
type result struct {
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	IsError           bool           `json:"isError"`
}

func (r result) text() string {
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// runTask calls tool as a task and waits for its end.
func runTask(t *testing.T, c *wiretest.Client, tool string, args map[string]any) *wiretest.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := c.CallTool(ctx, tool, args)
	if err != nil || h.TaskID == "" {
		t.Fatalf("calling %s: %v (%+v)", tool, err, h)
	}
	tk, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal)
	if err != nil {
		t.Fatalf("task %s: %v", h.TaskID, err)
	}
	return tk
}

func resultOf(t *testing.T, tk *wiretest.Task) result {
	t.Helper()
	if tk.Status != "completed" {
		t.Fatalf("task %s is %s (error %+v), want completed", tk.TaskID, tk.Status, tk.Error)
	}
	var r result
	if err := json.Unmarshal(tk.Result, &r); err != nil {
		t.Fatalf("result %s: %v", tk.Result, err)
	}
	return r
}

// TestCommandArgumentsVerbatim: each argument reaches the program as one
// argv element, as it is, and nothing else runs; a value that would be a
// flag is refused where the template puts none; numbers and booleans
// arrive in JSON form; an absent optional argument leaves its element
// out, or takes the schema's default.
func TestCommandArgumentsVerbatim(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "pwned")
	args := script(t, `for a in "$@"; do printf '<%s>\n' "$a"; done`+"\n")
	schema := strSchema("text", "flagged", "after")
	schema["properties"].(map[string]any)["n"] = map[string]any{"type": "number"}
	schema["properties"].(map[string]any)["yes"] = map[string]any{"type": "boolean"}
	schema["properties"].(map[string]any)["mode"] = map[string]any{"type": "string", "default": "fast"}
	c := serve(t, true, Tool{Name: "args", InputSchema: schema,
		Argv: []string{args, "{text}", "-m", "{flagged}", "--n={n}", "{yes}", "--mode", "{mode}", "x{text}y", "--", "{after}"}})
	evil := `it's "quoted"; rm -rf / $(touch ` + marker + `) ` + "`touch " + marker + "`" + ` && echo hi`
	r := resultOf(t, runTask(t, c, "args", map[string]any{"text": evil, "flagged": "-rf", "n": 2.5, "yes": true, "after": "--delete"}))
	want := "<" + evil + ">\n<-m>\n<-rf>\n<--n=2.5>\n<true>\n<--mode>\n<fast>\n<x" + evil + "y>\n<-->\n<--delete>\n"
	if r.IsError || r.text() != want {
		t.Fatalf("argv:\n got %q\nwant %q", r.text(), want)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the marker file exists: a value was interpreted (%v)", err)
	}
	// Absent optional arguments: their elements are left out.
	r = resultOf(t, runTask(t, c, "args", map[string]any{"text": "a b"}))
	if want := "<a b>\n<-m>\n<--mode>\n<fast>\n<xa by>\n<-->\n"; r.text() != want {
		t.Fatalf("absent arguments:\n got %q\nwant %q", r.text(), want)
	}
	// A leading '-' where the template takes no flag: refused, not run.
	r = resultOf(t, runTask(t, c, "args", map[string]any{"text": "--output=" + marker}))
	if !r.IsError || !strings.Contains(r.text(), "never becomes a flag") {
		t.Fatalf("a flag-like argument: %+v", r)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("the marker file exists")
	}
}

// TestCommandExitCodes: exit 0 is the log's tail as text, another exit
// code an isError result with the code and the tail, a signal likewise;
// stderr is part of the log.
func TestCommandExitCodes(t *testing.T) {
	sc := script(t, `echo "out: $1"; echo "err: $1" >&2
case "$1" in sig) kill -KILL $$ ;; esac
exit "$1"
`)
	schema := strSchema("code")
	c := serve(t, true, Tool{Name: "exit", InputSchema: schema, Argv: []string{sc, "{code}"}})
	r := resultOf(t, runTask(t, c, "exit", map[string]any{"code": "0"}))
	if r.IsError || !strings.Contains(r.text(), "out: 0") || !strings.Contains(r.text(), "err: 0") {
		t.Fatalf("exit 0: %+v", r)
	}
	r = resultOf(t, runTask(t, c, "exit", map[string]any{"code": "3"}))
	if !r.IsError || !strings.Contains(r.text(), "exited with code 3") || !strings.Contains(r.text(), "out: 3") || r.StructuredContent["exitCode"] != 3.0 {
		t.Fatalf("exit 3: %+v", r)
	}
	r = resultOf(t, runTask(t, c, "exit", map[string]any{"code": "sig"}))
	if !r.IsError || !strings.Contains(r.text(), "killed by signal 9") || r.StructuredContent["signal"] != 9.0 {
		t.Fatalf("killed: %+v", r)
	}
}

// TestCommandStructuredResult: a command writes its result to
// $MCPTASK_RESULT, as a CallToolResult or as any JSON object.
func TestCommandStructuredResult(t *testing.T) {
	sc := script(t, `case "$1" in
full) printf '{"content":[{"type":"text","text":"3 passed"}],"structuredContent":{"passed":3}}' > "$MCPTASK_RESULT" ;;
any) printf '{"passed": 4, "failed": 0}' > "$MCPTASK_RESULT" ;;
bad) printf '[1,2' > "$MCPTASK_RESULT" ;;
esac
echo done
`)
	c := serve(t, true, Tool{Name: "res", InputSchema: strSchema("kind"), Argv: []string{sc, "{kind}"}})
	r := resultOf(t, runTask(t, c, "res", map[string]any{"kind": "full"}))
	if r.IsError || r.text() != "3 passed" || r.StructuredContent["passed"] != 3.0 {
		t.Fatalf("CallToolResult: %+v", r)
	}
	r = resultOf(t, runTask(t, c, "res", map[string]any{"kind": "any"}))
	if r.IsError || r.StructuredContent["passed"] != 4.0 || r.text() != `{"passed":4,"failed":0}` {
		t.Fatalf("any object: %+v", r)
	}
	r = resultOf(t, runTask(t, c, "res", map[string]any{"kind": "bad"}))
	if !r.IsError || !strings.Contains(r.text(), "not valid") {
		t.Fatalf("bad file: %+v", r)
	}
}

// TestCommandProgress: lines matching the progress pattern become the
// status message (its first group), while the command runs.
func TestCommandProgress(t *testing.T) {
	release := filepath.Join(t.TempDir(), "release")
	sc := script(t, `echo "step 1 of 2: build"
echo "noise"
while [ ! -e "$2" ]; do sleep 0.01; done
echo "step 2 of 2: test"
`)
	c := serve(t, true, Tool{Name: "prog", InputSchema: strSchema("release"), Argv: []string{sc, "--", "{release}"},
		Progress: regexp.MustCompile(`^step (\d+ of \d+)`)})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := c.CallTool(ctx, "prog", map[string]any{"release": release})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitFor(ctx, h.TaskID, func(tk *wiretest.Task) bool { return tk.StatusMessage == "1 of 2" }); err != nil {
		t.Fatalf("the first progress line: %v", err)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tk, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal)
	if err != nil {
		t.Fatal(err)
	}
	if r := resultOf(t, tk); !strings.Contains(r.text(), "step 2 of 2: test") {
		t.Fatalf("result: %+v", r)
	}
}

// TestCommandInputPlainCall: a command that asks for input in a call that
// is not a task reads a decline, and its result says so.
func TestCommandInputPlainCall(t *testing.T) {
	sc := script(t, `echo '`+InputPrefix+` {"message":"Proceed?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}'
read answer
echo "answer: $answer"
`)
	c := serve(t, false, Tool{Name: "ask", Argv: []string{sc}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := c.CallTool(ctx, "ask", nil)
	if err != nil {
		t.Fatal(err)
	}
	var res result
	_ = json.Unmarshal(mustJSON(t, r.Content), &res.Content)
	if got := res.text(); !strings.Contains(got, `answer: {"action":"decline","error":"this call of ask does not run as a task`) || strings.Contains(got, InputPrefix) {
		t.Fatalf("plain call: %s", r.Content)
	}
}

func mustJSON(t *testing.T, v json.RawMessage) []byte {
	t.Helper()
	if len(v) == 0 {
		t.Fatal("no content")
	}
	return v
}

// TestCommandTimeout: a command past its timeout has its group killed
// (SIGTERM, then SIGKILL for one that ignores it) and its task fails
// saying so.
func TestCommandTimeout(t *testing.T) {
	sc := script(t, `trap '' TERM; echo started; while :; do sleep 0.05; done`+"\n")
	c := serve(t, true, Tool{Name: "slow", Argv: []string{sc}, Timeout: 300 * time.Millisecond, KillGrace: 200 * time.Millisecond})
	tk := runTask(t, c, "slow", nil)
	if tk.Status != "failed" || tk.Error == nil || !strings.Contains(tk.Error.Message, "timed out after 300ms") || !strings.Contains(tk.Error.Message, "started") {
		t.Fatalf("timeout: %+v %+v", tk, tk.Error)
	}
}

// TestRegisterErrors: what Register refuses.
func TestRegisterErrors(t *testing.T) {
	ok := script(t, "true\n")
	for _, tc := range []struct {
		tool Tool
		want string
	}{
		{Tool{Name: "a"}, "argv is empty"},
		{Tool{Name: "a", Argv: []string{"{prog}"}, InputSchema: strSchema("prog")}, "argv[0]"},
		{Tool{Name: "a", Argv: []string{ok, "{nope}"}, InputSchema: strSchema("x")}, "{nope} names no property"},
		{Tool{Name: "a", Argv: []string{"/no/such/program"}}, "no such file"},
		{Tool{Name: "a", Argv: []string{"no-such-program-mcptask"}}, "not found in PATH"},
		{Tool{Name: "a", Argv: []string{ok}, Support: "sometimes"}, "task support"},
		{Tool{Name: "a", Argv: []string{ok}, InputSchema: map[string]any{"type": "string"}}, "object schema"},
	} {
		if err := Check(tc.tool); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one containing %q", tc.tool, err, tc.want)
		}
	}
}

// TestTaskLogTail: the log keeps the last bytes, whatever was written.
func TestTaskLogTail(t *testing.T) {
	l := newTaskLog(8, nil)
	var all strings.Builder
	for i := range 100 {
		s := strings.Repeat(fmt.Sprint(i%10), i%13)
		all.WriteString(s)
		l.Write([]byte(s))
		want := all.String()
		if len(want) > 8 {
			want = want[len(want)-8:]
		}
		if got, dropped := l.tail(); got != want || dropped != int64(all.Len()-len(want)) {
			t.Fatalf("after %d writes: tail %q (%d dropped), want %q", i+1, got, dropped, want)
		}
	}
}

// TestCommandOutputMemoryFlat: 50 MB of output (lines, and a line with
// no end) cost the server a few allocations, not the output's size: the
// Go heap allocated during the run stays far below it.
func TestCommandOutputMemoryFlat(t *testing.T) {
	sc := script(t, "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 25000000\nhead -c 25000000 /dev/zero | tr '\\0' x\necho\necho the end\n")
	c := serve(t, true, Tool{Name: "huge", Argv: []string{sc}, LogTail: 4 << 10, Progress: regexp.MustCompile(`^never (\d+)$`)})
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := resultOf(t, runTask(t, c, "huge", nil))
	runtime.ReadMemStats(&after)
	if !strings.HasSuffix(r.text(), "xxx\nthe end\n") || len(r.text()) > 5<<10 {
		t.Fatalf("result: %d bytes, ending %q", len(r.text()), r.text()[max(0, len(r.text())-40):])
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %.1f MB for 50 MB of output", float64(alloc)/1e6)
	// The budget: the server's own (polls included, about 5 MB) and the
	// task log's, bounded per task whatever the output (its buffer of
	// waiting lines, a few batch writes while the output overflows it).
	if !raceEnabled && alloc > 12<<20 {
		t.Fatalf("allocated %d bytes for 50 MB of output", alloc)
	}
}

// TestCommandResultFIFO: a command that replaces its result file with a
// FIFO (or a symbolic link) gets an isError result saying so, within its
// timeout, and leaves no goroutine blocked on the FIFO.
func TestCommandResultFIFO(t *testing.T) {
	sc := script(t, `case "$1" in
fifo) rm -f "$MCPTASK_RESULT"; mkfifo "$MCPTASK_RESULT" ;;
link) echo '{"a":1}' > "$MCPTASK_RESULT.real"; rm -f "$MCPTASK_RESULT"; ln -s "$MCPTASK_RESULT.real" "$MCPTASK_RESULT" ;;
*) echo '{"ok":true}' > "$MCPTASK_RESULT" ;;
esac
`)
	c := serve(t, true, Tool{Name: "res", InputSchema: strSchema("kind"), Argv: []string{sc, "{kind}"}, Timeout: 5 * time.Second})
	if r := resultOf(t, runTask(t, c, "res", map[string]any{"kind": "plain"})); r.IsError || r.text() != `{"ok":true}` {
		t.Fatalf("a plain result file: %q (isError %v)", r.text(), r.IsError)
	}
	baseline := runtime.NumGoroutine()
	for kind, want := range map[string]string{"fifo": "not a regular file", "link": "not a regular file"} {
		start := time.Now()
		r := resultOf(t, runTask(t, c, "res", map[string]any{"kind": kind}))
		if !r.IsError || !strings.Contains(r.text(), "result file ($MCPTASK_RESULT) is not valid") || !strings.Contains(r.text(), want) {
			t.Errorf("%s: %q (isError %v); want an isError result saying %q", kind, r.text(), r.IsError, want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: the task took %v, past its timeout", kind, d)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before the FIFO:\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond) // polling the goroutine count, not timing the test
	}
}

// TestRunDirsSwept: a run's directory (its result file) is locked while
// the run lasts and removed after; Register removes the directories no
// process locks (runs of a program killed with kill -9), and keeps those
// a live process locks (another instance's).
func TestRunDirsSwept(t *testing.T) {
	parent, err := runParent()
	if err != nil {
		t.Fatal(err)
	}
	stale, err := os.MkdirTemp(parent, runDirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "result.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	live, release, err := newRunDir()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	sc := script(t, `dirname "$MCPTASK_RESULT"`+"\n")
	c := serve(t, true, Tool{Name: "where", Argv: []string{sc}})
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the dead run's directory %s: %v; want it removed", stale, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live run's directory: %v; want it kept", err)
	}
	r := resultOf(t, runTask(t, c, "where", nil))
	dir := strings.TrimSpace(r.text())
	if filepath.Dir(dir) != parent || !strings.HasPrefix(filepath.Base(dir), runDirPrefix) {
		t.Errorf("the run's directory %s, want one in %s", dir, parent)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the run's directory after the run: %v; want it removed", err)
	}
}

// TestCommandSecretsScrubbed: a secret of the tool (an env.set value read
// from a secret) that the command prints, puts in a progress line or in
// its result file shows nowhere: not in the result, its structured
// content, the status message or the task's log.
func TestCommandSecretsScrubbed(t *testing.T) {
	const secret = "s3cr3t-d3pl0y-t0k3n"
	sc := script(t, `echo "==> using $TOKEN"
echo "token: $TOKEN" >&2
case "$1" in
file) printf '{"content":[{"type":"text","text":"got %s"}],"structuredContent":{"k":"%s","%s":[1,"x%s"]}}' "$TOKEN" "$TOKEN" "$TOKEN" "$TOKEN" > "$MCPTASK_RESULT" ;;
any) printf '{"k":"%s"}' "$TOKEN" > "$MCPTASK_RESULT" ;;
fail) exit 3 ;;
esac
`)
	c := serve(t, true, Tool{Name: "leak", InputSchema: strSchema("kind"), Argv: []string{sc, "{kind}"},
		Env: Env{Set: map[string]string{"TOKEN": secret}}, Secrets: []string{secret}, Progress: regexp.MustCompile(`^==> (.*)$`)})
	for _, kind := range []string{"tail", "file", "any", "fail"} {
		tk := runTask(t, c, "leak", map[string]any{"kind": kind})
		var r result
		if err := json.Unmarshal(tk.Result, &r); err != nil {
			t.Fatalf("%s: result %s: %v", kind, tk.Result, err)
		}
		var logs struct {
			Contents []struct {
				Text string `json:"text"`
			} `json:"contents"`
		}
		if err := c.Result(context.Background(), "resources/read", map[string]any{"uri": "mcptask://tasks/" + tk.TaskID + "/log"}, &logs); err != nil {
			t.Fatal(err)
		}
		all := string(tk.Result) + tk.StatusMessage + fmt.Sprint(logs)
		if strings.Contains(all, secret) {
			t.Errorf("%s: the secret shows:\n%s", kind, all)
		}
		if !strings.Contains(all, "[redacted]") {
			t.Errorf("%s: no [redacted] in:\n%s", kind, all)
		}
	}
}
