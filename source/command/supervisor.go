//go:build unix

package command

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
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
// it returns at once. In a copy of it started as the supervisor of its
// commands, it supervises them and exits, never returning.
//
// The commands of a program run under one supervisor, a copy of the
// program (on Linux, /proc/self/exe) started with a parent-death signal
// when the first command starts, and started again if it is lost,
// because that signal reaches the direct child only: the supervisor
// starts each command in a process group of its own (whose members
// inherit the pipes of the command's standard input, output and error),
// forwards the SIGTERM and SIGKILL the program asks for to the whole
// group, kills what is left of a group when its command exits, and kills
// every group with SIGKILL when the program dies, however it dies: its
// parent-death signal (Linux), or the end of its control socket, which
// the kernel closes with the program's last file descriptor (every Unix).
// If the supervisor dies, the program kills the groups it knows of and
// fails their tasks. The supervisor starts with an empty environment
// (each command gets exactly its own) and, on Linux, is not dumpable: a
// command can read neither the program's environment nor another
// command's through it.
func Supervise() {
	switch os.Getenv(supervisorEnv) {
	case "":
		supervisorReady.Store(true)
		return
	case detachedMode:
		os.Exit(superviseDetached(os.Args[1:]))
	case sharedMode:
		os.Exit(supervise())
	}
	fmt.Fprintf(os.Stderr, "mcptask command supervisor: unknown mode %q\n", os.Getenv(supervisorEnv))
	os.Exit(2)
}

// sharedMode is supervisorEnv's value for the program's supervisor.
const sharedMode = "shared"

// The supervisor's protocol, on a SOCK_SEQPACKET socket (fd 3 in the
// supervisor), one message per packet, an ID per command:
//
//	program → supervisor  "S ID" with four descriptors: the command's
//	                      standard input, output and error, and a pipe
//	                      whose content is the command's spec (JSON)
//	                      "T ID", "K ID": SIGTERM, SIGKILL the command's group
//	supervisor → program  "P ID PID": started, as process (and group) PID
//	                      "X ID CODE", "G ID SIGNAL": exited, killed
//	                      "E ID MESSAGE": could not start
//
// The end of the socket on either side is the other's death.

// spec is what the supervisor is told of a command to start.
type spec struct {
	Argv []string `json:"argv"` // argv[0] an absolute path
	Env  []string `json:"env"`
	Dir  string   `json:"dir,omitempty"`
}

// maxSpec bounds a command's spec as the supervisor reads it.
const maxSpec = 16 << 20

