// Package command runs programs as MCP tools, so that a script becomes a
// durable task on both task wires with no Go code:
//
//	func main() {
//		command.Supervise() // first: a command's supervisor is this program
//		...
//		cmds := command.New([]command.Tool{{
//			Name:        "run_tests",
//			Description: "Runs the test suite",
//			InputSchema: map[string]any{"type": "object", "properties": map[string]any{
//				"pkg": map[string]any{"type": "string"}}, "required": []any{"pkg"}},
//			Argv:     []string{"/usr/bin/go", "test", "-v", "--", "{pkg}"},
//			Timeout:  30 * time.Minute,
//			Progress: regexp.MustCompile(`^=== RUN\s+(\S+)`),
//		}}, logger)
//		defer cmds.Close()
//		if err := cmds.Register(ctx, ts); err != nil { ... }
//	}
//
// The call's arguments fill the argv template by name, with no shell in
// between: each value is exactly one element of the command line, or part
// of one, as it is (strings) or in JSON form (numbers, booleans, objects);
// it is never split, nor interpreted, and never becomes a flag unless the
// template says so (a value that would begin an element with '-' is
// refused unless a flag or "--" precedes that element in the template).
//
// The command runs in a process group of its own, under a supervisor (see
// Supervise), so that neither it nor anything it starts outlives the
// program. A cancelled task's group gets SIGTERM, then SIGKILL after
// Tool.KillGrace; so does one that runs past Tool.Timeout, whose task then
// fails saying so. Its standard output and error are the task's log: the
// last Tool.LogTail bytes in memory (whatever the output's size), the
// whole stream in LogDir/TASKID.log if Tool.LogDir is set. Output lines
// matching Tool.Progress become the task's status message (at most one
// durable write per StatusInterval, the latest kept).
//
// Exit status 0 is success: the result is the log's tail as text, or what
// the command wrote to the file named by $MCPTASK_RESULT (see
// ResultEnv). Another exit status, or death by a signal, is an isError
// result carrying the exit status and the log's tail.
//
// A command asks the user for input by writing a line to its standard
// output (see InputPrefix):
//
//	::mcptask-input:: {"message": "Deploy api 2.0 to production?", "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}}}
//
// The task shows input_required with that elicitation until the client
// answers; the answer reaches the command's standard input as one JSON
// line, {"action": "accept", "content": {"confirm": true}} (or "decline",
// "cancel"). A call that does not run as a task cannot ask anyone: the
// command reads {"action": "decline", "error": "..."}. Such lines are not
// part of the log.
package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/secrets"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is a program run as a tool.
type Tool struct {
	// Name and Description are the tool's.
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments (an object
	// schema); nil means {"type": "object"}. Calls whose arguments do
	// not match it are refused before any task is created.
	InputSchema map[string]any
	// Argv is the command line: Argv[0] the program (an absolute path, a
	// path relative to the working directory, or a name looked up in
	// PATH when Register runs), never filled from arguments; the other
	// elements may hold {name} placeholders, each naming a property of
	// InputSchema ({{ and }} are literal braces). An element naming an
	// argument the call did not give takes the property's default, else
	// is left out: write a flag and its value as one element
	// ("--count={count}") for them to go together.
	Argv []string
	// Dir is the working directory; empty means the program's.
	Dir string
	// Env is the command's environment.
	Env Env
	// Timeout, if positive, bounds each run: the process group then gets
	// SIGTERM (SIGKILL after KillGrace) and the task fails saying so.
	Timeout time.Duration
	// KillGrace is how long a process group has between SIGTERM and
	// SIGKILL; zero means DefaultKillGrace.
	KillGrace time.Duration
	// Support is the tool's task support; empty means mcptask.Optional.
	Support mcptask.TaskSupport
	// Rerunnable declares the command safe to run again from the start
	// after a crash of the program (the process died with it); otherwise
	// such a task fails "outcome unknown".
	Rerunnable bool
	// SurvivesRestart (Linux) lets the command of a task outlive the
	// program: its supervisor runs in a session of its own and keeps the
	// command's output (at most MaxDetachedOutput bytes a stream) and its
	// exit status in the run's directory, and the program, restarted
	// after a graceful stop or a kill -9 (not a reboot), re-attaches to
	// it: status, log, input, cancel and outcome go on as if it had not
	// stopped. A supervisor that no program re-attaches to within
	// RestartGrace kills the command's group and ends. A call that does
	// not run as a task runs as usual.
	SurvivesRestart bool
	// RestartGrace bounds how long a command of SurvivesRestart runs
	// without a program attached; zero means DefaultRestartGrace.
	RestartGrace time.Duration
	// MaxConcurrent, Queue and MaxTTL are as in mcptask.ToolOptions.
	MaxConcurrent int
	Queue         string
	MaxTTL        time.Duration
	// LogTail is how many bytes of output are kept in memory (the text of
	// a result); zero means DefaultLogTail.
	LogTail int
	// LogDir, if set, receives the whole output of each run as
	// LogDir/ID.log (ID the task's, or "call-..." for a call answered
	// synchronously), mode 0600.
	LogDir string
	// Progress, if set, picks status messages from the output: a line
	// that matches sets the status message to the first group, or the
	// whole line without one.
	Progress *regexp.Regexp
	// Secrets are values (say those of Env.Set read from secret files)
	// never to show: in the command's output (its log, result, status
	// messages, input requests) and its result file, each is replaced by
	// "[redacted]" before anything is stored or sent. Values shorter
	// than 4 bytes (spaces aside) are ignored.
	Secrets []string
}

// Env is a command's environment: nothing of the program's but the
// variables Allow names (those that are set), then Set. PATH is
// DefaultPath unless allowed or set. ResultEnv and TaskIDEnv are always
// set.
type Env struct {
	Allow []string
	Set   map[string]string
}

// Defaults and names of the package.
const (
	// DefaultRestartGrace is the default of Tool.RestartGrace.
	DefaultRestartGrace = 5 * time.Minute
	// MaxDetachedOutput bounds each output stream a command of
	// SurvivesRestart keeps in its run's directory; beyond it, the output
	// is dropped (and said so, once).
	MaxDetachedOutput = 64 << 20
	// DefaultKillGrace is the default of Tool.KillGrace.
	DefaultKillGrace = 10 * time.Second
	// DefaultLogTail is the default of Tool.LogTail.
	DefaultLogTail = 64 << 10
	// DefaultPath is a command's PATH when its Env neither allows nor
	// sets one.
	DefaultPath = "/usr/local/bin:/usr/bin:/bin"
	// StatusInterval is the least time between two status messages
	// written for progress lines (each a durable write); the latest line
	// is the one written.
	StatusInterval = 250 * time.Millisecond
	// InputPrefix starts the line a command writes to its standard
	// output to ask for input: the prefix, then an elicitation's params
	// in JSON ({"message": ..., "requestedSchema": {...}}).
	InputPrefix = "::mcptask-input::"
	// ResultEnv names the file a command may write its result to (see
	// the package doc): a JSON object, either CallToolResult-shaped
	// (with "content", "structuredContent" or "isError"), or any object,
	// which becomes the structured content. Read after exit status 0
	// only, at most MaxResultFile bytes.
	ResultEnv = "MCPTASK_RESULT"
	// TaskIDEnv holds the task's ID (empty for a synchronous call).
	TaskIDEnv = "MCPTASK_TASK_ID"
	// MaxResultFile bounds the result file a command writes.
	MaxResultFile = 4 << 20
)

// maxLine is the longest output line parsed (for input requests and
// progress); longer lines go to the log only.
const maxLine = 64 << 10

// outputDrain bounds the wait for a command's output to end once the
// command and its group are gone: a process that left the group may hold
// the pipes open.
const outputDrain = 5 * time.Second

// Commands are the command tools of a server: a tool source (Register,
// Health, Close), made by [New].
type Commands struct {
	log     *slog.Logger
	tools   []Tool // as given to New
	mu      sync.Mutex
	running map[*proc]struct{}
	closed  bool
	calls   atomic.Int64
}

// tool is a registered Tool, ready to run.
type tool struct {
	Tool
	program  string
	tmpl     template
	defaults map[string]json.RawMessage
	secrets  secrets.Set // of Tool.Secrets
}

// New returns the command tools of tools; it checks and adds them in
// Register. log receives their records (nil: slog.Default()).
func New(tools []Tool, log *slog.Logger) *Commands {
	if log == nil {
		log = slog.Default()
	}
	return &Commands{log: log, tools: tools, running: map[*proc]struct{}{}}
}

// Register checks the tools and adds them to ts, which must not have
// started (see mcptask.Server.AddRawTool). A name already taken, an empty
// Argv, a placeholder that names no property of the input schema, a
// program that cannot be found: an error, and no tool is added. The
// program must call Supervise at the start of main. Register is called
// once.
//
// A command's parent is the program's supervisor, whose environment is
// empty but for its mode (see Supervise); on Linux, Register also makes
// the program non-dumpable
// (PR_SET_DUMPABLE 0, which turns its core dumps off), so that a command
// running as the same user, unless root, cannot read the program's
// environment or memory through /proc/PID (environ, mem) nor ptrace it.
func (c *Commands) Register(_ context.Context, ts *mcptask.Server) error {
	log := c.log
	var ready []*tool
	seen := map[string]bool{}
	for _, t := range c.tools {
		rt, err := prepare(t)
		if err != nil {
			return err
		}
		if seen[t.Name] || ts.HasTool(t.Name) {
			return fmt.Errorf("commands: %s: a tool of that name exists already", t.Name)
		}
		seen[t.Name] = true
		ready = append(ready, rt)
	}
	if len(ready) > 0 && !supervisorReady.Load() {
		return errors.New("commands: the program must call command.Supervise at the start of main: its commands run under a copy of it")
	}
	if len(ready) > 0 {
		undumpable()
		// The directories of runs whose program was killed (kill -9)
		// before it could remove them.
		if n, err := sweepRunDirs(); err != nil {
			log.Warn("cannot remove the directories of dead runs", "err", err)
		} else if n > 0 {
			log.Info("removed the directories of dead runs", "count", n)
		}
		sweepDetachedRuns()
	}
	for _, t := range ready {
		schema := t.InputSchema
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		opts := mcptask.ToolOptions{Support: t.Support, Rerunnable: t.Rerunnable, MaxConcurrent: t.MaxConcurrent, Queue: t.Queue, MaxTTL: t.MaxTTL}
		if t.SurvivesRestart {
			// The run's directory is recorded before the client is
			// answered; a re-run finds it and re-attaches.
			opts.Reattach, opts.AwaitExternalRef = true, detachedStartWait
		}
		ts.AddRawTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: schema}, c.handler(t), opts)
		log.Info("command tool registered", "tool", t.Name, "program", t.program, "task", opts.Support, "rerunnable", t.Rerunnable,
			"timeout", t.Timeout, "maxConcurrent", t.MaxConcurrent)
	}
	return nil
}

