package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/mcptask/mcptask/client"
)

// cmdStatus is 'mcptask status'.
var cmdStatus = &command{
	name:     "status",
	synopsis: "TASK_ID ...",
	summary:  "show the status of tasks",
	help: fmt.Sprintf(`
Shows the current status of each task: working, input_required, completed,
failed or cancelled, with its status message and times, and the host's
correlation keys of the call that created it (host: e.g.
claudecode/toolUseId=toolu_01...), when the server shows them. It does not wait
and does not fetch the result ('mcptask wait ID' does).

A task whose work started child tasks (nested tasks) says how many, by
status; a child names its parent. With --tree it shows the whole tree below
the task: each child indented under its parent with its step, tool, task
ID, status and message, read child by child, down to %d levels and up to %d
tasks (it says so when it cuts the tree).

With --json it prints a JSON object (an array for several IDs), with
parentTaskId and children (as the server lists them) and, with --tree, the
tree read. Exits 0 when the server knows every task, 4 otherwise.`, maxTreeDepth, maxTreeNodes),
	flags: func(a *app, fs *flag.FlagSet) {
		fs.BoolVar(&a.cmd.tree, "tree", false, fmt.Sprintf("show the tasks each task's work started (its children), recursively: at most %d levels, %d tasks", maxTreeDepth, maxTreeNodes))
	},
	run: func(a *app, ctx context.Context, pos []string) int {
		if len(pos) == 0 {
			return a.usage(usagef("give a task ID: mcptask status [--tree] TASK_ID ('mcptask list' shows the tasks in flight)"))
		}
		return a.eachTask(ctx, pos, (*client.Client).Get, func(c *client.Client, i int, id string, s *client.TaskStatus) *jsonStatus {
			tool := journalTool(c, id)
			var tree *taskTree
			if a.cmd.tree && len(s.Children) > 0 {
				tree = loadTree(ctx, getOf(c), s, tool)
			}
			if a.g.json {
				j := jsonStatusOf(s)
				j.Tool = tool
				if tree != nil {
					j.Tree, j.TreeCut = tree.json(), tree.cutText()
				}
				return &j
			}
			if i > 0 {
				fmt.Fprintln(a.stdout)
			}
			printStatus(a.stdout, s, tool)
			if len(s.Children) > 0 {
				if tree == nil {
					fmt.Fprintf(a.stdout, "  %-9s %s; '%s status --tree %s' shows them\n", "children:", childrenSummary(s.Children), a.selfCommand(), s.ID)
				} else {
					fmt.Fprintf(a.stdout, "  %-9s %s\n", "children:", childrenSummary(s.Children))
					tree.print(a.stdout, "  ")
				}
			}
			return nil
		})
	},
}

// getOf is c's Get, each request bounded as a one-shot request.
func getOf(c *client.Client) getTask {
	return func(ctx context.Context, id string) (*client.TaskStatus, error) {
		rctx, cancel := requestContext(ctx)
		defer cancel()
		return c.Get(rctx, id)
	}
}
