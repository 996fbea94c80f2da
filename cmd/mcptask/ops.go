package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/mcptask/mcptask/client"
)

// opsFlags are the flags of 'mcptask ops'.
type opsFlags struct {
	state, task string
}

// opStates are the states 'mcptask ops --state' accepts.
var opStates = []string{"intended", "submitted", "confirmed", "rejected", "unknown"}

// cmdOps is 'mcptask ops'.
var cmdOps = &command{
	name:     "ops",
	synopsis: "[--state STATE] [--task TASK_ID]",
	summary:  "list your domain operations on the server's ledger, by state",
	help: `
Lists the domain operations on the server's ledger that your tasks recorded
(mcptask's io.mcptask/operations/list, on both wires), newest first: what
each task's work did, or meant to do, downstream (a deployment, a payment, a
publish) and what the system of record said of it, apart from the task's
status. Only your own operations are listed (another principal's are never
shown; without a token, those of your anonymous scope).

--state selects one state: intended, submitted, confirmed, rejected or
unknown ('mcptask ops --state unknown' lists every operation whose outcome
nobody could confirm: reconcile each with its system of record before
retrying its task). --task selects the operations of one task.

Exits 0 (also when there are none), 5 for an invalid state, 4 when the
server is unreachable or serves no ledger. With --json, prints a JSON array
of {"key", "taskId", "tool", "state", "effect", "object", "objectVersion",
"receipt", "detail", "createdAt", "updatedAt", "reconciledAt"}.`,
	flags: func(a *app, fs *flag.FlagSet) {
		fs.StringVar(&a.cmd.ops.state, "state", "", "list only the operations in this state (intended, submitted, confirmed, rejected, unknown)")
		fs.StringVar(&a.cmd.ops.task, "task", "", "list only the operations of this task")
	},
	run: runOps,
}

// jsonOp is one operation of 'mcptask ops --json'.
type jsonOp struct {
	Key           string     `json:"key"`
	TaskID        string     `json:"taskId"`
	Tool          string     `json:"tool,omitempty"`
	State         string     `json:"state"`
	Effect        string     `json:"effect,omitempty"`
	Object        string     `json:"object,omitempty"`
	ObjectVersion string     `json:"objectVersion,omitempty"`
	Receipt       string     `json:"receipt,omitempty"`
	Detail        string     `json:"detail,omitempty"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	ReconciledAt  *time.Time `json:"reconciledAt,omitempty"`
}

func runOps(a *app, ctx context.Context, pos []string) int {
	if len(pos) > 0 {
		return a.usage(usagef("ops takes no arguments (use --task TASK_ID)"))
	}
	f := client.OperationFilter{State: a.cmd.ops.state, TaskID: a.cmd.ops.task}
	if f.State != "" {
		valid := false
		for _, s := range opStates {
			valid = valid || s == f.State
		}
		if !valid {
			return a.usage(usagef("invalid --state %q: give one of intended, submitted, confirmed, rejected, unknown", f.State))
		}
	}
	c, err := a.connect(ctx, a.g.target(), a.g.wire)
	if err != nil {
		return a.report(ctx, &outcome{err: err})
	}
	defer c.Close()
	rctx, cancel := requestContext(ctx)
	ops, err := c.Operations(rctx, f)
	cancel()
	if err != nil && !(errors.Is(err, client.ErrTooManyOperations) && len(ops) > 0) {
		if errors.Is(err, client.ErrUnsupported) {
			a.errorf("this server does not list operations: %v", err)
		} else {
			a.errorf("listing operations: %v", err)
		}
		return exitCodeOf(ctx, err)
	}
	if err != nil {
		a.errorf("%v (showing the first %d)", err, len(ops))
	}
	if a.g.json {
		out := make([]jsonOp, 0, len(ops))
		for _, o := range ops {
			j := jsonOp{Key: o.Key, TaskID: o.TaskID, Tool: o.Tool, State: o.State, Effect: o.Effect, Object: o.Object,
				ObjectVersion: o.ObjectVersion, Receipt: o.Receipt, Detail: o.Detail, CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt}
			if !o.ReconciledAt.IsZero() {
				r := o.ReconciledAt
				j.ReconciledAt = &r
			}
			out = append(out, j)
		}
		a.printJSON(out)
		return exitOK
	}
	if len(ops) == 0 {
		what := "no operations"
		if f.State != "" {
			what = "no " + f.State + " operations"
		}
		fmt.Fprintf(a.stderr, "mcptask: the server's ledger holds %s of yours\n", what)
		return exitOK
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATE\tTASK ID\tTOOL\tEFFECT\tRECEIPT\tUPDATED\tDETAIL")
	for _, o := range ops {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s ago\t%s\n", o.State, o.TaskID, orDash(o.Tool), orDash(oneLine(o.Effect)),
			orDash(o.Receipt), formatElapsed(time.Since(o.UpdatedAt)), oneLine(o.Detail))
	}
	tw.Flush()
	return exitOK
}