// Health is nil: a command tool depends on no service that can be down
// (each call starts its own process).
func (c *Commands) Health() map[string]error { return nil }

// Check reports what is wrong with t, nil if nothing: what Register
// checks, but the program's name taken.
func Check(t Tool) error {
	_, err := prepare(t)
	return err
}

func prepare(t Tool) (*tool, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("commands: %s: %s", t.Name, fmt.Sprintf(format, args...))
	}
	if t.Name == "" {
		return nil, errors.New("commands: a tool needs a name")
	}
	if len(t.Argv) == 0 || t.Argv[0] == "" {
		return nil, bad("argv is empty: it needs at least the program")
	}
	switch t.Support {
	case "":
		t.Support = mcptask.Optional
	case mcptask.Optional, mcptask.Required, mcptask.Forbidden:
	default:
		return nil, bad("task support %q: want optional, required or forbidden", t.Support)
	}
	if t.Timeout < 0 || t.KillGrace < 0 || t.LogTail < 0 || t.MaxConcurrent < 0 || t.MaxTTL < 0 {
		return nil, bad("timeout, killGrace, log tail, maxConcurrent and maxTtl must not be negative")
	}
	if t.KillGrace == 0 {
		t.KillGrace = DefaultKillGrace
	}
	if t.RestartGrace < 0 {
		return nil, bad("restartGrace must not be negative")
	}
	if t.RestartGrace == 0 {
		t.RestartGrace = DefaultRestartGrace
	}
	if t.SurvivesRestart && !detachedSupported {
		return nil, bad("survivesRestart is supported on Linux only")
	}
	if t.LogTail == 0 {
		t.LogTail = DefaultLogTail
	}
	rt := &tool{Tool: t, tmpl: parseTemplate(t.Argv), defaults: map[string]json.RawMessage{}}
	for _, v := range t.Secrets {
		rt.secrets.Add(v)
	}
	if len(Placeholders(t.Argv[:1])) > 0 {
		return nil, bad("argv[0] (the program) must not hold a placeholder: an argument never chooses the program")
	}
	props, err := schemaProperties(t.InputSchema)
	if err != nil {
		return nil, bad("inputSchema: %v", err)
	}
	for _, name := range Placeholders(t.Argv) {
		p, ok := props[name]
		if !ok {
			return nil, bad("argv: {%s} names no property of the input schema (its properties: %s)", name, strings.Join(slices.Sorted(mapsKeys(props)), ", "))
		}
		if pm, ok := p.(map[string]any); ok {
			if d, ok := pm["default"]; ok && d != nil {
				b, err := json.Marshal(d)
				if err != nil {
					return nil, bad("inputSchema: the default of %s: %v", name, err)
				}
				rt.defaults[name] = b
			}
		}
	}
	prog := t.Argv[0]
	if !strings.Contains(prog, "/") {
		if prog, err = exec.LookPath(prog); err != nil {
			return nil, bad("program %q: not found in PATH", t.Argv[0])
		}
	}
	if prog, err = filepath.Abs(prog); err != nil {
		return nil, bad("program %q: %v", t.Argv[0], err)
	}
	if fi, err := os.Stat(prog); err != nil {
		return nil, bad("program %s: %v", prog, errors.Unwrap(err))
	} else if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return nil, bad("program %s is not an executable file", prog)
	}
	rt.program = prog
	if t.Dir != "" {
		if fi, err := os.Stat(t.Dir); err != nil || !fi.IsDir() {
			return nil, bad("working directory %s is not a directory", t.Dir)
		}
	}
	if t.LogDir != "" {
		if err := os.MkdirAll(t.LogDir, 0o700); err != nil {
			return nil, bad("log directory: %v", err)
		}
	}
	return rt, nil
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// schemaProperties returns the properties of an object schema.
func schemaProperties(s map[string]any) (map[string]any, error) {
	if s == nil {
		return map[string]any{}, nil
	}
	if ty, ok := s["type"]; ok && ty != "object" {
		return nil, fmt.Errorf("type %v: want an object schema", ty)
	} else if !ok {
		return nil, errors.New(`want "type": "object"`)
	}
	switch p := s["properties"].(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return p, nil
	default:
		return nil, errors.New("properties: want an object")
	}
}

