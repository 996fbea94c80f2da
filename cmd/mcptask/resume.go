package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
)

// cmdResume is 'mcptask resume'.
var cmdResume = &command{
	name:     "resume",
	exits:    []int{exitOK, exitToolError, exitFailed, exitCancelled, exitConnection, exitUsage, exitDeadline, exitSampling, exitInterrupted},
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
	flags: func(a *app, fs *flag.FlagSet) {
		a.cmd.answers.define(fs)
		a.definePush(fs)
	},
	run: runResume,
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
	if err := a.stdioLeavesTasks(false); err != nil {
		return a.usage(err)
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
				if e.Unsent() {
					ids = append(ids, "a call of "+e.Tool+" whose answer was lost (re-sent with its idempotency key)")
					continue
				}
				ids = append(ids, e.TaskID+" ("+e.Tool+")")
			}
			a.notef("mcptask: resuming %d task(s) on %s: %s", len(pending), target, strings.Join(ids, ", "))
		}
		a.view.SetLabel(fmt.Sprintf("waiting for %d task(s)", len(pending)))
		// Each task is waited for on its own, and its outcome printed as
		// soon as it ends.
		ended := make(chan *outcome)
		for _, e := range pending {
			if e.Unsent() {
				go func() { ended <- a.resendOutcome(ctx, c, e, deadline) }()
				continue
			}
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
	if a.g.json {
		a.printJSON(outs)
	}
	switch n, servers := countSkipped(skipped); {
	case code == exitInterrupted:
		a.notef("mcptask: interrupted; the tasks keep running on the server: run '%s resume' again later", a.selfCommand())
	case code == exitOK && printed == 0 && len(outs) == 0 && n > 0 && a.g.targetSet:
		fmt.Fprintf(a.stderr, "mcptask: nothing to resume for %s: the journal (%s) has no tasks of it in flight, but %d of %d other server(s):\n",
			a.g.target(), a.g.journalPath(), n, servers)
	case code == exitOK && printed == 0 && len(outs) == 0:
		fmt.Fprintf(a.stderr, "mcptask: nothing to resume: the journal (%s) has no tasks in flight\n", a.g.journalPath())
	}
	a.noteSkipped(skipped, "resume")
	return code
}
