package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// commandState holds the flags of the command being run.
type commandState struct {
	call     callFlags
	list     listFlags
	answers  answerFlags
	admin    adminFlags
	manifest manifestFlags
	ops      opsFlags
	logs     logsFlags
	events   eventsFlags
	// tree is status's --tree: show the tasks each task's work started.
	tree bool
	// noPush is --no-push (call, wait, resume): poll, ignoring the
	// server's task notifications.
	noPush bool
	// waitSampling is --wait-sampling (call, wait, resume): keep waiting
	// for a task that asks for sampling, which a host may answer.
	waitSampling bool
}

// definePush defines --no-push and --wait-sampling, of the commands that
// wait.
func (a *app) definePush(fs *flag.FlagSet) {
	fs.BoolVar(&a.cmd.noPush, "no-push", false, "poll the task instead of following the notifications the server pushes (when it does)")
	fs.BoolVar(&a.cmd.waitSampling, "wait-sampling", false, "keep waiting for a task that asks the client for an LLM completion (sampling), which mcptask cannot answer but a host may; without it, the wait ends (exit 8)")
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

// requestContext bounds a one-shot request.
func requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, requestTimeout)
}

// waitTask waits for a task, showing its status, until it ends or the
// deadline (zero: none) passes.
// A task with children shows them too, a line each time one appears or
// changes (see treeFollower).
func (a *app) waitTask(ctx context.Context, c *client.Client, id string, deadline time.Time) (*mcp.CallToolResult, error) {
	tree := a.followTree(c, id)
	opts := &client.WaitOptions{OnStatus: func(st *client.TaskStatus) {
		a.view.Update(st)
		tree.update(st)
	}}
	if !deadline.IsZero() {
		opts.Deadline = max(time.Until(deadline), time.Millisecond)
	}
	res, err := c.Wait(ctx, id, opts)
	tree.end(ctx)
	return res, err
}

// waitOutcome waits for the task id of tool (see waitTask) and returns
// how it ended.
func (a *app) waitOutcome(ctx context.Context, c *client.Client, id, tool string, deadline time.Time) *outcome {
	return a.waitOutcomeOf(ctx, c, id, tool, deadline, nil)
}

// waitOutcomeOf is waitOutcome that also prints, on stderr, what the task
// emits while it runs (MCP Events): from src when the server linked the
// task to it, else from the task's first output.
func (a *app) waitOutcomeOf(ctx context.Context, c *client.Client, id, tool string, deadline time.Time, src *client.EventSource) *outcome {
	q := client.EventQuery{TaskID: id, Cursor: startCursor}
	if src != nil {
		q = src.Query()
	}
	stop := a.followOutputs(ctx, c, q)
	res, err := a.waitTask(ctx, c, id, deadline)
	stop()
	var unreachable *client.UnreachableError
	if errors.As(err, &unreachable) {
		hint := fmt.Sprintf("'%s wait %s' picks it up later", a.selfCommand(), id)
		if a.g.journalPath() != "" {
			hint = fmt.Sprintf("'%s resume' picks it up later", a.selfCommand())
		}
		err = fmt.Errorf("%w; %s", err, hint)
	}
	o := &outcome{taskID: id, tool: tool, result: res, err: err, last: a.view.Last(id)}
	var te *client.TaskError
	if err == nil || errors.As(err, &te) || errors.Is(err, client.ErrCancelled) {
		// The task ended: read it once more for its domain outcome (the
		// ledger's operation), which may have settled with it.
		gctx, cancel := requestContext(ctx)
		if st, gerr := c.Get(gctx, id); gerr == nil && st.Terminal() {
			o.last = st
			// The final status line, on both wires (a 2025-11-25 result
			// may arrive before any status said the task ended).
			a.view.Update(st)
		}
		cancel()
	}
	return o
}

// unknownOutcome is the error of a call whose answer never came, with what
// to do about it.
func (a *app) unknownOutcome(err *client.OutcomeUnknownError) error {
	if err.Key != "" && err.Journaled {
		return fmt.Errorf("%w\nmcptask: run '%s resume' to finish it; do not call the tool again", err, a.selfCommand())
	}
	return err
}

// resendOutcome finishes a call of the journal whose answer never came,
// then waits for its task.
func (a *app) resendOutcome(ctx context.Context, c *client.Client, e client.JournalEntry, deadline time.Time) *outcome {
	rctx, cancel := requestContext(ctx)
	call, err := c.ResendCall(rctx, e)
	cancel()
	var unknown *client.OutcomeUnknownError
	switch {
	case errors.As(err, &unknown):
		return &outcome{tool: e.Tool, err: a.unknownOutcome(unknown)}
	case err != nil:
		return &outcome{tool: e.Tool, err: &refusedError{err}}
	case call.Task == nil:
		return &outcome{tool: e.Tool, result: call.Result}
	}
	a.view.Update(call.Task)
	return a.waitOutcome(ctx, c, call.Task.ID, e.Tool, deadline)
}

// deadline returns when --timeout ends the wait, or zero.
func (a *app) deadline() time.Time {
	if a.g.timeout > 0 {
		return time.Now().Add(a.g.timeout)
	}
	return time.Time{}
}

// stdioLeavesTasks refuses the flags that leave a task running after
// mcptask exits when the server is a --stdio child: the child, and every
// task running in it, stops with mcptask, so "the task keeps running"
// would be false (the next start fails it "outcome unknown", or re-runs
// it). detach is call's --detach.
func (a *app) stdioLeavesTasks(detach bool) error {
	if a.g.stdio == "" {
		return nil
	}
	const why = "with --stdio the server runs inside mcptask and stops when it exits, and its running tasks with it; serve the tools over HTTP (mcptaskd) and use --url to leave a task running"
	switch {
	case detach:
		return usagef("--detach cannot be used with --stdio: %s", why)
	case a.g.timeout > 0:
		return usagef("--timeout cannot be used with --stdio: %s", why)
	}
	return nil
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

// orDash returns s, or "-" for an empty s.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
