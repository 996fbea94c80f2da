package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/mcptask/mcptask/client"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// callFlags are the flags of 'mcptask call'.
type callFlags struct {
	args              string
	detach            bool
	cancelOnInterrupt bool
	despiteUnknown    bool
}

// cmdCall is 'mcptask call'.
var cmdCall = &command{
	name:     "call",
	exits:    []int{exitOK, exitToolError, exitFailed, exitCancelled, exitConnection, exitUsage, exitDeadline, exitSampling, exitInterrupted},
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
		fs.BoolVar(&a.cmd.call.despiteUnknown, "despite-unknown", false, "call the tool even though an earlier call of it left its effect unknown on the server's ledger (see 'mcptask ops --state unknown'; reconcile first)")
		a.cmd.answers.define(fs)
		a.definePush(fs)
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
	if err := a.stdioLeavesTasks(a.cmd.call.detach); err != nil {
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

	var info *toolInfo
	// The tool's schema types key=value pairs and checks them (one
	// tools/list); --detach asks whether the tool can run as a task.
	if len(ta.pairs) > 0 || a.cmd.call.detach {
		info = a.toolInfo(ctx, c, tool)
	}
	var fields []fieldSpec
	if info != nil {
		fields = info.fields
		if a.cmd.call.detach && info.support == "forbidden" {
			return a.finish(ctx, &outcome{tool: tool, err: usagef("--detach: %s runs only as a plain call (its taskSupport is forbidden), "+
				"so there is no task to detach from; nothing was called. Call it without --detach", tool)})
		}
	}
	args := ta.build(fields)
	if info != nil {
		// Arguments that break the tool's input schema are refused here,
		// in words, before anything is sent.
		if err := checkObject(fields, info.closed, args); err != nil {
			return a.finish(ctx, &outcome{tool: tool, err: usagef("the arguments of %s do not fit its input schema: %v; nothing was called "+
				"('%s tools %s' describes them)", tool, err, a.selfCommand(), tool)})
		}
	}

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
		var unknown *client.OutcomeUnknownError
		var notSent *client.NotSentError
		var unknownEffect *client.UnknownEffectError
		switch {
		case errors.As(err, &unknownEffect):
			// Refused before sending anything (exit 2), saying how on.
			err = &refusedError{fmt.Errorf("%w\nmcptask: see '%s ops --state unknown'; call anyway with --despite-unknown", err, a.selfCommand())}
		case errors.As(err, &notSent):
			// Not refused either: the server did not answer before the
			// call went out (exit 4).
		case errors.As(err, &unknown):
			// Not refused: the answer was lost (exit 4).
			err = a.unknownOutcome(unknown)
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
		if a.answers != nil {
			// The answers live in this process only: say so rather than
			// drop them silently.
			a.notef("mcptask: note: --answer/--answers are not kept with --detach; give them again to '%s wait %s' (or resume)", a.selfCommand(), id)
		}
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
		if a.g.stdio != "" {
			a.notef("mcptask: task %s started (%s); the --stdio server, and the task, stop when mcptask does", id, tool)
		} else {
			a.notef("mcptask: task %s started (%s); Ctrl-C stops waiting, the task keeps running", id, tool)
		}
	}
	a.view.Update(call.Task)
	o := a.waitOutcomeOf(ctx, c, id, tool, deadline, call.EventSource)
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

// toolInfo is what 'call' reads of a tool in the server's list.
type toolInfo struct {
	fields  []fieldSpec // the input schema's properties
	closed  bool        // the input schema allows no other property
	support string      // its taskSupport: forbidden, optional or required
}

// toolInfo returns what the server's list says of the tool name, or nil
// when it cannot be had (then the server alone checks the call).
func (a *app) toolInfo(ctx context.Context, c *client.Client, name string) *toolInfo {
	rctx, cancel := requestContext(ctx)
	defer cancel()
	tools, err := c.Tools(rctx)
	if err != nil {
		return nil
	}
	for _, t := range tools {
		if t.Tool != nil && t.Name == name {
			fields, err := parseSchema(t.InputSchema)
			if err != nil {
				return nil
			}
			return &toolInfo{fields: fields, closed: schemaClosed(t.InputSchema), support: t.TaskSupport}
		}
	}
	return nil
}