// supervise is the supervisor: it serves the program on fd 3 until the
// program is gone, then kills every group it started and returns.
func supervise() int {
	undumpable() // its commands are its children: they may not read it (Linux)
	ppid := os.Getppid()
	f := os.NewFile(3, "control")
	if f == nil {
		fmt.Fprintln(os.Stderr, "mcptask command supervisor: started without its socket")
		return 2
	}
	c, err := net.FileConn(f)
	f.Close()
	conn, ok := c.(*net.UnixConn)
	if err != nil || !ok {
		fmt.Fprintln(os.Stderr, "mcptask command supervisor: fd 3 is not its socket:", err)
		return 2
	}
	os.Unsetenv(supervisorEnv)
	var (
		mu     sync.Mutex
		groups = map[uint64]int{} // running commands, by ID: their group (none once reaped)
	)
	send := func(format string, args ...any) {
		_, _ = conn.Write(fmt.Appendf(nil, format, args...))
	}
	kill := func(id uint64, sig syscall.Signal) {
		mu.Lock()
		defer mu.Unlock()
		if pid, ok := groups[id]; ok { // after the reap, the group's ID may be anyone's
			_ = syscall.Kill(-pid, sig)
		}
	}
	killAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, pid := range groups {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	// Terminal signals are not the commands' business: the program
	// forwards what it means. SIGTERM is the parent-death signal.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	go func() {
		for s := range sigs {
			if s == syscall.SIGTERM && os.Getppid() != ppid {
				killAll()
				os.Exit(0)
			}
		}
	}()
	start := func(id uint64, in, out, errf, specf *os.File) {
		defer in.Close()
		defer out.Close()
		defer errf.Close()
		var sp spec
		b, err := io.ReadAll(io.LimitReader(specf, maxSpec+1))
		specf.Close()
		switch {
		case err != nil:
		case len(b) > maxSpec:
			err = fmt.Errorf("the command's spec is over %d bytes", maxSpec)
		default:
			err = json.Unmarshal(b, &sp)
		}
		if err == nil && len(sp.Argv) == 0 {
			err = errors.New("no command")
		}
		if err != nil {
			send("E %d %s", id, oneLine(err))
			return
		}
		cmd := &exec.Cmd{Path: sp.Argv[0], Args: sp.Argv, Env: sp.Env, Dir: sp.Dir,
			Stdin: in, Stdout: out, Stderr: errf, SysProcAttr: commandSysProcAttr()}
		mu.Lock()
		err = cmd.Start()
		if err == nil {
			groups[id] = cmd.Process.Pid
		}
		mu.Unlock()
		if err != nil {
			send("E %d %s", id, oneLine(err))
			return
		}
		pid := cmd.Process.Pid
		send("P %d %d", id, pid)
		in.Close()
		out.Close()
		errf.Close()
		go func() {
			if peekExit(pid) {
				// The command exited and is not reaped yet (its ID, the
				// group's, is still reserved): kill what it left in its
				// group.
				kill(id, syscall.SIGKILL)
				err = cmd.Wait()
			} else {
				err = cmd.Wait()
				kill(id, syscall.SIGKILL)
			}
			mu.Lock()
			delete(groups, id)
			mu.Unlock()
			ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
			switch {
			case !ok:
				send("E %d %s", id, oneLine(err))
			case ws.Signaled():
				send("G %d %d", id, int(ws.Signal()))
			default:
				send("X %d %d", id, ws.ExitStatus())
			}
		}()
	}
	buf := make([]byte, 64)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 { // the program is gone
			killAll()
			return 0
		}
		files := receivedFiles(oob[:oobn])
		kind, arg, _ := strings.Cut(string(buf[:n]), " ")
		id, perr := strconv.ParseUint(arg, 10, 64)
		switch {
		case perr != nil:
		case kind == "S" && len(files) == 4:
			go start(id, files[0], files[1], files[2], files[3])
			files = nil
		case kind == "T":
			kill(id, syscall.SIGTERM)
		case kind == "K":
			kill(id, syscall.SIGKILL)
		}
		for _, f := range files { // a message not understood
			f.Close()
		}
	}
}

// receivedFiles returns the descriptors a message carried.
func receivedFiles(oob []byte) []*os.File {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "received"))
		}
	}
	return files
}

// oneLine is err's message on one line.
func oneLine(err error) string { return strings.ReplaceAll(fmt.Sprint(err), "\n", " ") }

// exitStatus is how a command ended, as its supervisor reported it.
type exitStatus struct {
	code   int
	signal syscall.Signal // non-zero: killed by it
	err    error          // it could not start, or its supervisor was lost
}

// proc is a command running under the supervisor.
type proc struct {
	sup            *supervisor
	id             uint64
	stdin          *os.File
	stdout, stderr *os.File
	pid            atomic.Int64 // the command's (and its group's) ID, once known
	done           chan exitStatus
}

// supervisor is the program's side of its supervisor.
type supervisor struct {
	cmd  *exec.Cmd
	conn *net.UnixConn

	mu    sync.Mutex
	procs map[uint64]*proc // not ended
	next  uint64
	lost  bool
}

// current is the program's supervisor, nil before the first command or
// after it was lost.
var (
	currentMu sync.Mutex
	current   *supervisor
)