// Close kills what commands still run (their handlers normally stopped
// them already: the server's Close cancels them first).
func (c *Commands) Close() error {
	c.mu.Lock()
	c.closed = true
	for p := range c.running {
		p.signal('K')
	}
	c.mu.Unlock()
	return nil
}

func (c *Commands) track(p *proc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.running[p] = struct{}{}
	return true
}

func (c *Commands) untrack(p *proc) {
	c.mu.Lock()
	delete(c.running, p)
	c.mu.Unlock()
}

// handler is the work of a command tool.
func (c *Commands) handler(t *tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args map[string]json.RawMessage
		if req.Params != nil && len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return toolError("the arguments are not a JSON object: %v (the command was not run)", err), nil
			}
		}
		argv, err := t.tmpl.fill(args, t.defaults)
		if err != nil {
			return toolError("%v", err), nil
		}
		argv[0] = t.program
		if tk := mcptask.FromContext(ctx); tk != nil && t.SurvivesRestart {
			return c.runDetached(ctx, t, argv, tk)
		}
		return c.run(ctx, t, argv)
	}
}

func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

func internalError(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(format, args...)}
}

var errTimeout = errors.New("the command timed out")

// run runs argv as t's command and makes its outcome the call's.
func (c *Commands) run(ctx context.Context, t *tool, argv []string) (*mcp.CallToolResult, error) {
	tk := mcptask.FromContext(ctx)
	id := ""
	if tk != nil {
		id = tk.ID()
	}
	logName := id
	if logName == "" {
		logName = fmt.Sprintf("call-%d-%d", time.Now().UnixNano(), c.calls.Add(1))
	}
	tmp, removeTmp, err := newRunDir()
	if err != nil {
		return nil, internalError("command %s: %v", t.Name, err)
	}
	defer removeTmp()
	resultPath := filepath.Join(tmp, "result.json")
	var file *os.File
	if t.LogDir != "" {
		if file, err = os.OpenFile(filepath.Join(t.LogDir, safeName(logName)+".log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err != nil {
			c.log.Warn("cannot open the command's log file; its output is kept in memory only", "tool", t.Name, "task", id, "err", err)
			file = nil
		}
	}
	lg := newTaskLog(t.LogTail, file)
	defer func() {
		if err := lg.closeFile(); err != nil {
			c.log.Warn("writing the command's log file failed", "tool", t.Name, "task", id, "err", err)
		}
	}()

	runCtx := ctx
	if t.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeoutCause(ctx, t.Timeout, errTimeout)
		defer cancel()
	}
	start := time.Now()
	p, err := startProc(argv, t.environ(resultPath, id), t.Dir)
	if err != nil {
		return nil, internalError("command %s could not start: %v", t.Name, err)
	}
	if !c.track(p) {
		p.signal('K')
	}
	defer c.untrack(p)

	// ioCtx ends the wait for an answer once the command is gone.
	ioCtx, stopIO := context.WithCancel(ctx)
	defer stopIO()
	sw := newStatusWriter(ctx, tk, c.log)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.readOutput(ioCtx, t, p.stdin, p.stdout, lg, sw, tk, true) }()
	go func() { defer wg.Done(); c.readOutput(ioCtx, t, p.stdin, p.stderr, lg, sw, tk, false) }()

	var es exitStatus
	select {
	case es = <-p.done:
	case <-runCtx.Done():
		es = stopGroup(p.signal, p.done, t.KillGrace)
	}
	stopIO()
	p.release()
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(outputDrain):
		// A process that left the command's group holds its output
		// open: stop reading it.
		p.stdout.Close()
		p.stderr.Close()
		<-drained
		fmt.Fprintf(lg, "\n[mcptask: the output was still open %v after the command ended (a process that left its process group?); not read further]\n", outputDrain)
	}
	p.stdout.Close()
	p.stderr.Close()
	sw.close(ctx.Err() == nil && es.err == nil)

	c.log.Info("command ended", "tool", t.Name, "task", id, "pid", p.pid.Load(), "exitCode", es.code, "signal", int(es.signal),
		"err", es.err, "duration", time.Since(start).Round(time.Millisecond), "outputBytes", lg.total)
	return c.outcome(ctx, runCtx, t, es, lg, resultPath, logName)
}

