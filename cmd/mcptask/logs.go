package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/client"
)

// logsFlags are the flags of 'mcptask logs'.
type logsFlags struct {
	follow   bool
	interval time.Duration
}

// defaultLogInterval is how often 'mcptask logs -f' asks for new lines
// when it has read everything.
const defaultLogInterval = 500 * time.Millisecond

// cmdLogs is 'mcptask logs'.
var cmdLogs = &command{
	name:     "logs",
	synopsis: "[-f] TASK_ID",
	summary:  "print a task's log (a command's output, an upstream's log messages)",
	help: `
Prints the log of a task: the lines its work logged (a command tool's
standard output and error, an upstream's log messages, what a handler
logged), read with resources/read of the task's log resource
(mcptask://tasks/ID/log), one line per line. The server keeps a bounded
log per task: when lines were dropped (the oldest first) before they were
read, a note on stderr says how many. With -f, follows the log while the
task runs, until the task has ended and its log is read to the end (Ctrl-C
stops following; the task keeps running). With --json, prints one JSON
object per line: {"seq", "time", "stream", "text"}. Only the task's owner
may read its log. Exits 0 once the log is printed, 4 when the server is
unreachable, keeps no task logs, or does not know the task (another
principal's task is unknown to you).`,
	flags: func(a *app, fs *flag.FlagSet) {
		fs.BoolVar(&a.cmd.logs.follow, "f", false, "follow the log until the task has ended")
		fs.BoolVar(&a.cmd.logs.follow, "follow", false, "the same as -f")
		fs.DurationVar(&a.cmd.logs.interval, "interval", defaultLogInterval, "with -f, how often to ask for new lines")
	},
	run: func(a *app, ctx context.Context, pos []string) int {
		if len(pos) != 1 {
			return a.usage(usagef("give one task ID: mcptask logs [-f] TASK_ID"))
		}
		if a.cmd.logs.interval <= 0 {
			return a.usage(usagef("-interval must be positive"))
		}
		c, err := a.connect(ctx, a.g.target(), a.g.wire)
		if err != nil {
			return a.report(ctx, &outcome{err: err})
		}
		defer c.Close()
		id := pos[0]
		first := true
		err = followLog(ctx, c, id, a.cmd.logs.follow, a.cmd.logs.interval, func(p *client.LogPage) {
			if first && len(p.Lines) == 0 && !p.More && !a.g.json {
				// Said on stderr: stdout holds log lines only.
				if p.Done() {
					fmt.Fprintf(a.stderr, "mcptask: (no log lines: task %s ended without logging any)\n", id)
				} else {
					fmt.Fprintf(a.stderr, "mcptask: (no log lines yet)\n")
				}
			}
			first = false
			if p.Missed > 0 {
				fmt.Fprintf(a.stderr, "mcptask: %d lines of the log were dropped before they were read (the server keeps a bounded log per task)\n", p.Missed)
			}
			for _, l := range p.Lines {
				if a.g.json {
					b, _ := json.Marshal(l) // one object per line: JSON Lines
					fmt.Fprintln(a.stdout, string(b))
				} else {
					fmt.Fprintln(a.stdout, l.Text)
				}
			}
		})
		if err != nil {
			code := exitCodeOf(ctx, err)
			a.printHuman(&outcome{taskID: id, err: err}, code)
			return code
		}
		return exitOK
	},
}

// followLog reads the log of the task id from its start and hands each
// page to emit: once to the end of what is there, or, with follow, on
// and on (asking every interval once it has read everything) until the
// task has ended and its log is read to the end, or ctx is done. It is
// the whole of following: plain polling with the log's cursor.
func followLog(ctx context.Context, c *client.Client, id string, follow bool, interval time.Duration, emit func(*client.LogPage)) error {
	var cursor int64
	for {
		rctx, cancel := requestContext(ctx)
		p, err := c.ReadLog(rctx, id, cursor, 0)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return err
		}
		emit(p)
		cursor = p.Next
		switch {
		case p.More:
			continue
		case !follow || p.Done():
			return nil
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}
