package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/wire/events"
)

// eventsFlags are the flags of 'mcptask events'.
type eventsFlags struct {
	task, tool string
	status     bool
	follow     bool
	fromNow    bool
	from       string
}

// startCursor is the position before every event the server keeps.
const startCursor = "e1.0.0"

// cmdEvents is 'mcptask events'.
var cmdEvents = &command{
	name:     "events",
	synopsis: "[--task ID] [--tool NAME] [--status] [-f] [--from CURSOR | --now]",
	summary:  "print your tasks' events: what they emit while they run (MCP Events), or their status changes",
	help: `
Prints the events of your tasks that the server keeps (MCP Events,
docs/events.md): by default their outputs (task.output: what a tool emits
while it runs, and the log lines the server publishes), with --status their
status changes (task.status: working, input_required, completed, failed,
cancelled, with the outcome). --task narrows to one task, --tool to one
tool's tasks. From the oldest event kept, or after --from CURSOR (a cursor
printed by --json), or only new ones with --now. With -f, follows the
events as they happen (a push stream over HTTP, polling on stdio) until the
task of --task has ended, or Ctrl-C. Outputs are printed one per line: an
emitted value as compact JSON, a published log line as its text; without
--task each line starts with the task's ID. With --json, one JSON object
per event: {"id", "name", "time", "data", "cursor"}. Only your own tasks'
events are shown: another principal's task ID shows nothing.`,
	exits: []int{exitOK, exitFailed, exitConnection, exitUsage, exitInterrupted},
	flags: func(a *app, fs *flag.FlagSet) {
		f := &a.cmd.events
		fs.StringVar(&f.task, "task", "", "only the events of this task")
		fs.StringVar(&f.tool, "tool", "", "only the events of this tool's tasks")
		fs.BoolVar(&f.status, "status", false, "status changes (task.status) instead of outputs")
		fs.BoolVar(&f.follow, "f", false, "follow the events as they happen")
		fs.BoolVar(&f.follow, "follow", false, "the same as -f")
		fs.BoolVar(&f.fromNow, "now", false, "only the events from now on")
		fs.StringVar(&f.from, "from", "", "continue after this cursor (printed by --json)")
	},
	run: func(a *app, ctx context.Context, pos []string) int {
		f := a.cmd.events
		if len(pos) != 0 {
			return a.usage(usagef("mcptask events takes no arguments (a task is --task ID)"))
		}
		if f.fromNow && f.from != "" {
			return a.usage(usagef("--now and --from cannot go together"))
		}
		if f.fromNow && !f.follow {
			return a.usage(usagef("--now prints only new events: add -f to wait for them"))
		}
		c, err := a.connect(ctx, a.g.target(), a.g.wire)
		if err != nil {
			return a.report(ctx, &outcome{err: err})
		}
		defer c.Close()
		q := client.EventQuery{Name: events.TypeOutput, TaskID: f.task, Tool: f.tool, Cursor: startCursor}
		if f.status {
			q.Name = events.TypeStatus
		}
		switch {
		case f.from != "":
			q.Cursor = f.from
		case f.fromNow:
			q.Cursor = ""
		}
		printer := eventPrinter(a.stdout, a.g.json, f.task == "")
		if f.follow {
			err = c.Events(ctx, q, func(e client.Event) error { printer(e); return nil })
		} else {
			err = readEvents(ctx, c, q, printer)
		}
		if err != nil {
			code := exitCodeOf(ctx, err)
			a.printHuman(&outcome{taskID: f.task, err: err}, code)
			return code
		}
		return exitOK
	},
}

// readEvents prints the events kept after q's cursor, page by page.
func readEvents(ctx context.Context, c *client.Client, q client.EventQuery, emit func(client.Event)) error {
	for {
		rctx, cancel := requestContext(ctx)
		p, err := c.PollEvents(rctx, q)
		cancel()
		if err != nil {
			return err
		}
		for _, e := range p.Events {
			emit(e)
		}
		q.Cursor = p.Cursor
		if !p.More {
			return nil
		}
	}
}

// eventPrinter prints events on w: JSON lines, or their text (each
// prefixed with its task's ID when withTask).
func eventPrinter(w io.Writer, asJSON, withTask bool) func(client.Event) {
	seen := map[string]bool{}
	return func(e client.Event) {
		if seen[e.ID] {
			return // delivered twice (a stream replaced by polling)
		}
		seen[e.ID] = true
		if asJSON {
			b, _ := json.Marshal(map[string]any{"id": e.ID, "name": e.Name, "time": e.Time.UTC().Format(time.RFC3339Nano),
				"data": e.Data, "cursor": e.Cursor})
			fmt.Fprintln(w, string(b))
			return
		}
		text, id := eventText(e)
		if withTask {
			fmt.Fprintf(w, "%s  %s\n", id, text)
		} else {
			fmt.Fprintln(w, text)
		}
	}
}

// eventText is the text of an event, and its task's ID.
func eventText(e client.Event) (text, taskID string) {
	var d struct {
		TaskID        string          `json:"taskId"`
		Data          json.RawMessage `json:"data"`
		Text          string          `json:"text"`
		Status        string          `json:"status"`
		StatusMessage string          `json:"statusMessage"`
		Outcome       string          `json:"outcome"`
	}
	_ = json.Unmarshal(e.Data, &d)
	switch {
	case d.Status != "":
		text = d.Status
		if d.Outcome != "" && d.Outcome != d.Status {
			text += " (" + d.Outcome + ")"
		}
		if d.StatusMessage != "" {
			text += ": " + d.StatusMessage
		}
	case len(d.Data) > 0:
		text = string(d.Data)
	default:
		text = d.Text
	}
	return text, d.TaskID
}

// followOutputs prints, as notes on stderr, what the task of src emits
// while the caller waits for it; the returned function stops and waits
// (briefly) for the last outputs.
func (a *app) followOutputs(ctx context.Context, c *client.Client, q client.EventQuery) (stop func()) {
	if a.view.mode == viewQuiet {
		return func() {}
	}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	seen := map[string]bool{}
	go func() {
		defer close(done)
		_ = c.Events(fctx, q, func(e client.Event) error {
			if !seen[e.ID] {
				seen[e.ID] = true
				text, _ := eventText(e)
				a.view.Notef("mcptask: output: %s", text)
			}
			return nil
		})
	}()
	return func() {
		// The stream of a task ends with it: its last outputs come first.
		select {
		case <-done:
		case <-time.After(2 * time.Second):
		}
		cancel()
		<-done
	}
}
