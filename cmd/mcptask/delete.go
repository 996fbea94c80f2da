package main

import (
	"context"
	"fmt"

	"github.com/mcptask/mcptask/client"
)

// cmdDelete is 'mcptask delete'.
var cmdDelete = &command{
	name:     "delete",
	synopsis: "TASK_ID ...",
	summary:  "delete finished tasks and everything they hold",
	help: `
Asks the server to delete each task and everything it holds (its result or
error, its input requests and their answers: mcptask's tasks/delete, on
both wires), and drops it from the journal. Only a task that has ended can
be deleted: a task still running is refused, and stays; cancel it first
('mcptask cancel ID'), then delete it. A deleted task is unknown after, to
everyone. Exits 0 when every task is deleted, 2 when the server refused one
that has not ended, 4 when the server is unreachable, does not offer
tasks/delete, or does not know a task (another principal's task is unknown
to you). With --json, prints {"taskId", "status": "deleted"} per task (an
"error" instead when it was not deleted).`,
	run: func(a *app, ctx context.Context, pos []string) int {
		if len(pos) == 0 {
			return a.usage(usagef("give a task ID: mcptask delete TASK_ID"))
		}
		del := func(c *client.Client, ctx context.Context, id string) (*client.TaskStatus, error) {
			if err := c.Delete(ctx, id); err != nil {
				return nil, err
			}
			return &client.TaskStatus{ID: id, Status: "deleted"}, nil
		}
		return a.eachTask(ctx, pos, del, func(_ *client.Client, _ int, id string, s *client.TaskStatus) *jsonStatus {
			if a.g.json {
				j := jsonStatusOf(s)
				return &j
			}
			fmt.Fprintf(a.stdout, "task %s: deleted\n", id)
			return nil
		})
	},
}
