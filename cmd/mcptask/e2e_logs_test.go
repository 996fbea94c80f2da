package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/pgtest"
)

// logsDaemon starts mcptaskd with bearer tokens for alice and mallory
// and a command tool "talk" that writes "line one" on stdout and "line
// two" on stderr, waits for its argument's file, then writes "line
// three" and exits. It returns the daemon and the token files.
func logsDaemon(t *testing.T) (d *daemon, alice, mallory string) {
	t.Helper()
	args, alice, mallory := logsArgs(t)
	return startDaemon(t, args...), alice, mallory
}

// logsArgs writes logsDaemon's configuration and tokens, and returns
// mcptaskd's arguments for them and the token files.
func logsArgs(t *testing.T) (args []string, alice, mallory string) {
	t.Helper()
	dir := t.TempDir()
	sc := filepath.Join(dir, "talk.sh")
	if err := os.WriteFile(sc, []byte(`#!/bin/sh
echo "line one"
echo "line two" >&2
while [ ! -e "$1" ]; do sleep 0.01; done
echo "line three"
`), 0o700); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "mcptaskd.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`demo: false
commands:
  talk:
    inputSchema: {type: object, properties: {release: {type: string}}, required: [release]}
    argv: [%q, "{release}"]
    task: required
`, sc)), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokens, []byte(`[{"token": "logs-test-alice-token-5b1e", "principal": "alice", "tenant": "acme"},
{"token": "logs-test-mallory-token-9c2f", "principal": "mallory", "tenant": "globex"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	alice, mallory = filepath.Join(dir, "alice"), filepath.Join(dir, "mallory")
	for f, tok := range map[string]string{alice: "logs-test-alice-token-5b1e", mallory: "logs-test-mallory-token-9c2f"} {
		if err := os.WriteFile(f, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"-config", config, "-tokens", tokens}, alice, mallory
}

// TestLogsFollow: 'mcptask logs -f' follows a command task's output
// live against a real mcptaskd: it prints the lines the command wrote
// before it waits while the task runs, then the rest, and exits 0 once
// the task has ended and its log is read; 'mcptask logs --json' prints a
// JSON object per line with its number and stream; 'mcptask status'
// links the log; another principal's
// 'mcptask logs' of the same task fails exactly as for an unknown task.
func TestLogsFollow(t *testing.T) {
	t.Parallel()
	d, alice, mallory := logsDaemon(t)
	c := newCLI(t, d.URL)
	release := filepath.Join(t.TempDir(), "release")
	r := c.run("--token-file", alice, "--json", "call", "--detach", "talk", "release="+release)
	var started struct {
		TaskID string `json:"taskId"`
	}
	if r.Code != exitOK || json.Unmarshal([]byte(r.Stdout), &started) != nil || started.TaskID == "" {
		t.Fatalf("call --detach: %s", r)
	}
	id := started.TaskID

	f := c.start("--token-file", alice, "logs", "-f", "-interval", "50ms", id)
	f.waitStdout(t, func(out string) bool {
		return strings.Contains(out, "line one\n") && strings.Contains(out, "line two\n")
	}, time.Minute)
	if out, _ := f.output(); strings.Contains(out, "line three") {
		t.Fatalf("line three before the command was released: %q", out)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fr := f.wait(time.Minute)
	lines := strings.Split(strings.TrimSuffix(fr.Stdout, "\n"), "\n")
	if fr.Code != exitOK || len(lines) != 3 || lines[2] != "line three" {
		t.Fatalf("logs -f: %s", fr)
	}

	r = c.run("--token-file", alice, "--json", "logs", id)
	streams := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		var v struct {
			Seq    int64  `json:"seq"`
			Stream string `json:"stream"`
			Text   string `json:"text"`
			Time   string `json:"time"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil || v.Seq == 0 || v.Time == "" {
			t.Fatalf("logs --json line %q: %v\n%s", l, err, r)
		}
		streams[v.Text] = v.Stream
	}
	if r.Code != exitOK || streams["line one"] != "stdout" || streams["line two"] != "stderr" || streams["line three"] != "stdout" {
		t.Errorf("logs --json: %v\n%s", streams, r)
	}

	// mcptask status links the log.
	if r := c.run("--token-file", alice, "status", id); r.Code != exitOK || !strings.Contains(r.Stdout, "3 lines logged (mcptask logs "+id+")") {
		t.Errorf("status: %s", r)
	}

	// Another principal: the victim's log is unknown to it, exactly as
	// an unknown task's, and nothing of it is printed.
	unknown := "aaaaaaaaaaaaaaaaaaaaaaaaaa"
	ru := c.run("--token-file", mallory, "logs", unknown)
	rv := c.run("--token-file", mallory, "logs", id)
	if ru.Code != exitConnection || rv.Code != exitConnection ||
		strings.ReplaceAll(rv.Stderr, id, "ID") != strings.ReplaceAll(ru.Stderr, unknown, "ID") {
		t.Errorf("another principal's logs of the victim's task:\n%s\nwant as for an unknown task:\n%s", rv, ru)
	}
	if strings.Contains(rv.Stdout+rv.Stderr, "line") {
		t.Errorf("the victim's log reached another principal: %s", rv)
	}
	rf := c.run("--token-file", mallory, "logs", "-f", id)
	if rf.Code != exitConnection || strings.Contains(rf.Stdout, "line") {
		t.Errorf("another principal's logs -f: %s", rf)
	}
}

// waitStdout waits until ok(stdout) holds.
func (p *proc) waitStdout(t *testing.T, ok func(string) bool, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if out, _ := p.output(); ok(out) {
			return
		}
		select {
		case <-p.done:
			if out, _ := p.output(); ok(out) {
				return
			}
			t.Fatalf("mcptask exited (%v) before its stdout was as awaited\n%s", p.waitErr, p.result())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("stdout not as awaited within %v\n%s", timeout, p.result())
		}
		time.Sleep(10 * time.Millisecond) // polling the output, not synchronization
	}
}

// TestLogsFollowAcrossInstances: two mcptaskd instances share a
// PostgreSQL schema; a command task runs on the first, and 'mcptask logs
// -f' against the second follows its output live, to its end.
func TestLogsFollowAcrossInstances(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn, "mcptask_cli_logs_")
	args, alice, _ := logsArgs(t)
	args = append(args, "-postgres", dsn, "-postgres-schema", schema)
	a, b := startDaemon(t, args...), startDaemon(t, args...)
	release := filepath.Join(t.TempDir(), "release")
	r := newCLI(t, a.URL).run("--token-file", alice, "call", "--detach", "talk", "release="+release)
	id := strings.TrimSpace(r.Stdout)
	if r.Code != exitOK || !regexp.MustCompile(`^[a-z2-7]+$`).MatchString(id) {
		t.Fatalf("call --detach on the first instance: %s", r)
	}
	f := newCLI(t, b.URL).start("--token-file", alice, "logs", "-f", "-interval", "50ms", id)
	f.waitStdout(t, func(out string) bool {
		return strings.Contains(out, "line one\n") && strings.Contains(out, "line two\n")
	}, time.Minute)
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fr := f.wait(time.Minute)
	if lines := strings.Split(strings.TrimSuffix(fr.Stdout, "\n"), "\n"); fr.Code != exitOK || len(lines) != 3 || lines[2] != "line three" {
		t.Fatalf("logs -f on the second instance: %s", fr)
	}
}

// TestLogsEmpty: 'mcptask logs' of a task that logged nothing says so on
// stderr (while it runs, and once it ended), not with silence, and keeps
// stdout for log lines.
func TestLogsEmpty(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	config := filepath.Join(dir, "mcptaskd.yaml")
	if err := os.WriteFile(config, []byte(`demo: false
commands:
  quiet:
    inputSchema: {type: object, properties: {release: {type: string}}, required: [release]}
    argv: [sh, -c, 'while [ ! -e "$0" ]; do sleep 0.01; done', "{release}"]
    task: required
`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "-config", config)
	c := newCLI(t, d.URL)
	release := filepath.Join(dir, "release")
	r := c.run("call", "--detach", "quiet", "release="+release)
	expect(t, r, exitOK, nil, nil)
	id := strings.TrimSpace(r.Stdout)
	r = c.run("logs", id)
	expect(t, r, exitOK, nil, []string{"(no log lines yet)"})
	if r.Stdout != "" {
		t.Errorf("logs of an empty log printed %q on stdout", r.Stdout)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, c.run("wait", id), exitOK, nil, nil)
	expect(t, c.run("logs", id), exitOK, nil, []string{"(no log lines: task " + id + " ended without logging any)"})
}
