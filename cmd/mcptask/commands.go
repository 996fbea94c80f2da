package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callFlags are the flags of 'mcptask call'.
type callFlags struct {
	args              string
	detach            bool
	cancelOnInterrupt bool
}

// listFlags are the flags of 'mcptask list'.
type listFlags struct {
	server bool
}

// commandState holds the flags of the command being run.
type commandState struct {
	call    callFlags
	list    listFlags
	answers answerFlags
}

// startView creates the status display for the waits of this command.
func (a *app) startView() {
	mode := viewPlain
	switch {
	case a.stderrTTY:
		mode = viewLive
	case a.g.json:
		mode = viewQuiet
	}
	a.view = newStatusView(a.stderr, mode, a.width)
}

// stopView stops the status display; later notes go straight to stderr.
func (a *app) stopView() {
	if a.view != nil {
		a.view.Close()
	}
}

// setAnswers reads --answer and --answers. When --answers - used up
// standard input, the command asks nothing on the terminal.
func (a *app) setAnswers() error {
	ans, err := a.cmd.answers.build(a.stdin)
	if err != nil {
		return err
	}
	a.answers = ans
	if a.cmd.answers.file == "-" {
		a.stdinTTY = false
	}
	return nil
}

// logWriter sends log lines to stderr above the status line.
type logWriter struct{ a *app }