// theSupervisor returns the program's supervisor, starting it if there
// is none (or it was lost).
func theSupervisor() (*supervisor, error) {
	currentMu.Lock()
	defer currentMu.Unlock()
	if current != nil {
		current.mu.Lock()
		lost := current.lost
		current.mu.Unlock()
		if !lost {
			return current, nil
		}
	}
	exe, err := selfPath()
	if err != nil {
		return nil, err
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("the supervisor's socket: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "supervisor"), os.NewFile(uintptr(fds[1]), "control")
	defer theirs.Close()
	c, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		return nil, fmt.Errorf("the supervisor's socket: %w", err)
	}
	cmd := &exec.Cmd{
		Path: exe, Args: []string{exe},
		Env: []string{supervisorEnv + "=" + sharedMode},
		// Its standard error is the program's: what it cannot say on
		// the socket (a crash) is seen there.
		Stderr:      os.Stderr,
		ExtraFiles:  []*os.File{theirs},
		SysProcAttr: supervisorSysProcAttr(),
	}
	if err := cmd.Start(); err != nil {
		c.Close()
		return nil, fmt.Errorf("starting the commands' supervisor: %w", err)
	}
	s := &supervisor{cmd: cmd, conn: c.(*net.UnixConn), procs: map[uint64]*proc{}}
	go s.read()
	current = s
	return s, nil
}

// read dispatches the supervisor's messages until it is gone.
func (s *supervisor) read() {
	buf := make([]byte, 4096)
	for {
		n, err := s.conn.Read(buf)
		if err != nil || n == 0 {
			break
		}
		kind, rest, _ := strings.Cut(string(buf[:n]), " ")
		idText, arg, _ := strings.Cut(rest, " ")
		id, _ := strconv.ParseUint(idText, 10, 64)
		num, _ := strconv.Atoi(arg)
		s.mu.Lock()
		p := s.procs[id]
		if p != nil && kind != "P" {
			delete(s.procs, id)
		}
		s.mu.Unlock()
		if p == nil {
			continue
		}
		switch kind {
		case "P":
			p.pid.Store(int64(num))
		case "X":
			p.done <- exitStatus{code: num}
		case "G":
			p.done <- exitStatus{code: -1, signal: syscall.Signal(num)}
		default: // "E"
			p.done <- exitStatus{err: errors.New(arg)}
		}
	}
	s.conn.Close()
	_ = s.cmd.Wait()
	s.mu.Lock()
	s.lost = true
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for _, p := range procs {
		if pid := p.pid.Load(); pid > 0 {
			// Nobody else will kill the group now.
			_ = syscall.Kill(-int(pid), syscall.SIGKILL)
		}
		p.done <- exitStatus{err: fmt.Errorf("the commands' supervisor died (%v)", s.cmd.ProcessState)}
	}
}

// startProc starts argv (argv[0] an absolute path) under the program's
// supervisor, with exactly the environment env, in dir (empty: the
// program's working directory when its supervisor started).
func startProc(argv, env []string, dir string) (_ *proc, err error) {
	if !supervisorReady.Load() {
		return nil, fmt.Errorf("commands: the program does not call command.Supervise at the start of main, so it cannot supervise commands")
	}
	b, err := json.Marshal(spec{Argv: argv, Env: env, Dir: dir})
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
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	specR, specW := pipe()
	defer func() {
		for _, f := range []*os.File{inR, outW, errW, specR, specW} {
			if f != nil {
				f.Close()
			}
		}
		if err != nil {
			for _, f := range []*os.File{inW, outR, errR} {
				if f != nil {
					f.Close()
				}
			}
		}
	}()
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		s, err := theSupervisor()
		if err != nil {
			return nil, err
		}
		p := &proc{sup: s, stdin: inW, stdout: outR, stderr: errR, done: make(chan exitStatus, 1)}
		s.mu.Lock()
		if s.lost {
			s.mu.Unlock()
			continue
		}
		s.next++
		p.id = s.next
		s.procs[p.id] = p
		s.mu.Unlock()
		rights := syscall.UnixRights(int(inR.Fd()), int(outW.Fd()), int(errW.Fd()), int(specR.Fd()))
		if _, _, err = s.conn.WriteMsgUnix(fmt.Appendf(nil, "S %d", p.id), rights, nil); err != nil {
			s.mu.Lock()
			delete(s.procs, p.id)
			s.mu.Unlock()
			if attempt == 0 { // lost just now: once more, with a new one
				continue
			}
			return nil, fmt.Errorf("the commands' supervisor: %w", err)
		}
		// The supervisor reads the spec while it is written; if it dies
		// meanwhile, the command's end says so.
		_, _ = specW.Write(b)
		return p, nil
	}
}

// signal asks the supervisor to send SIGTERM ('T') or SIGKILL ('K') to
// the command's process group.
func (p *proc) signal(what byte) {
	_, _ = p.sup.conn.Write(fmt.Appendf(nil, "%c %d", what, p.id))
}

// release closes the program's end of the command's standard input (its
// outputs are read to their end by their readers).
func (p *proc) release() {
	p.stdin.Close()
}

// openNoBlock opens path for reading without following a symbolic link
// and without blocking (a FIFO put in a file's place).
func openNoBlock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
}
