package main

import (
	"context"
	"flag"
)

// cmdWait is 'mcptask wait'.
var cmdWait = &command{
	name:     "wait",
	exits:    []int{exitOK, exitToolError, exitFailed, exitCancelled, exitConnection, exitUsage, exitDeadline, exitSampling, exitInterrupted},
	synopsis: "TASK_ID",
	summary:  "wait for a task and print its result",
	help: `
Waits for the task TASK_ID to end, showing its status, and prints its result,
exactly as 'mcptask call' does after creating a task. Use it after
'mcptask call --detach', a --timeout or a Ctrl-C. The task need not be in the
journal, but must be on this server (--url or --stdio).

When the task's work starts child tasks (nested tasks), the progress shows
them too: a line each time a child (or a child's child) appears or changes
its status or message, indented under its parent, with its step, tool, task
ID, status and message; 'mcptask status --tree ID' shows the whole tree at
once. With --json, the object printed carries parentTaskId and children.`,
	flags: func(a *app, fs *flag.FlagSet) {
		a.cmd.answers.define(fs)
		a.definePush(fs)
	},
	run: func(a *app, ctx context.Context, pos []string) int {
		if len(pos) != 1 {
			return a.usage(usagef("give one task ID: mcptask wait TASK_ID"))
		}
		if err := a.setAnswers(); err != nil {
			return a.usage(err)
		}
		if err := a.stdioLeavesTasks(false); err != nil {
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
