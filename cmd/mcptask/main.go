// Command mcptask is a command-line MCP client for long-running tool calls,
// for people and for scripts, built on the mcptask client library.
//
// It lists a server's tools, calls them (as tasks when the server offers
// tasks), shows a live status line while a task runs, answers the task's
// questions on the terminal, and prints the result. Every task it starts is
// recorded in a journal file, so that a wait cut short (Ctrl-C, a crash, a
// closed laptop) is picked up later with 'mcptask resume' or
// 'mcptask wait ID' without calling the tool again.
//
// Usage:
//
//	mcptask [global flags] COMMAND [flags] [arguments]
//
// Run 'mcptask help' for the commands, flags, environment variables and
// exit codes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcptask/mcptask/client"
)

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel(errInterrupted) // stop waiting; the task keeps running
		<-sigs
		os.Exit(exitInterrupted) // a second signal exits at once
	}()
	a := &app{
		stdin:     os.Stdin,
		stdout:    os.Stdout,
		stderr:    os.Stderr,
		stdinTTY:  isTerminal(os.Stdin),
		stderrTTY: isTerminal(os.Stderr),
		width:     func() int { return termWidth(os.Stderr) },
		getenv:    os.Getenv,
	}
	os.Exit(a.run(ctx, os.Args[1:]))
}

// Environment variables and defaults of the global flags.
const (
	envURL       = "MCPTASK_URL"
	envJournal   = "MCPTASK_JOURNAL"
	envToken     = "MCPTASK_TOKEN"
	envTokenFile = "MCPTASK_TOKEN_FILE"
	defaultURL   = "http://127.0.0.1:8080/mcp"
	// connectTimeout bounds connecting to the server.
	connectTimeout = 30 * time.Second
	// requestTimeout bounds the one-shot requests of status, cancel, list
	// and tools.
	requestTimeout = time.Minute
)

// app is one run of mcptask: its standard streams, environment and flags.
type app struct {
	stdin               io.Reader
	stdout, stderr      io.Writer
	stdinTTY, stderrTTY bool
	width               func() int // of the terminal on stderr; 0 if unknown
	getenv              func(string) string
	// dialTimeout bounds connecting to the server; zero means
	// connectTimeout (tests shorten it).
	dialTimeout time.Duration

	g globals

	// Set by the command being run.
	current *command      // the command being run
	cmd     commandState  // the command's flags
	answers *answers      // non-interactive answers to elicitations
	ttl     time.Duration // retention asked for new tasks (2025-11-25 wire)
	view    *statusView   // status display of the waits in progress

	promptMu sync.Mutex // one elicitation prompt at a time
	lines    *lineReader
	// sampled records the tasks whose sampling requests were announced.
	sampled map[string]bool
	// abort ends the command's context with a cause (e.g. a usage error
	// found while waiting: answers that do not fit a question).
	abort context.CancelCauseFunc
}

// globals are the flags every command accepts, before or after its name.
type globals struct {
	url       string
	journal   string
	json      bool
	timeout   time.Duration
	wire      string
	stdio     string
	verbose   bool
	targetSet bool // --url, MCPTASK_URL or --stdio named the server
	// token and tokenFile give the bearer token for --url (never
	// printed); the flags win over MCPTASK_TOKEN and MCPTASK_TOKEN_FILE.
	token, tokenFile string
	// tokenFlag and tokenFileFlag record which the command line gave.
	tokenFlag, tokenFileFlag bool
}

func (g *globals) init(getenv func(string) string) {
	g.url = defaultURL
	if v := getenv(envURL); v != "" {
		g.url, g.targetSet = v, true
	}
	g.journal = defaultJournal()
	if v := getenv(envJournal); v != "" {
		g.journal = v
	}
	g.token, g.tokenFile = getenv(envToken), getenv(envTokenFile)
}

