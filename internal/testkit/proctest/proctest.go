// Package proctest runs a server process, such as mcptaskd, for tests and
// benchmarks: it builds the binary, starts the process, waits for the
// "listening on URL" line it prints on standard output, keeps the JSON log
// records it writes on standard error, and signals, kills and reaps it.
//
// It does not depend on package testing: its functions return errors, and
// test helpers wrap them with t.Fatal.
package proctest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build runs "go build -o out [-race] pkg", with the command's output
// going to w. It returns go build's error as is.
func Build(ctx context.Context, out, pkg string, race bool, w io.Writer) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Stdout, cmd.Stderr = w, w
	return cmd.Run()
}

// Config describes a process to start.
type Config struct {
	// Path is the binary to run, Args its arguments (without the name).
	Path string
	Args []string
	// Env is the process's environment; nil means this process's own.
	Env []string
	// MaxLog, if positive, stops Logs from growing once it holds that
	// many bytes; later lines still reach OnLog.
	MaxLog int
	// OnLog, if not nil, is called with every line the process writes
	// on standard error (with its newline, if any), in order, from one
	// goroutine.
	OnLog func(line []byte)
}

// ListenPrefix starts the standard output line that gives the process's
// URL.
const ListenPrefix = "listening on "

// ErrExited is returned by WaitListening when the process exited before
// it printed its listening line.
var ErrExited = errors.New("process exited before listening")

// ErrTimeout is returned by WaitListening and WaitHTTPOK when their
// timeout passes.
var ErrTimeout = errors.New("timed out")

// Process is one running process started by Start.
type Process struct {
	cmd  *exec.Cmd
	urls chan string

	mu     sync.Mutex
	logs   bytes.Buffer
	out    bytes.Buffer // standard output
	maxLog int

	exited  chan struct{} // closed once the process is reaped
	waitErr error
}

// Start starts the process c describes and returns at once; its output is
// read in the background until it exits. Call WaitListening to wait for
// its URL, and make sure it ends (Kill) so that it is reaped.
func Start(c Config) (*Process, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = c.Env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, urls: make(chan string, 1), maxLog: c.MaxLog, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var readers sync.WaitGroup
	readers.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			if p.maxLog <= 0 || p.out.Len() < p.maxLog {
				p.out.WriteString(sc.Text() + "\n")
			}
			p.mu.Unlock()
			if u, ok := strings.CutPrefix(sc.Text(), ListenPrefix); ok {
				select {
				case p.urls <- u:
				default: // only the first one counts
				}
			}
		}
	})
	readers.Go(func() {
		r := bufio.NewReaderSize(stderr, 1<<16)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 && c.OnLog != nil {
				c.OnLog(line)
			}
			p.mu.Lock()
			if p.maxLog <= 0 || p.logs.Len() < p.maxLog {
				p.logs.Write(line)
			}
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	})
	go func() {
		readers.Wait() // Wait closes the pipes: read them to the end first
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// WaitListening waits until the process prints its listening line and
// returns the URL on it. It returns ErrExited if the process exits first,
// ErrTimeout once timeout passes, or ctx's error; it does not stop the
// process.
func (p *Process) WaitListening(ctx context.Context, timeout time.Duration) (string, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case u := <-p.urls:
		return u, nil
	case <-p.exited:
		return "", ErrExited
	case <-timer.C:
		return "", ErrTimeout
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Stdout returns what the process has written on standard output so
// far.
func (p *Process) Stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Logs returns what the process has written on standard error so far.
func (p *Process) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// LogRecords returns the JSON log records in Logs whose "msg" is msg.
func (p *Process) LogRecords(msg string) []map[string]any {
	var out []map[string]any
	for line := range strings.Lines(p.Logs()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// Pid returns the process's ID.
func (p *Process) Pid() int {
	return p.cmd.Process.Pid
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error {
	return p.cmd.Process.Signal(sig)
}

// Kill kills the process with SIGKILL, unless it has exited, and waits
// until it is reaped.
func (p *Process) Kill() {
	if p.Running() {
		p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.exited
}

// Exited is closed once the process has exited and been reaped and its
// output read to the end.
func (p *Process) Exited() <-chan struct{} {
	return p.exited
}

// Running reports whether the process has not yet been reaped.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Err returns how the process ended (exec.Cmd.Wait's error); it is
// meaningful only once Exited is closed.
func (p *Process) Err() error {
	select {
	case <-p.exited:
		return p.waitErr
	default:
		return nil
	}
}

// WaitHTTPOK polls url with GET (every 10ms) until it answers 200 OK, and
// returns nil then, ErrTimeout once timeout passes, or ctx's error.
func WaitHTTPOK(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return ErrTimeout
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronization
	}
}

// ExitCode returns the exit code of a process from its exec.Cmd.Wait (or
// Run) error: 0 for nil, 128+N for a process killed by signal N, -1 when
// err is not an exit status (the process did not start).
func ExitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	default:
		return -1
	}
}
