package main

import (
	"context"
	"fmt"

	"github.com/mcptask/mcptask/client"
)

// cmdCancel is 'mcptask cancel'.
var cmdCancel = &command{
	name:     "cancel",
	synopsis: "TASK_ID ...",
	summary:  "cancel tasks",
	help: `
Asks the server to cancel each task and prints its status after. A waiter
('mcptask call' or 'mcptask wait' elsewhere) then exits 3. Cancelling a task
that has already ended changes nothing and is not an error. A task is
cancelled only once the system doing its work accepted the cancel (a job
API, an upstream server): a refused cancel is printed with its reason
("the job API refused the cancel of job 7: HTTP 400: ..."), and the task
goes on. Exits 0 when every task is cancelled or had ended, 2 when a
cancel was refused, 4 when the server is unreachable or does not know a
task.`,
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
