package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

const helpIntro = `mcptask calls the tools of an MCP server from the command line. A call that
takes long runs as a task on the server: mcptask shows its progress on one
status line, answers its questions on the terminal and prints the result.
Each task is recorded in a journal file, so a wait cut short (Ctrl-C, a
crash) is picked up later with 'mcptask resume', without running the tool
again.

Usage:
  mcptask [global flags] COMMAND [flags] [arguments]
`

const helpExamples = `Examples:
  mcptaskd &                                     # the demo server, on ` + defaultURL + `
  mcptask tools                                  # what can I call?
  mcptask tools long_computation                 # its arguments
  mcptask call long_computation n=1000000 steps=10
  mcptask call deploy_with_confirmation service=api     # asks you to confirm
  mcptask call --detach long_computation steps=50       # prints the task ID, returns
  mcptask wait TASK_ID                           # waits for it, prints the result
  mcptask status --tree TASK_ID                  # its status and the child tasks its work started
  mcptask resume                                 # finishes every task in the journal
  mcptask call --json lint_report | jq .result   # for scripts
`

func (a *app) printHelp(w io.Writer) {
	fmt.Fprint(w, helpIntro)
	fmt.Fprintln(w, "\nCommands:")
	printCommandList(w, commands)
	fmt.Fprintln(w, "\nRun 'mcptask help COMMAND' (or 'mcptask COMMAND --help') for a command's flags.")
	fmt.Fprintln(w, "\nGlobal flags (before or after the command):")
	a.printGlobalFlags(w)
	fmt.Fprintf(w, "\nEnvironment:\n  %-16s the server's endpoint (default %s)\n  %-16s the journal file (default %s)\n",
		envURL, defaultURL, envJournal, displayJournal())
	fmt.Fprintln(w, "\nExit codes:")
	fmt.Fprint(w, exitCodesText())
	fmt.Fprintln(w)
	fmt.Fprint(w, helpExamples)
}

// printCommandList lists cmds with their summaries, the names aligned.
func printCommandList(w io.Writer, cmds []*command) {
	width := 8
	for _, c := range cmds {
		width = max(width, len(c.name))
	}
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-*s %s\n", width, c.name, c.summary)
	}
}

func displayJournal() string {
	if j := defaultJournal(); j != "" {
		return j
	}
	return "none: no user cache directory"
}

// printGlobalFlags lists the global flags with their built-in defaults.
func (a *app) printGlobalFlags(w io.Writer) {
	var g globals
	g.url, g.journal = defaultURL, displayJournal()
	fs := flag.NewFlagSet("mcptask", flag.ContinueOnError)
	g.register(fs)
	printFlags(w, fs)
}

// printFlags prints fs's flags with two dashes, the way mcptask's help
// spells them (one dash works too).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	for line := range strings.Lines(b.String()) {
		if rest, ok := strings.CutPrefix(line, "  -"); ok && len(rest) > 1 && rest[1] != ' ' && rest[1] != '\t' && rest[1] != '\n' {
			line = "  --" + rest // a long name
		}
		fmt.Fprint(w, line)
	}
}

func (a *app) printCommandHelp(w io.Writer, cmd *command) {
	if len(cmd.subs) > 0 {
		fmt.Fprintf(w, "Usage: mcptask %s %s\n\n%s\n\nCommands:\n", cmd.name, cmd.synopsis, strings.TrimSpace(cmd.help))
		printCommandList(w, cmd.subs)
		fmt.Fprintf(w, "\nRun 'mcptask help %s COMMAND' (or 'mcptask %s COMMAND --help') for a command's flags.\n", cmd.name, cmd.name)
		return
	}
	fmt.Fprintf(w, "Usage: mcptask %s [flags] %s\n\n%s\n", cmd.name, cmd.synopsis, strings.TrimSpace(cmd.help))
	if cmd.flags != nil {
		fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
		cmd.flags(&app{}, fs)
		fmt.Fprintln(w, "\nFlags:")
		printFlags(w, fs)
	}
	if cmd.name == "help" || cmd.name == "version" {
		return
	}
	// The global flags by name only: 'mcptask help' describes them.
	var g globals
	gfs := flag.NewFlagSet("mcptask", flag.ContinueOnError)
	g.register(gfs)
	var names []string
	gfs.VisitAll(func(f *flag.Flag) {
		if len(f.Name) > 1 {
			names = append(names, "--"+f.Name)
		} else {
			names = append(names, "-"+f.Name)
		}
	})
	fmt.Fprintf(w, "\nGlobal flags ('mcptask help' describes them): %s\n", strings.Join(names, ", "))
	switch {
	case len(cmd.exits) > 0:
		fmt.Fprintln(w, "\nExit codes:")
		for _, e := range exitCodes {
			if slices.Contains(cmd.exits, e.code) {
				fmt.Fprintf(w, "  %-4d %s\n", e.code, e.meaning)
			}
		}
	case cmd.exitsText != "":
		fmt.Fprintf(w, "\nExit codes:\n%s\n", strings.TrimRight(cmd.exitsText, "\n"))
	}
}

var cmdHelp = &command{
	name:     "help",
	synopsis: "[COMMAND [SUBCOMMAND]]",
	summary:  "show this help, or a command's",
	help:     "Shows the help of mcptask, or of one command (e.g. 'mcptask help admin drain').",
	run: func(a *app, _ context.Context, args []string) int {
		if len(args) == 0 {
			a.printHelp(a.stdout)
			return exitOK
		}
		c := lookupCommand(args[0])
		if c == nil {
			return a.usage(usagef("unknown command %q", args[0]))
		}
		switch {
		case len(args) == 2 && len(c.subs) > 0:
			sub := c.lookupSub(args[1])
			if sub == nil {
				return a.usage(usagef("unknown command %q: give one of mcptask %s %s", c.name+" "+args[1], c.name, c.subNames()))
			}
			c = sub
		case len(args) > 1:
			return a.usage(usagef("help takes at most one command (and its subcommand)"))
		}
		a.printCommandHelp(a.stdout, c)
		return exitOK
	},
}

var cmdVersion = &command{
	name:    "version",
	summary: "print mcptask's version",
	help:    "Prints the version mcptask was built from.",
	run: func(a *app, _ context.Context, args []string) int {
		if len(args) > 0 {
			return a.usage(usagef("version takes no arguments"))
		}
		fmt.Fprintln(a.stdout, "mcptask", version())
		return exitOK
	},
}