func (w logWriter) Write(p []byte) (int, error) {
	w.a.notef("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// connect connects to target (a URL, or "stdio:COMMAND") on the given wire
// ("" for the newest).
func (a *app) connect(ctx context.Context, target, wire string) (*client.Client, error) {
	opts := &client.Options{
		ClientInfo:      &mcp.Implementation{Name: "mcptask-cli", Version: version()},
		ProtocolVersion: wire,
		Elicit:          a.elicit,
		TTL:             a.ttl,
	}
	if a.g.verbose {
		opts.Logger = slog.New(slog.NewTextHandler(logWriter{a}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if j := a.g.journalPath(); j != "" {
		if err := os.MkdirAll(filepath.Dir(j), 0o700); err != nil {
			return nil, fmt.Errorf("creating the journal's directory: %w", err)
		}
		opts.Journal = j
	}
	type dialed struct {
		c   *client.Client
		err error
	}
	done := make(chan dialed, 1)
	go func() {
		var d dialed
		if command, ok := strings.CutPrefix(target, "stdio:"); ok {
			argv, err := splitCommand(command)
			if err != nil {
				done <- dialed{err: err}
				return
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			if a.g.verbose {
				cmd.Stderr = logWriter{a}
			}
			d.c, d.err = client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, target, opts)
		} else {
			d.c, d.err = client.Dial(ctx, target, opts)
		}
		done <- d
	}()
	timer := time.NewTimer(connectTimeout)
	defer timer.Stop()
	select {
	case d := <-done:
		if d.err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			hint := ""
			if unreachable(d.err) {
				hint = a.startHint(target)
			}
			if strings.Contains(d.err.Error(), target) {
				return nil, fmt.Errorf("%w%s", d.err, hint)
			}
			return nil, fmt.Errorf("connecting to %s: %w%s", target, d.err, hint)
		}
		return d.c, nil
	case <-timer.C:
		return nil, fmt.Errorf("cannot connect to %s: no answer within %v%s", target, connectTimeout, a.startHint(target))
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// unreachable reports whether err says that nothing answered at the
// server's address.
func unreachable(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"connection refused", "no such host", "dial tcp", "i/o timeout", "connection reset"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// startHint tells a newcomer how to get a server at target.
func (a *app) startHint(target string) string {
	if strings.HasPrefix(target, "stdio:") {
		return ""
	}
	return "\nmcptask: is the server running? Start the demo server with 'mcptaskd', or point mcptask " +
		"at yours with --url URL or " + envURL + "=URL."
}

// requestContext bounds a one-shot request.
func requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, requestTimeout)
}

// waitTask waits for a task, showing its status, until it ends or the
// deadline (zero: none) passes.
func (a *app) waitTask(ctx context.Context, c *client.Client, id string, deadline time.Time) (*mcp.CallToolResult, error) {
	opts := &client.WaitOptions{OnStatus: a.view.Update}
	if !deadline.IsZero() {
		opts.Deadline = max(time.Until(deadline), time.Millisecond)
	}
	return c.Wait(ctx, id, opts)
}

// waitOutcome waits for the task id of tool (see waitTask) and returns
// how it ended.
func (a *app) waitOutcome(ctx context.Context, c *client.Client, id, tool string, deadline time.Time) *outcome {
	res, err := a.waitTask(ctx, c, id, deadline)
	return &outcome{taskID: id, tool: tool, result: res, err: err, last: a.view.Last(id)}
}

// deadline returns when --timeout ends the wait, or zero.
func (a *app) deadline() time.Time {
	if a.g.timeout > 0 {
		return time.Now().Add(a.g.timeout)
	}
	return time.Time{}
}

// startWait begins a command that waits for tasks of the server: it
// returns when --timeout ends the wait (see deadline), starts the status
// display and connects. The caller stops the display (stopView).
func (a *app) startWait(ctx context.Context) (time.Time, *client.Client, error) {
	deadline := a.deadline()
	a.startView()
	a.view.SetLabel("connecting")
	c, err := a.connect(ctx, a.g.target(), a.g.wire)
	return deadline, c, err
}

// finish stops the status display and reports an outcome.
func (a *app) finish(ctx context.Context, o *outcome) int {
	a.stopView()
	return a.report(ctx, o)
}

// journalTool returns the tool of a task from the journal, if it is there.
func journalTool(c *client.Client, id string) string {
	entries, err := c.Pending()
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if e.TaskID == id {
			return e.Tool
		}
	}
	return ""
}

var cmdCall = &command{
	name:     "call",
	synopsis: "TOOL [key=value | key:=json | '{json object}' ...]",
	summary:  "call a tool and print its result (waiting for its task with a live status line)",
	help: `
Calls the tool TOOL with the given arguments. When the server runs the call as
a task, mcptask records the task in the journal, shows its status while it
runs (a live line on a terminal; one line per change otherwise; nothing with
--json) and prints the result when it ends. If the task asks a question
(input_required), mcptask asks it on the terminal; without a terminal it
declines, unless --answer or --answers give the answers.

Arguments:
  key=value        the value is JSON if it reads as JSON (10, true, null,
                   [1,2], {"a":1}, "quoted text"), else text; a property the
                   tool's schema types as a string always gets the text
  key:=json        the value must be JSON
  '{"k": 1}'       a JSON object of arguments
  --args JSON      a JSON object of arguments; --args @file.json reads a file,
                   --args - reads standard input; key=value pairs override it

Ctrl-C stops waiting, not the task: it keeps running on the server, and
'mcptask wait ID' or 'mcptask resume' picks it up (--cancel-on-interrupt
cancels it instead). --timeout bounds the wait (exit 6).

Examples:
  mcptask call long_computation n=1000000 steps=10
  mcptask call echo text='hello world'
  mcptask call lint_report --args @request.json
  mcptask call --detach long_computation steps=100
  mcptask call deploy_with_confirmation service=api --answer confirm=true`,
	flags: func(a *app, fs *flag.FlagSet) {
		fs.StringVar(&a.cmd.call.args, "args", "", "the arguments as a JSON object; @`file` reads them from a file, - from standard input")
		fs.BoolVar(&a.cmd.call.detach, "detach", false, "print the task's ID as soon as the server created it and exit (wait for it later with 'mcptask wait ID' or 'mcptask resume')")
		fs.DurationVar(&a.ttl, "ttl", 0, "how long the server should keep the task and its result (2025-11-25 wire; default: the server's choice)")
		fs.BoolVar(&a.cmd.call.cancelOnInterrupt, "cancel-on-interrupt", false, "on Ctrl-C, cancel the task instead of leaving it running")
		a.cmd.answers.define(fs)
	},
	run: runCall,
}

func runCall(a *app, ctx context.Context, pos []string) int {
	if len(pos) == 0 {
		return a.usage(usagef("which tool? Give its name: mcptask call TOOL [key=value ...] ('mcptask tools' lists them)"))
	}
	tool := pos[0]
	ta, err := parseToolArgs(a.cmd.call.args, a.stdin, pos[1:])
	if err != nil {
		return a.usage(err)
	}
	if err := a.setAnswers(); err != nil {
		return a.usage(err)
	}
	if a.cmd.call.args == "-" || a.cmd.call.args == "@-" {
		a.stdinTTY = false // standard input is used up: no prompts
	}
	deadline, c, err := a.startWait(ctx)
	defer a.stopView()
	if err != nil {
		return a.finish(ctx, &outcome{tool: tool, err: err})
	}
	defer c.Close()

	var fields []fieldSpec
	if ta.needsSchema() {
		fields = a.toolFields(ctx, c, tool)
	}
	args := ta.build(fields)

	a.view.SetLabel("calling " + tool)
	callCtx := ctx
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithDeadlineCause(ctx, deadline, errWaitDeadline)
		defer cancel()
	}
	call, err := c.CallTool(callCtx, tool, args)
	if err != nil {
		var je *jsonrpc.Error
		switch {
		case ctx.Err() == nil && errors.Is(context.Cause(callCtx), errWaitDeadline):
			err = errWaitDeadline
		case errors.As(err, &je):
			err = &refusedError{err}
		}
		return a.finish(ctx, &outcome{tool: tool, err: err})
	}
	if call.Fallback != "" {
		a.notef("mcptask: note: %s ran as a plain call, not as a task: %s", tool, call.Fallback)
	}
	if call.Task == nil {
		return a.finish(ctx, &outcome{tool: tool, result: call.Result, fallback: call.Fallback})
	}

	id := call.Task.ID
	if a.cmd.call.detach {
		a.stopView()
		if a.g.json {
			j := jsonStatusOf(call.Task)
			j.Tool, j.Target = tool, a.g.target()
			a.printJSON(j)
		} else {
			fmt.Fprintln(a.stdout, id)
			fmt.Fprintf(a.stderr, "mcptask: task %s (%s) is %s.\nmcptask: wait for it with: %s wait %s\n",
				id, tool, call.Task.Status, a.selfCommand(), id)
			if a.g.journalPath() == "" {
				fmt.Fprintln(a.stderr, "mcptask: the journal is off: note the ID, 'mcptask resume' will not know this task")
			}
		}
		return exitOK
	}
	if a.view.mode != viewQuiet {
		a.notef("mcptask: task %s started (%s); Ctrl-C stops waiting, the task keeps running", id, tool)
	}
	a.view.Update(call.Task)
	o := a.waitOutcome(ctx, c, id, tool, deadline)
	if a.cmd.call.cancelOnInterrupt && o.code(ctx) == exitInterrupted {
		a.stopView()
		cctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		st, cerr := c.Cancel(cctx, id)
		if cerr != nil {
			a.errorf("interrupted; cancelling task %s failed: %v", id, cerr)
			return a.report(ctx, o)
		}
		if a.g.json {
			o.err = client.ErrCancelled
			return a.report(ctx, o)
		}
		a.errorf("interrupted; task %s is %s", id, st.Status)
		return exitCancelled
	}
	return a.finish(ctx, o)
}

// toolFields returns the input schema properties of a tool, or nil when
// they cannot be had.
func (a *app) toolFields(ctx context.Context, c *client.Client, name string) []fieldSpec {
	rctx, cancel := requestContext(ctx)
	defer cancel()
	tools, err := c.Tools(rctx)
	if err != nil {
		return nil
	}
	for _, t := range tools {
		if t.Tool != nil && t.Name == name {
			fields, _ := parseSchema(t.InputSchema)
			return fields
		}
	}
	return nil
}

var cmdWait = &command{
	name:     "wait",
	synopsis: "TASK_ID",
	summary:  "wait for a task and print its result",
	help: `
Waits for the task TASK_ID to end, showing its status, and prints its result,
exactly as 'mcptask call' does after creating a task. Use it after
'mcptask call --detach', a --timeout or a Ctrl-C. The task need not be in the
journal, but must be on this server (--url or --stdio).`,
	flags: func(a *app, fs *flag.FlagSet) { a.cmd.answers.define(fs) },
	run: func(a *app, ctx context.Context, pos []string) int {
		if len(pos) != 1 {
			return a.usage(usagef("give one task ID: mcptask wait TASK_ID"))
		}
		if err := a.setAnswers(); err != nil {
			return a.usage(err)
		}
		id := pos[0]
		deadline, c, err := a.startWait(ctx)
		defer a.stopView()
		if err != nil {
			return a.finish(ctx, &outcome{taskID: id, err: err})
		}
		defer c.Close()
		tool := journalTool(c, id)
		a.view.SetLabel("waiting for task " + shortID(id))
		return a.finish(ctx, a.waitOutcome(ctx, c, id, tool, deadline))
	},
}

var cmdStatus = &command{
	name:     "status",
	synopsis: "TASK_ID ...",
	summary:  "show the status of tasks",
	help: `
Shows the current status of each task: working, input_required, completed,
failed or cancelled, with its status message and times. It does not wait
and does not fetch the result ('mcptask wait ID' does). With --json it
prints a JSON object (an array for several IDs). Exits 0 when the server
knows every task, 4 otherwise.`,
	run: func(a *app, ctx context.Context, pos []string) int {
		if len(pos) == 0 {
			return a.usage(usagef("give a task ID: mcptask status TASK_ID ('mcptask list' shows the tasks in flight)"))
		}
		return a.eachTask(ctx, pos, (*client.Client).Get, func(c *client.Client, i int, id string, s *client.TaskStatus) *jsonStatus {
			tool := journalTool(c, id)
			if a.g.json {
				j := jsonStatusOf(s)
				j.Tool = tool
				return &j
			}
			if i > 0 {
				fmt.Fprintln(a.stdout)
			}
			printStatus(a.stdout, s, tool)
			return nil
		})
	},
}

var cmdCancel = &command{
	name:     "cancel",
	synopsis: "TASK_ID ...",
	summary:  "cancel tasks",
	help: `
Asks the server to cancel each task and prints its status after. A waiter
('mcptask call' or 'mcptask wait' elsewhere) then exits 3. Cancelling a task
that has already ended changes nothing and is not an error. Exits 0 when
every task is cancelled or had ended, 4 when the server is unreachable or
does not know a task.`,
	run: func(a *app, ctx context.Context, pos []string) int {
		if len(pos) == 0 {
			return a.usage(usagef("give a task ID: mcptask cancel TASK_ID"))
		}
		// Cancel reports an already ended task as its status, on both
		// wires (the client tells that case apart on 2025-11-25).
		return a.eachTask(ctx, pos, (*client.Client).Cancel, func(_ *client.Client, _ int, id string, s *client.TaskStatus) *jsonStatus {
			if a.g.json {
				j := jsonStatusOf(s)
				return &j
			}
			switch {
			case s.Status == "cancelled":
				fmt.Fprintf(a.stdout, "task %s: cancelled\n", id)
			case s.Terminal():
				fmt.Fprintf(a.stdout, "task %s: had already ended (%s); nothing to cancel\n", id, s.Status)
			default:
				fmt.Fprintf(a.stdout, "task %s: %s (cancellation requested)\n", id, s.Status)
			}
			return nil
		})
	},
}

// eachTask sends one request per task ID (Get or Cancel) over one
// connection and reports each answer with show: the i-th ID's status as
// JSON to print with --json, else printed by show itself (nil). A failed
// request is reported as an unknown status. With --json it prints one
// object for one ID, an array for several. It returns the largest exit
// code of the requests.
func (a *app) eachTask(ctx context.Context, ids []string,
	request func(*client.Client, context.Context, string) (*client.TaskStatus, error),
	show func(c *client.Client, i int, id string, s *client.TaskStatus) *jsonStatus) int {
	c, err := a.connect(ctx, a.g.target(), a.g.wire)
	if err != nil {
		return a.report(ctx, &outcome{err: err})
	}
	defer c.Close()
	code := exitOK
	var out []jsonStatus
	for i, id := range ids {
		rctx, cancel := requestContext(ctx)
		s, err := request(c, rctx, id)
		cancel()
		if err != nil {
			code = max(code, exitCodeOf(ctx, err))
			if a.g.json {
				out = append(out, jsonStatus{TaskID: id, Status: "unknown", Error: err.Error()})
			} else {
				a.printHuman(&outcome{taskID: id, err: err}, exitCodeOf(ctx, err))
			}
			continue
		}
		if j := show(c, i, id, s); j != nil {
			out = append(out, *j)
		}
	}
	if a.g.json {
		printJSONEach(a, ids, out)
	}
	return code
}

// printJSONEach prints the JSON values of the names asked for: the value
// alone when one name was asked for, else an array.
func printJSONEach[T any](a *app, asked []string, out []T) {
	if len(asked) == 1 {
		a.printJSON(out[0])
	} else {
		a.printJSON(out)
	}
}

var cmdList = &command{
	name:     "list",
	synopsis: "",
	summary:  "list the tasks in flight (from the journal) with their status",
	help: `
Lists the tasks of the journal that have not been waited to the end, with
their current status on the server. Without --url or --stdio it covers every
server the journal names (else only the given one).

--server lists the tasks the server reports instead (tasks/list, a 2025-11-25
wire method; mcptask switches to that wire). A server without authentication,
such as mcptaskd, shows a client only the tasks of its own session, so this
is mostly empty for a new mcptask process: the journal is mcptask's memory.`,
	flags: func(a *app, fs *flag.FlagSet) {
		fs.BoolVar(&a.cmd.list.server, "server", false, "list the server's tasks (tasks/list) instead of the journal's")
	},
	run: runList,
}

// listRow is one task of 'mcptask list'.
type listRow struct {
	status jsonStatus
	age    time.Time
}

func runList(a *app, ctx context.Context, pos []string) int {
	if len(pos) > 0 {
		return a.usage(usagef("list takes no arguments"))
	}
	if a.cmd.list.server {
		return listServer(a, ctx)
	}
	var rows []listRow
	code := exitOK
	targets, skipped := a.targets()
	for _, target := range targets {
		c, err := a.connect(ctx, target, a.g.wire)
		if err != nil {
			a.errorf("%v", err)
			code = max(code, exitCodeOf(ctx, err))
			continue
		}
		entries, err := c.Pending()
		if err != nil {
			a.errorf("reading the journal: %v", err)
			code = max(code, exitConnection)
		}
		for _, e := range entries {
			rctx, cancel := requestContext(ctx)
			s, err := c.Get(rctx, e.TaskID)
			cancel()
			var j jsonStatus
			if err != nil {
				j = jsonStatus{TaskID: e.TaskID, Status: "unknown", Error: err.Error()}
				if errors.Is(err, client.ErrTaskNotFound) {
					j.Status = "not found"
				}
			} else {
				j = jsonStatusOf(s)
			}
			j.Tool, j.Target = e.Tool, e.Target
			rows = append(rows, listRow{status: j, age: e.CreatedAt})
		}
		c.Close()
	}
	a.noteSkipped(skipped)
	if a.g.json {
		printRowsJSON(a, rows)
		return code
	}
	if len(rows) == 0 {
		where := "the journal"
		if j := a.g.journalPath(); j != "" {
			where += " (" + j + ")"
		} else {
			where += " (off)"
		}
		fmt.Fprintf(a.stderr, "mcptask: no tasks in flight in %s\n", where)
		return code
	}
	printRows(a, rows, len(targets) > 1)
	return code
}

func printRows(a *app, rows []listRow, withTarget bool) {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	header := "TASK ID\tSTATUS\tTOOL\tAGE\tMESSAGE"
	if withTarget {
		header += "\tSERVER"
	}
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		age := "-"
		if !r.age.IsZero() {
			age = formatElapsed(time.Since(r.age))
		} else if r.status.CreatedAt != nil {
			age = formatElapsed(time.Since(*r.status.CreatedAt))
		}
		msg := oneLine(r.status.StatusMessage)
		if r.status.Error != "" && msg == "" {
			msg = r.status.Error
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", r.status.TaskID, r.status.Status, orDash(r.status.Tool), age, msg)
		if withTarget {
			line += "\t" + r.status.Target
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

// printRowsJSON prints the statuses of rows as a JSON array.
func printRowsJSON(a *app, rows []listRow) {
	out := []jsonStatus{}
	for _, r := range rows {
		out = append(out, r.status)
	}
	a.printJSON(out)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// listServer lists the server's own tasks (tasks/list).
func listServer(a *app, ctx context.Context) int {
	wire := a.g.wire
	if wire == "" {
		wire = client.Wire20251125 // the only wire with tasks/list
	}
	c, err := a.connect(ctx, a.g.target(), wire)
	if err != nil {
		return a.report(ctx, &outcome{err: err})
	}
	defer c.Close()
	var rows []listRow
	cursor := ""
	for {
		rctx, cancel := requestContext(ctx)
		page, next, err := c.List(rctx, cursor)
		cancel()
		if err != nil {
			if errors.Is(err, client.ErrUnsupported) {
				a.errorf("this server or wire (%s) does not list tasks (tasks/list is a 2025-11-25 method)", c.Wire())
			} else {
				a.errorf("listing tasks: %v", err)
			}
			return exitConnection
		}
		for i := range page {
			rows = append(rows, listRow{status: jsonStatusOf(&page[i])})
		}
		if next == "" || next == cursor {
			break
		}
		cursor = next
	}
	if a.g.json {
		printRowsJSON(a, rows)
		return exitOK
	}
	if len(rows) == 0 {
		fmt.Fprintln(a.stderr, "mcptask: the server lists no tasks for this client")
		return exitOK
	}
	printRows(a, rows, false)
	return exitOK
}

var cmdResume = &command{
	name:     "resume",
	synopsis: "",
	summary:  "wait for every task in the journal and print their results",
	help: `
Picks up every task the journal holds (tasks whose wait was cut short by
Ctrl-C, a crash, --timeout or --detach), waits for them without calling any
tool again, and prints each result. Without --url or --stdio it covers every
server the journal names (else only the given one). Tasks of a --stdio
server are resumed only with that same --stdio command.

Exit code: the largest of the tasks' exit codes (0 when all succeeded, or
when there was nothing to resume). With --json it prints a JSON array with
one object per task.`,
	flags: func(a *app, fs *flag.FlagSet) { a.cmd.answers.define(fs) },
	run:   runResume,
}

func runResume(a *app, ctx context.Context, pos []string) int {
	if len(pos) > 0 {
		return a.usage(usagef("resume takes no arguments (use 'mcptask wait ID' for one task)"))
	}
	if err := a.setAnswers(); err != nil {
		return a.usage(err)
	}
	if a.g.journalPath() == "" {
		return a.usage(usagef("the journal is off (--journal off): there is nothing to resume"))
	}
	deadline := a.deadline()
	a.startView()
	defer a.stopView()
	code := exitOK
	outs := []jsonOutcome{}
	printed := 0
	targets, skipped := a.targets()
	for _, target := range targets {
		if ctx.Err() != nil {
			break
		}
		a.view.SetLabel("connecting")
		c, err := a.connect(ctx, target, a.g.wire)
		if err != nil {
			o := &outcome{err: err}
			code = max(code, o.code(ctx))
			if a.g.json {
				outs = append(outs, a.jsonOf(ctx, o))
			} else {
				a.errorf("%v", err)
			}
			continue
		}
		pending, err := c.Pending()
		if err != nil {
			a.errorf("reading the journal: %v", err)
			code = max(code, exitConnection)
			c.Close()
			continue
		}
		if len(pending) == 0 {
			c.Close()
			continue
		}
		if a.view.mode != viewQuiet {
			var ids []string
			for _, e := range pending {
				ids = append(ids, e.TaskID+" ("+e.Tool+")")
			}
			a.notef("mcptask: resuming %d task(s) on %s: %s", len(pending), target, strings.Join(ids, ", "))
		}
		a.view.SetLabel(fmt.Sprintf("waiting for %d task(s)", len(pending)))
		// Each task is waited for on its own, and its outcome printed as
		// soon as it ends.
		ended := make(chan *outcome)
		for _, e := range pending {
			go func() { ended <- a.waitOutcome(ctx, c, e.TaskID, e.Tool, deadline) }()
		}
		headers := len(pending) > 1 || len(targets) > 1
		for range pending {
			o := <-ended
			oc := o.code(ctx)
			code = max(code, oc)
			if a.g.json {
				outs = append(outs, a.jsonOf(ctx, o))
				continue
			}
			if oc == exitInterrupted {
				continue // said once below
			}
			a.view.Pause()
			if headers {
				if printed > 0 {
					fmt.Fprintln(a.stdout)
				}
				fmt.Fprintf(a.stdout, "== task %s (%s)\n", o.taskID, o.tool)
			}
			a.view.Settle(o.taskID) // its final status, above its outcome
			printed++
			a.printHuman(o, oc)
			a.view.Resume()
		}
		c.Close()
	}
	a.stopView()
	a.noteSkipped(skipped)
	if a.g.json {
		a.printJSON(outs)
	}
	switch {
	case code == exitInterrupted:
		a.notef("mcptask: interrupted; the tasks keep running on the server: run '%s resume' again later", a.selfCommand())
	case code == exitOK && printed == 0 && len(outs) == 0:
		fmt.Fprintf(a.stderr, "mcptask: nothing to resume: the journal (%s) has no tasks in flight\n", a.g.journalPath())
	}
	return code
}

// targets returns the servers 'list' and 'resume' visit: the one the
// command line or environment names, else every server of the journal
// that mcptask can reach by itself (HTTP); none when the journal holds no
// task for them, so that nothing needs a connection. skipped counts the
// journal's tasks of --stdio servers left out, by command.
func (a *app) targets() (targets []string, skipped map[string]int) {
	path := a.g.journalPath()
	if path == "" {
		return []string{a.g.target()}, nil
	}
	entries, err := client.ReadJournal(path)
	if err != nil {
		// Connecting to the named server reports what is wrong with it.
		return []string{a.g.target()}, nil
	}
	if a.g.targetSet {
		if slices.ContainsFunc(entries, func(e client.JournalEntry) bool { return e.Target == a.g.target() }) {
			return []string{a.g.target()}, nil
		}
		return nil, nil
	}
	skipped = map[string]int{}
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Target, "http://") || strings.HasPrefix(e.Target, "https://"):
			if !slices.Contains(targets, e.Target) {
				targets = append(targets, e.Target)
			}
		case e.Target != "":
			skipped[e.Target]++
		}
	}
	return targets, skipped // none when the journal is empty
}

func (a *app) noteSkipped(skipped map[string]int) {
	for target, n := range skipped {
		cmd, ok := strings.CutPrefix(target, "stdio:")
		if ok {
			a.notef("mcptask: the journal holds %d task(s) of a stdio server; resume them with: mcptask --stdio %s resume", n, shellQuote(cmd))
		} else {
			a.notef("mcptask: the journal holds %d task(s) of %s, which mcptask cannot reach by itself", n, target)
		}
	}
}

var cmdTools = &command{
	name:     "tools",
	synopsis: "[TOOL]",
	summary:  "list the server's tools, or describe one and its arguments",
	help: `
Lists the server's tools with whether they run as tasks (on the 2025-11-25
wire, where the server says it: forbidden, optional or required; the
2026-07-28 wire decides per call). With a TOOL name, describes that tool and
its arguments. With --json, prints the tools as the server describes them.`,
	run: runTools,
}

func runTools(a *app, ctx context.Context, pos []string) int {
	if len(pos) > 1 {
		return a.usage(usagef("give at most one tool name"))
	}
	c, err := a.connect(ctx, a.g.target(), a.g.wire)
	if err != nil {
		return a.report(ctx, &outcome{err: err})
	}
	defer c.Close()
	rctx, cancel := requestContext(ctx)
	defer cancel()
	tools, err := c.Tools(rctx)
	if err != nil {
		return a.report(ctx, &outcome{err: fmt.Errorf("listing tools: %w", err)})
	}
	if len(pos) == 1 {
		i := slices.IndexFunc(tools, func(t client.Tool) bool { return t.Tool != nil && t.Name == pos[0] })
		if i < 0 {
			var names []string
			for _, t := range tools {
				if t.Tool != nil {
					names = append(names, t.Name)
				}
			}
			a.errorf("the server has no tool %q; it has: %s", pos[0], strings.Join(names, ", "))
			return exitUsage
		}
		tools = tools[i : i+1]
		if !a.g.json {
			describeTool(a, tools[0])
			return exitOK
		}
	}
	if a.g.json {
		out := []map[string]any{}
		for _, t := range tools {
			m := map[string]any{}
			if t.Tool != nil {
				b, err := json.Marshal(t.Tool)
				if err == nil {
					m, _ = decodeObject(b)
				}
			}
			if t.TaskSupport != "" {
				m["taskSupport"] = t.TaskSupport
			}
			out = append(out, m)
		}
		printJSONEach(a, pos, out)
		return exitOK
	}
	withTasks := slices.ContainsFunc(tools, func(t client.Tool) bool { return t.TaskSupport != "" })
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	if withTasks {
		fmt.Fprintln(tw, "TOOL\tTASKS\tDESCRIPTION")
	} else {
		fmt.Fprintln(tw, "TOOL\tDESCRIPTION")
	}
	for _, t := range tools {
		if t.Tool == nil {
			continue
		}
		desc := firstSentence(t.Description)
		if withTasks {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, orDash(t.TaskSupport), desc)
		} else {
			fmt.Fprintf(tw, "%s\t%s\n", t.Name, desc)
		}
	}
	tw.Flush()
	fmt.Fprintln(a.stderr, "\nmcptask: 'mcptask tools TOOL' describes a tool's arguments; 'mcptask call TOOL key=value ...' calls it")
	return exitOK
}

// describeTool prints a tool's description and arguments.
func describeTool(a *app, t client.Tool) {
	w := a.stdout
	fmt.Fprint(w, t.Name)
	if t.Title != "" {
		fmt.Fprintf(w, " — %s", t.Title)
	}
	fmt.Fprintln(w)
	if t.TaskSupport != "" {
		fmt.Fprintf(w, "Runs as a task: %s\n", t.TaskSupport)
	}
	if t.Description != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, wrap(t.Description, 78, "  "))
	}
	fields, err := parseSchema(t.InputSchema)
	fmt.Fprintln(w, "\nArguments:")
	if err != nil {
		fmt.Fprintf(w, "  (the input schema cannot be read: %v)\n", err)
	} else if len(fields) == 0 {
		fmt.Fprintln(w, "  none")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	example := "mcptask call " + t.Name
	for _, f := range fields {
		var notes []string
		if f.required {
			notes = append(notes, "required")
		}
		if f.hasDef {
			notes = append(notes, fmt.Sprintf("default %v", f.def))
		}
		if len(f.choices) > 0 {
			var cs []string
			for _, c := range f.choices {
				cs = append(cs, fmt.Sprint(c.value))
			}
			notes = append(notes, "one of "+strings.Join(cs, ", "))
		}
		desc := oneLine(f.description)
		if len(notes) > 0 {
			desc = strings.TrimSpace(desc + " [" + strings.Join(notes, "; ") + "]")
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.name, f.typeName(), desc)
		if f.required {
			example += " " + f.name + "=" + strings.ToUpper(f.typeName())
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\nCall it with:\n  %s [key=value ...]\n", example)
}

// firstSentence returns the first sentence of s, cut to 90 characters.
func firstSentence(s string) string {
	s = oneLine(s)
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	if r := []rune(s); len(r) > 90 {
		s = string(r[:89]) + "…"
	}
	return s
}

// wrap wraps text at width columns, each line indented.
func wrap(text string, width int, indent string) string {
	var b strings.Builder
	for pi, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if pi > 0 {
			b.WriteString("\n\n")
		}
		line := indent
		for i, word := range strings.Fields(para) {
			if i > 0 && len(line)+1+len(word) > width {
				b.WriteString(strings.TrimRight(line, " ") + "\n")
				line = indent
			} else if i > 0 {
				line += " "
			}
			line += word
		}
		b.WriteString(line)
	}
	return b.String()
}