// stopGroup asks for SIGTERM of a command's group, SIGKILL after grace,
// and returns how the command ended.
func stopGroup(signal func(byte), done <-chan exitStatus, grace time.Duration) exitStatus {
	signal('T')
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case es := <-done:
		return es
	case <-timer.C:
		signal('K')
		return <-done
	}
}

// outcome is the call's outcome of a command that ended with es (ctx the
// call's, runCtx with the tool's timeout).
func (c *Commands) outcome(ctx, runCtx context.Context, t *tool, es exitStatus, lg *taskLog, resultPath, logName string) (*mcp.CallToolResult, error) {
	tail, dropped := lg.tail()
	switch {
	case ctx.Err() != nil: // cancelled, or the server stops
		return nil, context.Cause(ctx)
	case runCtx.Err() != nil:
		return nil, internalError("command %s timed out after %v: its process group got SIGTERM (SIGKILL after %v)%s",
			t.Name, t.Timeout, t.KillGrace, lastBytes(tail, 1024))
	case es.err != nil:
		return nil, internalError("command %s: %v", t.Name, es.err)
	case es.signal != 0:
		res := toolError("%s was killed by signal %d (%v)\n%s", t.Name, int(es.signal), es.signal, t.tailText(tail, dropped, logName))
		res.StructuredContent = map[string]any{"signal": int(es.signal), "signalName": es.signal.String()}
		return res, nil
	case es.code != 0:
		res := toolError("%s exited with code %d\n%s", t.Name, es.code, t.tailText(tail, dropped, logName))
		res.StructuredContent = map[string]any{"exitCode": es.code}
		return res, nil
	}
	res, err := readResult(resultPath)
	t.secrets.Result(res)
	if err != nil {
		return toolError("%s exited with code 0, but its result file ($%s) is not valid: %v\n%s", t.Name, ResultEnv, err, t.tailText(tail, dropped, logName)), nil
	}
	if res != nil {
		return res, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t.tailText(tail, dropped, logName)}}}, nil
}