// register defines the global flags on fs, with their current values as
// defaults so that a second FlagSet keeps what the first one parsed.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.url, "url", g.url, "the server's MCP endpoint `URL` (env "+envURL+")")
	fs.StringVar(&g.journal, "journal", g.journal, "`file` recording the tasks in flight, for 'mcptask resume'; \"off\" for none (env "+envJournal+")")
	fs.BoolVar(&g.json, "json", g.json, "print JSON on stdout, for scripts")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "stop waiting after this `duration`, e.g. 30s or 5m (exit 6; the task keeps running); 0 waits forever")
	fs.DurationVar(&g.timeout, "deadline", g.timeout, "same as --timeout")
	fs.StringVar(&g.wire, "wire", g.wire, "force the protocol `revision`: 2026-07-28 or 2025-11-25 (default: the newest the server speaks)")
	fs.StringVar(&g.stdio, "stdio", g.stdio, "run this server `command` and talk to it over its stdin/stdout instead of --url, e.g. \"mcptaskd -stdio -db tasks.db\"")
	fs.StringVar(&g.tokenFile, "token-file", g.tokenFile, "read the bearer token for --url from this `file` (env "+envTokenFile+"), for a server that requires authentication")
	fs.Func("token", "the bearer `token` for --url (env "+envToken+"; prefer --token-file or the environment: a command line is visible to other users)", func(v string) error {
		g.token, g.tokenFlag = v, true
		return nil
	})
	fs.BoolVar(&g.verbose, "v", g.verbose, "verbose: log the client's work (and a --stdio server's stderr) to stderr")
	fs.BoolVar(&g.verbose, "verbose", g.verbose, "same as -v")
}

// noteExplicit records whether fs's command line named the server.
func (g *globals) noteExplicit(fs *flag.FlagSet) {
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "url" || f.Name == "stdio" {
			g.targetSet = true
		}
		if f.Name == "token-file" {
			g.tokenFileFlag = true
		}
	})
}

func (g *globals) validate() error {
	switch g.wire {
	case "", "2026-07-28", "2025-11-25":
	default:
		return usagef("--wire must be 2026-07-28 or 2025-11-25, not %q", g.wire)
	}
	if g.timeout < 0 {
		return usagef("--timeout must not be negative, got %v", g.timeout)
	}
	if g.stdio != "" {
		if _, err := splitCommand(g.stdio); err != nil {
			return usagef("--stdio: %v", err)
		}
		return nil
	}
	u, err := url.Parse(g.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--url must be an http:// or https:// URL such as %s, not %q", defaultURL, g.url)
	}
	return nil
}

// bearerToken returns the bearer token to send and where it came from
// (for messages; never the token itself): --token, then --token-file, then
// MCPTASK_TOKEN, then MCPTASK_TOKEN_FILE.
func (g *globals) bearerToken() (token, from string, err error) {
	fromFile := func(path, name string) (string, string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", name, fmt.Errorf("reading the bearer token (%s): %w", name, err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", name, fmt.Errorf("the bearer token file %s (%s) is empty", path, name)
		}
		return t, name + " " + path, nil
	}
	switch {
	case g.tokenFlag:
		return g.token, "--token", nil
	case g.tokenFileFlag:
		return fromFile(g.tokenFile, "--token-file")
	case g.token != "":
		return g.token, envToken, nil
	case g.tokenFile != "":
		return fromFile(g.tokenFile, envTokenFile)
	}
	return "", "", nil
}

// journalPath returns the journal file to use, or "" for none.
func (g *globals) journalPath() string {
	switch strings.ToLower(g.journal) {
	case "", "off", "none":
		return ""
	}
	return g.journal
}

// target names the server as the journal records it.
func (g *globals) target() string {
	if g.stdio != "" {
		return stdioTarget(g.stdio)
	}
	return g.url
}

func stdioTarget(command string) string { return "stdio:" + command }

// defaultJournal is the client's default journal file, "" when there is
// none (no user cache directory).
func defaultJournal() string {
	path, err := client.DefaultJournalPath()
	if err != nil {
		return ""
	}
	return path
}

