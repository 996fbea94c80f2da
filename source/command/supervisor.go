//go:build unix

package command

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// supervisorEnv, set in its environment, makes a program started by
// this package a supervisor (see Supervise).
const supervisorEnv = "MCPTASK_COMMAND_SUPERVISOR"

// supervisorReady is set once Supervise returned in the program that
// registers commands: it re-executes itself as their supervisor.
var supervisorReady atomic.Bool

// Supervise must be called first thing in the main function (or
// TestMain) of a program that registers commands. In the program itself
// it returns at once. In a copy of it started as the supervisor of a
// command, it runs that command and exits, never returning.
//
// A command runs under a supervisor, a copy of the program (on Linux,
// /proc/self/exe) started with a parent-death signal, because that signal
// reaches the direct child only: the supervisor starts the command in a
// process group of its own (whose members inherit the pipes of the
// command's standard input, output and error), forwards the SIGTERM and
// SIGKILL the program asks for to the whole group, kills what is left of
// the group when the command exits, and kills the whole group with
// SIGKILL when the program dies, however it dies: its parent-death
// signal (Linux), or the end of its control pipe, which the kernel
// closes with the program's last file descriptor (every Unix).
func Supervise() {
	switch os.Getenv(supervisorEnv) {
	case "":
		supervisorReady.Store(true)
		return
	case detachedMode:
		os.Exit(superviseDetached(os.Args[1:]))
	}
	os.Exit(supervise(os.Args[1:]))
}

// supervise runs argv in a process group of its own; fd 3 is the control
// pipe ('T': SIGTERM the group, 'K': SIGKILL it, end: the program died),
// fd 4 the status pipe ("pid N", then "exit N", "signal N" or "error
// MESSAGE").
func supervise(argv []string) int {
	undumpable() // the command is its child: it may not read it (Linux)
	ppid := os.Getppid()
	ctl, status := os.NewFile(3, "control"), os.NewFile(4, "status")
	if ctl == nil || status == nil {
		fmt.Fprintln(os.Stderr, "mcptask command supervisor: started without its pipes")
		return 2
	}
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	os.Unsetenv(supervisorEnv)
	// Terminal signals are not the command's business: the program
	// forwards what it means through the control pipe. SIGTERM is the
	// parent-death signal.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	if len(argv) == 0 {
		fmt.Fprintln(status, "error no command")
		return 2
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = commandSysProcAttr()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(status, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return 1
	}
	pid := cmd.Process.Pid
	fmt.Fprintf(status, "pid %d\n", pid)
	var mu sync.Mutex
	reaped := false
	kill := func(sig syscall.Signal) {
		mu.Lock()
		defer mu.Unlock()
		if !reaped { // after that, the group's ID may be anyone's
			_ = syscall.Kill(-pid, sig)
		}
	}
	go func() {
		b := make([]byte, 1)
		for {
			n, err := ctl.Read(b)
			if n == 1 && b[0] == 'T' {
				kill(syscall.SIGTERM)
			} else if n == 1 && b[0] == 'K' {
				kill(syscall.SIGKILL)
			}
			if err != nil { // the program is gone
				kill(syscall.SIGKILL)
				return
			}
		}
	}()
	go func() {
		for s := range sigs {
			if s == syscall.SIGTERM && os.Getppid() != ppid {
				kill(syscall.SIGKILL)
			}
		}
	}()
	var err error
	if peekExit(pid) {
		// The command exited and is not reaped yet (its ID, the group's,
		// is still reserved): kill what it left in its group.
		kill(syscall.SIGKILL)
		err = cmd.Wait()
	} else {
		err = cmd.Wait()
		kill(syscall.SIGKILL)
	}
	mu.Lock()
	reaped = true
	mu.Unlock()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		fmt.Fprintf(status, "error %v\n", err)
	case ws.Signaled():
		fmt.Fprintf(status, "signal %d\n", int(ws.Signal()))
	default:
		fmt.Fprintf(status, "exit %d\n", ws.ExitStatus())
	}
	return 0
}

// exitStatus is how a command ended, as its supervisor reported it.
type exitStatus struct {
	code   int
	signal syscall.Signal // non-zero: killed by it
	err    error          // it could not start, or its supervisor was lost
}

// proc is a command running under its supervisor.
type proc struct {
	sup            *exec.Cmd
	ctl            *os.File
	stdin          *os.File
	stdout, stderr *os.File
	pid            atomic.Int64 // the command's (and its group's) ID, once known
	done           chan exitStatus
	ctlMu          sync.Mutex
}

// startProc starts argv (argv[0] an absolute path) under a supervisor,
// with exactly the environment env, in dir.
func startProc(argv, env []string, dir string) (_ *proc, err error) {
	if !supervisorReady.Load() {
		return nil, fmt.Errorf("commands: the program does not call command.Supervise at the start of main, so it cannot supervise commands")
	}
	exe, err := selfPath()
	if err != nil {
		return nil, err
	}
	var files []*os.File
	pipe := func() (r, w *os.File) {
		if err != nil {
			return nil, nil
		}
		r, w, err = os.Pipe()
		files = append(files, r, w)
		return r, w
	}
	ctlR, ctlW := pipe()
	stR, stW := pipe()
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	closeAll := func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: exe, Args: append([]string{exe}, argv...),
		Env: append(env[:len(env):len(env)], supervisorEnv+"=1"), Dir: dir,
		Stdin: inR, Stdout: outW, Stderr: errW,
		ExtraFiles:  []*os.File{ctlR, stW},
		SysProcAttr: supervisorSysProcAttr(),
	}
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, fmt.Errorf("starting the command's supervisor: %w", err)
	}
	for _, f := range []*os.File{ctlR, stW, inR, outW, errW} {
		f.Close()
	}
	p := &proc{sup: cmd, ctl: ctlW, stdin: inW, stdout: outR, stderr: errR, done: make(chan exitStatus, 1)}
	go p.readStatus(stR)
	return p, nil
}

func (p *proc) readStatus(r *os.File) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	var st exitStatus
	final := false
	for !final && sc.Scan() {
		kind, arg, _ := strings.Cut(sc.Text(), " ")
		n, _ := strconv.Atoi(arg)
		final = true
		switch kind {
		case "pid":
			p.pid.Store(int64(n))
			final = false
		case "exit":
			st = exitStatus{code: n}
		case "signal":
			st = exitStatus{code: -1, signal: syscall.Signal(n)}
		default: // "error"
			st = exitStatus{err: fmt.Errorf("%s", arg)}
		}
	}
	_ = p.sup.Wait()
	if !final {
		st = exitStatus{err: fmt.Errorf("the command's supervisor died (%v)", p.sup.ProcessState)}
		if pid := p.pid.Load(); pid > 0 {
			// Nobody else will kill the group now.
			_ = syscall.Kill(-int(pid), syscall.SIGKILL)
		}
	}
	p.done <- st
}

// signal asks the supervisor to send SIGTERM ('T') or SIGKILL ('K') to
// the command's process group.
func (p *proc) signal(what byte) {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	if p.ctl != nil {
		_, _ = p.ctl.Write([]byte{what})
	}
}

// release closes the program's ends of the pipes but the outputs (read
// to their end by their readers).
func (p *proc) release() {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	if p.ctl != nil {
		p.ctl.Close()
		p.ctl = nil
	}
	p.stdin.Close()
}

// openNoBlock opens path for reading without following a symbolic link
// and without blocking (a FIFO put in a file's place).
func openNoBlock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
}
