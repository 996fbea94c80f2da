package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A command of Tool.SurvivesRestart runs under a detached supervisor: a
// copy of the program in a session of its own (no parent-death signal),
// working in the run's directory, which outlives the program:
//
//	stdout, stderr  the command's outputs (at most MaxDetachedOutput bytes each)
//	in              a FIFO: lines written to it reach the command's standard input
//	ctl             a FIFO: 'T' sends SIGTERM to the command's group, 'K' SIGKILL
//	pid             the command's process (and group) ID, once it started
//	status          how it ended: "exit N", "signal N" or "error MESSAGE"
//	attach          a program attached to the run holds a shared lock on it
//
// The supervisor holds an exclusive lock on the directory while it runs,
// so that a program can tell a live run from a dead one. A program
// re-attaches by its task's external reference, which names the
// directory (and the host).

// detachedSupported: commands may survive a restart here.
const detachedSupported = true

// detachedMode is supervisorEnv's value for a detached supervisor.
const detachedMode = "detached"

// The detached supervisor's other variables: its run's directory and its
// grace without a program attached.
const (
	detachedDirEnv   = "MCPTASK_COMMAND_DIR"
	detachedGraceEnv = "MCPTASK_COMMAND_GRACE"
)

// detachedStartWait bounds how long a call waits for its detached
// supervisor to start the command (and the create for the run's
// directory to be recorded).
const detachedStartWait = 10 * time.Second

// detachedRecordEvery is how often, at most, a detached run records how
// far its outputs were logged while lines come.
const detachedRecordEvery = 5 * time.Second

// detachedPoll is how often a detached run's files are looked at.
const detachedPoll = 50 * time.Millisecond

// detachedRunPrefix starts the name of a detached run's directory.
const detachedRunPrefix = "task-"

// detachedRef is a task's external reference while its command runs
// detached: where, and how far its outputs were logged.
type detachedRef struct {
	Dir  string `json:"runDir"`
	Host string `json:"host"`
	// Out and Err are how many bytes of stdout and stderr the task's log
	// holds (input requests up to Out answered).
	Out int64 `json:"stdout,omitempty"`
	Err int64 `json:"stderr,omitempty"`
}

// superviseDetached is the detached supervisor: it runs argv in the
// directory of detachedDirEnv and exits once the command ended (or was
// abandoned past its grace).
func superviseDetached(argv []string) int {
	undumpable()
	dir := os.Getenv(detachedDirEnv)
	grace, err := time.ParseDuration(os.Getenv(detachedGraceEnv))
	if dir == "" || err != nil || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "mcptask command supervisor: started without its directory, grace or command")
		return 2
	}
	os.Unsetenv(supervisorEnv)
	os.Unsetenv(detachedDirEnv)
	os.Unsetenv(detachedGraceEnv)
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGPIPE)
	path := func(name string) string { return filepath.Join(dir, name) }
	final := func(line string) {
		_ = os.WriteFile(path("status.tmp"), []byte(line+"\n"), 0o600)
		_ = os.Rename(path("status.tmp"), path("status"))
	}
	lock, err := os.Open(dir)
	if err == nil {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		final("error locking the run's directory: " + err.Error())
		return 1
	}
	for _, f := range []string{"in", "ctl"} {
		if err := syscall.Mkfifo(path(f), 0o600); err != nil {
			final("error " + err.Error())
			return 1
		}
	}
	in, err1 := os.OpenFile(path("in"), os.O_RDWR, 0)
	ctl, err2 := os.OpenFile(path("ctl"), os.O_RDWR, 0)
	outF, err3 := os.OpenFile(path("stdout"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	errF, err4 := os.OpenFile(path("stderr"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	attach, err5 := os.OpenFile(path("attach"), os.O_CREATE|os.O_RDONLY, 0o600)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		final("error " + strings.ReplaceAll(err.Error(), "\n", "; "))
		return 1
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		final("error " + err.Error())
		return 1
	}
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = commandSysProcAttr()
	if err := cmd.Start(); err != nil {
		final("error " + strings.ReplaceAll(err.Error(), "\n", " "))
		return 1
	}
	outW.Close()
	errW.Close()
	pid := cmd.Process.Pid
	_ = os.WriteFile(path("pid.tmp"), []byte(strconv.Itoa(pid)+"\n"), 0o600)
	_ = os.Rename(path("pid.tmp"), path("pid"))

	var mu sync.Mutex
	reaped := false
	kill := func(sig syscall.Signal) {
		mu.Lock()
		defer mu.Unlock()
		if !reaped {
			_ = syscall.Kill(-pid, sig)
		}
	}
	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); copyCapped(outF, outR) }()
	go func() { defer copies.Done(); copyCapped(errF, errR) }()
	go func() { _, _ = io.Copy(stdin, in) }() // answers, line by line
	go func() {
		b := make([]byte, 1)
		for {
			if n, err := ctl.Read(b); err != nil {
				return
			} else if n == 1 && b[0] == 'T' {
				kill(syscall.SIGTERM)
			} else if n == 1 && b[0] == 'K' {
				kill(syscall.SIGKILL)
			}
		}
	}()
	abandoned := atomic.Bool{}
	go func() {
		// A program attached holds a shared lock on attach: while none
		// does for longer than grace, the command is killed.
		alone := time.Time{}
		for range time.Tick(250 * time.Millisecond) {
			if syscall.Flock(int(attach.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
				alone = time.Time{} // attached
				continue
			}
			_ = syscall.Flock(int(attach.Fd()), syscall.LOCK_UN)
			if alone.IsZero() {
				alone = time.Now()
			} else if time.Since(alone) > grace {
				abandoned.Store(true)
				kill(syscall.SIGKILL)
				return
			}
		}
	}()
	waitErr := cmd.Wait()
	kill(syscall.SIGKILL) // what it left in its group
	mu.Lock()
	reaped = true
	mu.Unlock()
	copies.Wait()
	outF.Close()
	errF.Close()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case abandoned.Load():
		final(fmt.Sprintf("error no program re-attached to the command within %v: its process group was killed", grace))
	case !ok:
		final(fmt.Sprintf("error %v", waitErr))
	case ws.Signaled():
		final(fmt.Sprintf("signal %d", int(ws.Signal())))
	default:
		final(fmt.Sprintf("exit %d", ws.ExitStatus()))
	}
	return 0
}