// tailText is the log's tail as a result's text, saying what it lacks.
func (t *tool) tailText(tail string, dropped int64, logName string) string {
	if dropped == 0 {
		return tail
	}
	where := ""
	if t.LogDir != "" {
		where = "; the whole output is in " + filepath.Join(t.LogDir, safeName(logName)+".log")
	}
	return fmt.Sprintf("[the first %d bytes of output are not shown%s]\n%s", dropped, where, tail)
}

func lastBytes(s string, n int) string {
	if s == "" {
		return ""
	}
	if len(s) > n {
		s = "..." + strings.ToValidUTF8(s[len(s)-n:], "")
	}
	return "; last output:\n" + s
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

func safeName(s string) string { return unsafeChars.ReplaceAllString(s, "_") }

// environ is the command's environment.
func (t *tool) environ(resultPath, taskID string) []string {
	env := map[string]string{}
	for _, name := range t.Env.Allow {
		if v, ok := os.LookupEnv(name); ok {
			env[name] = v
		}
	}
	for k, v := range t.Env.Set {
		env[k] = v
	}
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = DefaultPath
	}
	env[ResultEnv] = resultPath
	env[TaskIDEnv] = taskID
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range env {
			if !yield(k) {
				return
			}
		}
	}) {
		out = append(out, k+"="+env[k])
	}
	return out
}
