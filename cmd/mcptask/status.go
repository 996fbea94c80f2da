package main

import (
	"context"
	"fmt"

	"github.com/mcptask/mcptask/client"
)

// cmdStatus is 'mcptask status'.
var cmdStatus = &command{
	name:     "status",
	synopsis: "TASK_ID ...",
	summary:  "show the status of tasks",
	help: `
Shows the current status of each task: working, input_required, completed,
failed or cancelled, with its status message and times, and the host's
correlation keys of the call that created it (host: e.g.
claudecode/toolUseId=toolu_01...), when the server shows them. It does not wait
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