// command is one subcommand of mcptask.
type command struct {
	name     string
	synopsis string // the arguments, after the command's name
	summary  string // one line
	help     string // what it does, for 'mcptask help NAME'
	// exits are the exit codes of the command's outcomes, from exitCodes
	// (a tool's outcomes: call, wait, resume); nil when its help says
	// them itself (or exitsText does).
	exits []int
	// exitsText says the command's exit codes in its own words, when its
	// help does not and exits does not fit.
	exitsText string
	flags     func(a *app, fs *flag.FlagSet)
	run       func(a *app, ctx context.Context, args []string) int
	// subs are the command's subcommands ('mcptask admin drain'), each
	// named "PARENT SUB". A command with subcommands has no flags nor run
	// of its own: its first argument (after global flags) names the
	// subcommand, which parses the rest.
	subs []*command
}

// subName returns the name of the subcommand c without its parent's.
func (c *command) subName() string {
	_, name, _ := strings.Cut(c.name, " ")
	return name
}

// lookupSub returns the subcommand of c named name (without the
// parent's name), or nil.
func (c *command) lookupSub(name string) *command {
	for _, s := range c.subs {
		if s.subName() == name {
			return s
		}
	}
	return nil
}

// subNames lists c's subcommands as "a|b|c".
func (c *command) subNames() string {
	var names []string
	for _, s := range c.subs {
		names = append(names, s.subName())
	}
	return strings.Join(names, "|")
}

// commands lists the subcommands in the order the help shows them.
var commands []*command

func init() {
	commands = []*command{cmdTools, cmdManifest, cmdCall, cmdStatus, cmdWait, cmdCancel, cmdDelete, cmdLogs, cmdEvents, cmdList, cmdOps, cmdResume,
		cmdAdmin, cmdApprovals, cmdApprove, cmdDeny, cmdVersion, cmdHelp}
	cmdAdmin.subs = []*command{cmdAdminDrain, cmdAdminFleet, cmdAdminCanary, cmdAdminRollback, cmdAdminShadowReport, cmdAdminHandoff}
}

// allCommands returns the commands and their subcommands.
func allCommands() []*command {
	var all []*command
	for _, c := range commands {
		all = append(all, c)
		all = append(all, c.subs...)
	}
	return all
}

func lookupCommand(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// run runs mcptask with the command-line arguments args and returns the
// exit code.
func (a *app) run(ctx context.Context, args []string) int {
	ctx, a.abort = context.WithCancelCause(ctx)
	defer a.abort(nil)
	a.g.init(a.getenv)
	fs := flag.NewFlagSet("mcptask", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.g.register(fs)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		a.printHelp(a.stdout)
		return exitOK
	}
	if err != nil {
		return a.usageFail(nil, a.misplacedFlag(nil, err))
	}
	a.g.noteExplicit(fs)
	rest := fs.Args()
	if len(rest) == 0 {
		a.printHelp(a.stderr)
		return exitUsage
	}
	cmd := lookupCommand(rest[0])
	if cmd == nil {
		return a.usageFail(nil, usagef("unknown command %q", rest[0]))
	}
	args = rest[1:]
	if len(cmd.subs) > 0 {
		sub, subArgs, code, ok := a.pickSubcommand(cmd, args)
		if !ok {
			return code
		}
		cmd, args = sub, subArgs
	}
	a.current = cmd
	pos, code, ok := a.parseCommand(cmd, args)
	if !ok {
		return code
	}
	return cmd.run(a, ctx, pos)
}

// pickSubcommand returns the subcommand of parent that its first
// argument names (global flags may come before it) and the arguments
// after that name. When ok is false, mcptask exits with code.
func (a *app) pickSubcommand(parent *command, args []string) (sub *command, rest []string, code int, ok bool) {
	a.current = parent
	fs := a.commandFlags(parent) // the global flags: the parent has none
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		a.printCommandHelp(a.stdout, parent)
		return nil, nil, exitOK, false
	}
	if err != nil {
		return nil, nil, a.usageFail(parent, a.misplacedFlag(parent, err)), false
	}
	a.g.noteExplicit(fs)
	rest = fs.Args()
	if len(rest) == 0 {
		return nil, nil, a.usageFail(parent, usagef("give the %s command: mcptask %s %s [flags] [arguments]", parent.name, parent.name, parent.subNames())), false
	}
	if sub = parent.lookupSub(rest[0]); sub == nil {
		return nil, nil, a.usageFail(parent, usagef("unknown %s command %q: give one of mcptask %s %s", parent.name, rest[0], parent.name, parent.subNames())), false
	}
	return sub, rest[1:], exitOK, true
}

