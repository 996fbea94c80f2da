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

// listFlags are the flags of 'mcptask list'.
type listFlags struct {
	server bool
}

// cmdList is 'mcptask list'.
var cmdList = &command{
	name:      "list",
	exitsText: "  0    the tasks are listed (a task whose status could not be read shows as unknown)\n  4    the server is unreachable\n  5    usage error",
	synopsis:  "",
	summary:   "list the tasks in flight (from the journal) with their status",
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
			// The journal still knows what is in flight there: say so,
			// with the status unknown, rather than "no tasks in flight".
			rows = append(rows, journalRows(a, target, "the server is unreachable (see above)")...)
			continue
		}
		entries, err := c.Pending()
		if err != nil {
			a.errorf("reading the journal: %v", err)
			code = max(code, exitConnection)
		}
		for _, e := range entries {
			if e.Unsent() {
				rows = append(rows, listRow{status: jsonStatus{TaskID: "-", Status: "unknown", Tool: e.Tool, Target: e.Target,
					StatusMessage: "the answer to this call was lost; 'mcptask resume' re-sends it with its idempotency key"}, age: e.CreatedAt})
				continue
			}
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
	if a.g.json {
		a.noteSkipped(skipped, "list")
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
		if n, servers := countSkipped(skipped); n > 0 && a.g.targetSet {
			fmt.Fprintf(a.stderr, "mcptask: no tasks of %s in flight in %s, but %d of %d other server(s):\n", a.g.target(), where, n, servers)
		} else {
			fmt.Fprintf(a.stderr, "mcptask: no tasks in flight in %s\n", where)
		}
		a.noteSkipped(skipped, "list")
		return code
	}
	printRows(a, rows, len(targets) > 1)
	a.noteSkipped(skipped, "list")
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

// journalRows are the journal's entries of target, with the status
// unknown for the reason why.
func journalRows(a *app, target, why string) []listRow {
	path := a.g.journalPath()
	if path == "" {
		return nil
	}
	entries, err := client.ReadJournal(path)
	if err != nil {
		return nil
	}
	var rows []listRow
	for _, e := range entries {
		if e.Target != target {
			continue
		}
		id := e.TaskID
		if e.Unsent() {
			id = "-"
		}
		rows = append(rows, listRow{status: jsonStatus{TaskID: id, Status: "unknown", Tool: e.Tool, Target: e.Target, Error: why}, age: e.CreatedAt})
	}
	return rows
}