// copyCapped copies r to w up to MaxDetachedOutput bytes, then says so
// once and drops the rest (read to its end, so that the command never
// blocks on a full pipe).
func copyCapped(w io.Writer, r io.Reader) {
	n, _ := io.CopyN(w, r, MaxDetachedOutput)
	if n == MaxDetachedOutput {
		fmt.Fprintf(w, "\n[mcptask: the output beyond %d bytes was dropped]\n", MaxDetachedOutput)
		_, _ = io.Copy(io.Discard, r)
	}
}

// detached is a program's side of a detached run.
type detached struct {
	dir    string
	attach *os.File // holds the shared lock while attached
	in     *os.File // the command's standard input (the FIFO)
	ctl    *os.File
	done   chan exitStatus
	ended  atomic.Bool // the status file is there
	stop   chan struct{}
	once   sync.Once
}

// startDetached starts argv under a detached supervisor in a new run
// directory and waits until the command runs.
func startDetached(argv []string, environ func(resultPath string) []string, dir, taskID string, grace time.Duration) (*detached, error) {
	if !supervisorReady.Load() {
		return nil, fmt.Errorf("commands: the program does not call command.Supervise at the start of main, so it cannot supervise commands")
	}
	parent, err := runParent()
	if err != nil {
		return nil, err
	}
	run, err := os.MkdirTemp(parent, detachedRunPrefix+safeName(taskID)+"-")
	if err != nil {
		return nil, err
	}
	env := environ(filepath.Join(run, "result.json"))
	exe, err := selfPath()
	if err != nil {
		return nil, err
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	sup := &exec.Cmd{
		Path: exe, Args: append([]string{exe}, argv...), Dir: dir,
		Env: append(env[:len(env):len(env)], supervisorEnv+"="+detachedMode, detachedDirEnv+"="+run,
			detachedGraceEnv+"="+grace.String()),
		Stdin: devnull, Stdout: devnull, Stderr: devnull,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := sup.Start(); err != nil {
		_ = os.RemoveAll(run)
		return nil, fmt.Errorf("starting the command's supervisor: %w", err)
	}
	go func() { _ = sup.Wait() }() // reaped here while this program lives
	deadline := time.Now().Add(detachedStartWait)
	for {
		if _, err := os.Stat(filepath.Join(run, "pid")); err == nil {
			break
		}
		if st, err := os.ReadFile(filepath.Join(run, "status")); err == nil {
			_ = os.RemoveAll(run)
			return nil, fmt.Errorf("the command's supervisor: %s", strings.TrimSpace(string(st)))
		}
		if time.Now().After(deadline) {
			_ = os.RemoveAll(run)
			return nil, fmt.Errorf("the command's supervisor did not start the command within %v", detachedStartWait)
		}
		time.Sleep(detachedPoll)
	}
	return attachDetached(run)
}

// attachDetached attaches to the detached run in dir: its supervisor
// alive, or its command ended (a status).
func attachDetached(dir string) (*detached, error) {
	path := func(name string) string { return filepath.Join(dir, name) }
	attach, err := os.OpenFile(path("attach"), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("the run's directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(attach.Fd()), syscall.LOCK_SH); err != nil {
		attach.Close()
		return nil, err
	}
	d := &detached{dir: dir, attach: attach, done: make(chan exitStatus, 1), stop: make(chan struct{})}
	if _, err := os.Stat(path("status")); err != nil && !supervised(dir) {
		d.close()
		return nil, fmt.Errorf("the command's supervisor is gone and left no exit status (was the machine restarted?)")
	}
	// O_RDWR: never blocks, whether the supervisor still reads or not.
	d.in, _ = os.OpenFile(path("in"), os.O_RDWR, 0)
	d.ctl, _ = os.OpenFile(path("ctl"), os.O_RDWR, 0)
	go d.watch()
	return d, nil
}

// supervised reports whether a supervisor holds the run's directory.
func supervised(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// watch waits for the command's status (or its supervisor's death).
func (d *detached) watch() {
	t := time.NewTicker(detachedPoll)
	defer t.Stop()
	for {
		if b, err := os.ReadFile(filepath.Join(d.dir, "status")); err == nil {
			d.ended.Store(true)
			d.done <- parseStatus(strings.TrimSpace(string(b)))
			return
		}
		if !supervised(d.dir) {
			if _, err := os.Stat(filepath.Join(d.dir, "status")); err == nil {
				continue // written just before it ended
			}
			d.ended.Store(true)
			d.done <- exitStatus{err: errors.New("the command's supervisor died without an exit status")}
			return
		}
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
	}
}

// parseStatus reads a status line.
func parseStatus(line string) exitStatus {
	kind, arg, _ := strings.Cut(line, " ")
	n, _ := strconv.Atoi(arg)
	switch kind {
	case "exit":
		return exitStatus{code: n}
	case "signal":
		return exitStatus{code: -1, signal: syscall.Signal(n)}
	}
	return exitStatus{err: errors.New(arg)}
}

// signal sends 'T' or 'K' to the supervisor.
func (d *detached) signal(what byte) {
	if d.ctl != nil {
		_, _ = d.ctl.Write([]byte{what})
	}
}

// close detaches: the supervisor's grace starts.
func (d *detached) close() {
	d.once.Do(func() {
		close(d.stop)
		for _, f := range []*os.File{d.in, d.ctl, d.attach} {
			if f != nil {
				f.Close()
			}
		}
	})
}

// tail reads an output file from off as it grows, until the command
// ended and the file is read to its end, or stop.
type tail struct {
	d    *detached
	f    *os.File
	stop <-chan struct{}
}

func (t *tail) Read(p []byte) (int, error) {
	for {
		n, err := t.f.Read(p)
		if n > 0 || (err != nil && !errors.Is(err, io.EOF)) {
			return n, err
		}
		if t.d.ended.Load() {
			// The status comes after the last byte: one more read.
			if n, err := t.f.Read(p); n > 0 {
				return n, err
			}
			return 0, io.EOF
		}
		select {
		case <-t.stop:
			return 0, io.EOF
		case <-time.After(detachedPoll):
		}
	}
}

// runDetached runs argv as t's command under a detached supervisor, or
// re-attaches to the one the task's external reference names.
func (c *Commands) runDetached(ctx context.Context, t *tool, argv []string, tk *mcptask.Task) (*mcp.CallToolResult, error) {
	host, _ := os.Hostname()
	raw, err := tk.ExternalRef(ctx)
	if err != nil {
		return nil, err
	}
	var (
		ref        detachedRef
		d          *detached
		reattached bool
	)
	resultPath := ""
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), &ref); err != nil || ref.Dir == "" {
			return nil, internalError("command %s: the task's recorded run %q is not one of this tool's; the outcome is unknown", t.Name, raw)
		}
		if ref.Host != host {
			return nil, internalError("command %s ran on host %s, not on this one (%s): its outcome is unknown here", t.Name, ref.Host, host)
		}
		if d, err = attachDetached(ref.Dir); err != nil {
			return nil, internalError("command %s: cannot re-attach to its run in %s: %v; its outcome is unknown", t.Name, ref.Dir, err)
		}
		reattached = true
		c.log.Info("re-attached to a command", "tool", t.Name, "task", tk.ID(), "runDir", ref.Dir)
		tk.Logf("re-attached to the command (mcptask restarted)")
	} else {
		// The result file is in the run's directory.
		environ := func(resultPath string) []string { return t.environ(resultPath, tk.ID()) }
		if d, err = startDetached(argv, environ, t.Dir, tk.ID(), t.RestartGrace); err != nil {
			return nil, internalError("command %s could not start: %v", t.Name, err)
		}
		ref = detachedRef{Dir: d.dir, Host: host}
		if err := c.recordDetached(ctx, tk, &ref); err != nil {
			d.signal('K')
			d.close()
			return nil, fmt.Errorf("recording the command's run: %w", err)
		}
	}
	resultPath = filepath.Join(ref.Dir, "result.json")
	defer d.close()

	lg := newTaskLog(t.LogTail, nil)
	runCtx := ctx
	if t.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeoutCause(ctx, t.Timeout, errTimeout)
		defer cancel()
	}
	ioCtx, stopIO := context.WithCancel(ctx)
	defer stopIO()
	sw := newStatusWriter(ctx, tk, c.log)
	if reattached {
		sw.set("re-attached to the command")
	}
	var (
		mu      sync.Mutex
		offsets = [2]int64{ref.Out, ref.Err}
	)
	// The offsets recorded (after the task's log was written) let a
	// re-attachment log only what the task's log lacks.
	record := func() {
		mu.Lock()
		r := ref
		r.Out, r.Err = offsets[0], offsets[1]
		mu.Unlock()
		_ = c.recordDetached(context.WithoutCancel(ctx), tk, &r)
	}
	// The offsets are of whole lines processed, recorded (the task's log
	// written first) at the first line, then at most every
	// detachedRecordEvery, and at once after an answered input request.
	var lastRecord time.Time
	processed := func(i int) func(int64, bool) {
		return func(off int64, asked bool) {
			mu.Lock()
			offsets[i] = max(offsets[i], off)
			due := asked || time.Since(lastRecord) >= detachedRecordEvery
			if due {
				lastRecord = time.Now()
			}
			mu.Unlock()
			if due {
				tk.FlushLog()
				record()
			}
		}
	}
	var wg sync.WaitGroup
	for i, name := range []string{"stdout", "stderr"} {
		f, err := os.Open(filepath.Join(ref.Dir, name))
		if err != nil {
			return nil, internalError("command %s: its output %s: %v", t.Name, name, err)
		}
		defer f.Close()
		logged := offsets[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.readOutputFrom(ioCtx, t, d.in, &tail{d: d, f: f, stop: ioCtx.Done()}, lg, sw, tk, i == 0, logged, processed(i))
		}()
	}

	var es exitStatus
	select {
	case es = <-d.done:
	case <-runCtx.Done():
		if ctx.Err() != nil && !tk.Cancelled() {
			// A graceful stop or a takeover: the command runs on, and
			// the next run of the task re-attaches to it.
			stopIO()
			wg.Wait()
			sw.close(false)
			tk.FlushLog()
			record()
			c.log.Info("left a command running for the next start to re-attach to", "tool", t.Name, "task", tk.ID(), "runDir", ref.Dir)
			return nil, context.Cause(ctx)
		}
		es = stopGroup(d.signal, d.done, t.KillGrace)
	}
	wg.Wait() // the outputs to their end (the status comes after them)
	sw.close(ctx.Err() == nil && es.err == nil)
	res, err := c.outcome(ctx, runCtx, t, es, lg, resultPath, tk.ID())
	d.close()
	_ = os.RemoveAll(ref.Dir)
	c.log.Info("command ended", "tool", t.Name, "task", tk.ID(), "exitCode", es.code, "signal", int(es.signal), "err", es.err, "reattached", reattached)
	return res, err
}

// recordDetached records the task's detached run.
func (c *Commands) recordDetached(ctx context.Context, tk *mcptask.Task, ref *detachedRef) error {
	b, _ := json.Marshal(ref)
	return tk.SetExternalRef(ctx, string(b))
}

// sweepDetachedRuns removes the directories of detached runs that no
// supervisor holds and that ended more than a day ago (tasks nobody
// re-attached to).
func sweepDetachedRuns() {
	parent, err := runParent()
	if err != nil {
		return
	}
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), detachedRunPrefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		fi, err := os.Stat(filepath.Join(dir, "status"))
		if errors.Is(err, fs.ErrNotExist) || err != nil || time.Since(fi.ModTime()) < 24*time.Hour || supervised(dir) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}
