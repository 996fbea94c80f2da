package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/clitest"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
)

// The binaries under test, built once for the whole run.
var (
	cliBin    string // mcptask
	daemonBin string // mcptaskd
)

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == silentServerArg {
		os.Exit(silentServer(os.Args[2])) // a child of a connect test
	}
	if len(os.Args) == 3 && os.Args[1] == upstreamArg {
		os.Exit(upstream(os.Args[2])) // the upstream of a gateway test
	}
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	bins, cleanup, err := clitest.Build(".", "../mcptaskd")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	cliBin, daemonBin = bins[0], bins[1]
	return m.Run()
}

// daemon is one running mcptaskd.
type daemon struct {
	*proctest.Process
	URL string
}

// startDaemon starts mcptaskd on a free loopback port with a fresh
// database, a short poll interval and JSON logs, and waits until it serves.
func startDaemon(t testing.TB, extra ...string) *daemon {
	t.Helper()
	args := append([]string{"-addr", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "tasks.db"),
		"-log-format", "json", "-poll-interval", "50ms"}, extra...)
	p, err := proctest.Start(proctest.Config{Path: daemonBin, Args: args, Env: append(cleanEnv(), "GORACE=halt_on_error=1")})
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{Process: p}
	t.Cleanup(func() {
		d.Kill()
		if t.Failed() {
			t.Logf("--- mcptaskd log ---\n%s", d.Logs())
		}
	})
	d.URL, err = d.WaitListening(context.Background(), 60*time.Second)
	switch {
	case errors.Is(err, proctest.ErrExited):
		t.Fatalf("mcptaskd exited before listening\n%s", d.Logs())
	case err != nil:
		t.Fatalf("mcptaskd did not listen within 60s\n%s", d.Logs())
	}
	return d
}

// count returns how many log records have the message msg.
func (d *daemon) count(msg string) int {
	return len(d.LogRecords(msg))
}

// cleanEnv is the environment without mcptask's own variables.
func cleanEnv() []string { return clitest.CleanEnv() }

// cli runs mcptask against one server with one journal.
type cli struct {
	t       testing.TB
	url     string
	journal string
	env     []string // more variables
}

func newCLI(t testing.TB, url string) *cli {
	return &cli{t: t, url: url, journal: filepath.Join(t.TempDir(), "journal.json")}
}

func (c *cli) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, cliBin, args...)
	cmd.Env = append(cleanEnv(), "GORACE=halt_on_error=1", "MCPTASK_JOURNAL="+c.journal)
	if c.url != "" {
		cmd.Env = append(cmd.Env, "MCPTASK_URL="+c.url)
	}
	cmd.Env = append(cmd.Env, c.env...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// result is the end of one mcptask run.
type result = clitest.Result

// run runs mcptask to its end (within a minute).
func (c *cli) run(args ...string) result {
	c.t.Helper()
	return c.runInput("", args...)
}

// runInput runs mcptask with stdin as its standard input.
func (c *cli) runInput(stdin string, args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := c.command(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	r := result{Args: args, Stdout: out.String(), Stderr: errb.String(), Code: exitCode(err)}
	if ctx.Err() != nil {
		c.t.Fatalf("mcptask did not exit within a minute\n%s", r)
	}
	return r
}

func exitCode(err error) int { return proctest.ExitCode(err) }

// expect checks a run's exit code and that stdout and stderr contain the
// given strings.
func expect(t testing.TB, r result, code int, stdout, stderr []string) {
	t.Helper()
	clitest.Expect(t, r, code, stdout, stderr)
}

// proc is an mcptask running in the background.
type proc struct {
	t        testing.TB
	cmd      *exec.Cmd
	mu       sync.Mutex
	out, err bytes.Buffer
	done     chan struct{}
	waitErr  error
	cancel   context.CancelFunc
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// start starts mcptask in the background.
func (c *cli) start(args ...string) *proc {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	p := &proc{t: c.t, cmd: c.command(ctx, args...), done: make(chan struct{}), cancel: cancel}
	p.cmd.Stdout = lockedWriter{&p.mu, &p.out}
	p.cmd.Stderr = lockedWriter{&p.mu, &p.err}
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	c.t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		cancel()
	})
	return p
}

func (p *proc) output() (stdout, stderr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String(), p.err.String()
}

// waitStderr waits until stderr matches re and returns the first match's
// submatches.
func (p *proc) waitStderr(re *regexp.Regexp, timeout time.Duration) []string {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		_, stderr := p.output()
		if m := re.FindStringSubmatch(stderr); m != nil {
			return m
		}
		select {
		case <-p.done:
			_, stderr = p.output()
			if m := re.FindStringSubmatch(stderr); m != nil {
				return m
			}
			p.t.Fatalf("mcptask exited (%v) before stderr matched %v\n%s", p.waitErr, re, p.result())
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("stderr did not match %v within %v\n%s", re, timeout, p.result())
		}
		time.Sleep(10 * time.Millisecond) // polling the output, not synchronization
	}
}

// wait waits for the process to exit and returns its result.
func (p *proc) wait(timeout time.Duration) result {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("mcptask did not exit within %v\n%s", timeout, p.result())
	}
	return p.result()
}

func (p *proc) result() result {
	stdout, stderr := p.output()
	code := -1
	select {
	case <-p.done:
		code = exitCode(p.waitErr)
	default:
	}
	return result{Args: p.cmd.Args[1:], Stdout: stdout, Stderr: stderr, Code: code}
}

// kill9 kills the process as a crash would.
func (p *proc) kill9() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatal(err)
	}
	p.wait(10 * time.Second)
}

// taskStarted matches the line mcptask call prints when its task starts.
var taskStarted = regexp.MustCompile(`task ([a-z2-7]+) started`)

// freeURL returns an MCP URL on a loopback port where nothing listens.
func freeURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/mcp"
}
