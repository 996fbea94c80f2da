package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/client"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestTargets checks which servers 'list' and 'resume' visit, as the
// journal (read with client.ReadJournal) names them.
func TestTargets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("bad.json", "{not json")
	write("j.json", `{"version":1,"tasks":[
		{"taskId":"a","target":"http://x/mcp","wire":"2026-07-28","tool":"t1"},
		{"taskId":"b","target":"stdio:srv -stdio","tool":"t2"}]}`)
	// JSON Lines are not the journal's format: the client refuses it as
	// corrupt, like any other file it cannot read.
	write("lines.json", "{\"taskId\":\"a\",\"target\":\"u\"}\n{\"taskId\":\"b\",\"target\":\"u\"}\n")

	a := &app{getenv: func(string) string { return "" }}
	a.g.init(a.getenv)
	a.g.journal = filepath.Join(dir, "j.json")
	targets, skipped := a.targets()
	if !reflect.DeepEqual(targets, []string{"http://x/mcp"}) || skipped["stdio:srv -stdio"] != 1 {
		t.Errorf("targets %v, skipped %v", targets, skipped)
	}
	a.g.journal = filepath.Join(dir, "missing.json")
	if targets, skipped := a.targets(); len(targets) != 0 || len(skipped) != 0 {
		t.Errorf("empty journal: targets %v, skipped %v", targets, skipped)
	}
	for _, bad := range []string{"bad.json", "lines.json"} {
		a.g.journal = filepath.Join(dir, bad)
		if targets, _ := a.targets(); !reflect.DeepEqual(targets, []string{defaultURL}) {
			t.Errorf("unreadable journal %s: targets %v", bad, targets)
		}
	}
	a.g.journal = filepath.Join(dir, "j.json")
	a.g.targetSet, a.g.url = true, "http://y/mcp"
	if targets, _ := a.targets(); len(targets) != 0 {
		t.Errorf("explicit target without tasks: %v", targets)
	}
	a.g.url = "http://x/mcp"
	if targets, _ := a.targets(); !reflect.DeepEqual(targets, []string{"http://x/mcp"}) {
		t.Errorf("explicit target: %v", targets)
	}
	a.g.targetSet = false
}

func TestExitCodeOf(t *testing.T) {
	ctx := context.Background()
	interrupted, cancel := context.WithCancelCause(ctx)
	cancel(errInterrupted)
	for _, tc := range []struct {
		ctx  context.Context
		err  error
		code int
	}{
		{ctx, nil, exitOK},
		{ctx, &client.TaskError{TaskID: "x", Code: -32603, Message: "boom"}, exitFailed},
		{ctx, fmt.Errorf("wrapped: %w", client.ErrCancelled), exitCancelled},
		{ctx, fmt.Errorf("task x: %w", client.ErrTaskNotFound), exitConnection},
		{ctx, fmt.Errorf("task x: %w", client.ErrNotTerminal), exitFailed},
		{ctx, fmt.Errorf("still working: %w", client.ErrDeadline), exitDeadline},
		{ctx, errWaitDeadline, exitDeadline},
		{ctx, &refusedError{&jsonrpc.Error{Code: -32602, Message: "unknown tool"}}, exitFailed},
		{ctx, &jsonrpc.Error{Code: -32603, Message: "tasks/get failed"}, exitConnection},
		{ctx, usagef("bad"), exitUsage},
		{ctx, errors.New("connection refused"), exitConnection},
		{interrupted, context.Canceled, exitInterrupted},
		{ctx, &jsonrpc.Error{Code: -32602, Message: "the content does not match the requested schema"}, exitFailed},
		{ctx, &samplingError{"x"}, exitSampling},
	} {
		if got := exitCodeOf(tc.ctx, tc.err); got != tc.code {
			t.Errorf("exitCodeOf(%v) = %d, want %d", tc.err, got, tc.code)
		}
	}
	// The codes are distinct and documented.
	seen := map[int]bool{}
	for _, e := range exitCodes {
		if seen[e.code] {
			t.Errorf("exit code %d twice", e.code)
		}
		seen[e.code] = true
	}
	if len(seen) != 10 {
		t.Errorf("%d exit codes documented, want 10", len(seen))
	}
}