// parseCommand parses a command's flags (its own and the global ones,
// anywhere among its arguments; "--" ends them) and returns its positional
// arguments. When ok is false, mcptask exits with code.
func (a *app) parseCommand(cmd *command, args []string) (pos []string, code int, ok bool) {
	fs := a.commandFlags(cmd)
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			a.printCommandHelp(a.stdout, cmd)
			return nil, exitOK, false
		}
		if err != nil {
			return nil, a.usageFail(cmd, a.misplacedFlag(cmd, err)), false
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	a.g.noteExplicit(fs)
	if cmd.name != "help" && cmd.name != "version" {
		if err := a.g.validate(); err != nil {
			return nil, a.usageFail(cmd, err), false
		}
	}
	return pos, exitOK, true
}

// misplacedFlag adds to err, a flag parsing error of cmd (nil: before
// any command), which commands the undefined flag belongs to and where
// to put it; other errors are returned as they are.
func (a *app) misplacedFlag(cmd *command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err
	}
	var owners []string
	for _, c := range allCommands() {
		if c == cmd || c.flags == nil {
			continue
		}
		scratch := &app{getenv: a.getenv} // commandFlags binds to its app
		scratch.g.init(a.getenv)
		if scratch.commandFlags(c).Lookup(name) != nil {
			owners = append(owners, c.name)
		}
	}
	switch {
	case len(owners) == 0:
		return err
	case cmd == nil:
		return usagef("-%s is a flag of 'mcptask %s', not a global one: put it after the command's name (mcptask %s --%s ...)",
			name, strings.Join(owners, "', 'mcptask "), owners[0], name)
	}
	return usagef("-%s is not a flag of 'mcptask %s'; it is one of 'mcptask %s'", name, cmd.name, strings.Join(owners, "', 'mcptask "))
}

// commandFlags returns a FlagSet with cmd's flags and the global ones.
func (a *app) commandFlags(cmd *command) *flag.FlagSet {
	fs := flag.NewFlagSet("mcptask "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if cmd.flags != nil {
		cmd.flags(a, fs)
	}
	a.g.register(fs)
	return fs
}

// usageFail reports a usage error and returns exitUsage.
func (a *app) usageFail(cmd *command, err error) int {
	name, helpCmd := "mcptask", "mcptask help"
	if cmd != nil {
		name, helpCmd = "mcptask "+cmd.name, "mcptask help "+cmd.name
	}
	fmt.Fprintf(a.stderr, "%s: %v\nRun '%s' for usage.\n", name, err, helpCmd)
	return exitUsage
}

// usage reports a usage error of the command being run and returns
// exitUsage.
func (a *app) usage(err error) int { return a.usageFail(a.current, err) }

// errorf prints an error message on stderr (above the status line).
func (a *app) errorf(format string, args ...any) {
	a.notef("mcptask: "+format, args...)
}

// notef prints a line on stderr, above the status line if one is shown.
func (a *app) notef(format string, args ...any) {
	if a.view != nil {
		a.view.Notef(format, args...)
		return
	}
	fmt.Fprintf(a.stderr, format+"\n", args...)
}

// version returns the module version mcptask was built from.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