func TestSelfCommand(t *testing.T) {
	env := map[string]string{}
	a := &app{getenv: func(k string) string { return env[k] }}
	a.g.init(a.getenv)
	if got := a.selfCommand(); got != "mcptask" {
		t.Errorf("defaults: %q", got)
	}
	a.g.url = "http://127.0.0.1:9/mcp"
	a.g.journal = "/tmp/my journal.json"
	if got := a.selfCommand(); got != "mcptask --url http://127.0.0.1:9/mcp --journal '/tmp/my journal.json'" {
		t.Errorf("flags: %q", got)
	}
	env[envURL], env[envJournal] = a.g.url, a.g.journal // from the environment: nothing to repeat
	if got := a.selfCommand(); got != "mcptask" {
		t.Errorf("environment: %q", got)
	}
	a.g.stdio = "mcptaskd -stdio"
	if got := a.selfCommand(); got != "mcptask --stdio 'mcptaskd -stdio'" {
		t.Errorf("stdio: %q", got)
	}
}

// TestReadmeExitCodes keeps the README's table of exit codes in step with
// exitCodes.
func TestReadmeExitCodes(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skip(err)
	}
	_, section, ok := strings.Cut(string(data), "## mcptask CLI")
	if !ok {
		t.Fatal("README has no mcptask CLI section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var got []int
	for line := range strings.Lines(section) {
		var code int
		if _, err := fmt.Sscanf(line, "| %d |", &code); err == nil {
			got = append(got, code)
		}
	}
	var want []int
	for _, e := range exitCodes {
		want = append(want, e.code)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("README lists exit codes %v, mcptask has %v", got, want)
	}
}

// runApp runs mcptask with args, without a server, and returns its exit
// code, stdout and stderr.
func runApp(args ...string) (int, string, string) {
	var out, errb strings.Builder
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code := a.run(context.Background(), args)
	return code, out.String(), errb.String()
}

// TestMisplacedFlag: a command's flag given before the command (or to
// another command) names the command it belongs to.
func TestMisplacedFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--answer", "accept", "call", "x"}, "-answer is a flag of 'mcptask call', 'mcptask wait', 'mcptask resume', not a global one: put it after the command's name (mcptask call --answer ...)"},
		{[]string{"status", "-f", "x"}, "-f is not a flag of 'mcptask status'; it is one of 'mcptask logs'"},
		{[]string{"--nonesuch", "status"}, "flag provided but not defined: -nonesuch"},
	} {
		code, _, stderr := runApp(c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
}

// TestCommandHelp: 'help COMMAND' shows that command's flags and exit
// codes, not the global flags' descriptions nor the codes of other
// commands; 'help' alone describes the global flags and every code.
func TestCommandHelp(t *testing.T) {
	_, status, _ := runApp("help", "status")
	_, call, _ := runApp("help", "call")
	_, all, _ := runApp("help")
	for what, c := range map[string]struct {
		page        string
		has, hasNot []string
	}{
		"help status": {status, []string{"Exits 0 when the server", "Global flags ('mcptask help' describes them): "},
			[]string{"the tool's result is printed", "the server's endpoint", "\nExit codes:"}},
		"help call": {call, []string{"--detach", "\nExit codes:\n  0    success: the tool's result is printed", "130  interrupted"},
			[]string{"unmet requirements", "the server's endpoint"}},
		"help": {all, []string{"Global flags (before or after the command):", "--url", "unmet requirements"}, nil},
	} {
		for _, s := range c.has {
			if !strings.Contains(c.page, s) {
				t.Errorf("%s lacks %q", what, s)
			}
		}
		for _, s := range c.hasNot {
			if strings.Contains(c.page, s) {
				t.Errorf("%s has %q", what, s)
			}
		}
	}
}
