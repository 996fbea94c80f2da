//go:build unix

package command

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
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

// The supervisor's protocol, on a Unix stream socket (fd 3 in the
// supervisor), an ID per command:
//
//	program → supervisor  frames of frameSize bytes (text padded with spaces):
//	                      "S ID" with four descriptors: the command's
//	                      standard input, output and error, and a pipe
//	                      whose content is the command's spec (JSON)
//	                      "T ID", "K ID": SIGTERM, SIGKILL the command's group
//	                      (a signal for a command still starting is sent
//	                      once it has started)
//	supervisor → program  lines:
//	                      "P ID PID": started, as process (and group) PID
//	                      "X ID CODE", "G ID SIGNAL": exited, killed
//	                      "E ID MESSAGE": could not start
//
// Every "S" is answered: "P" then "X" or "G", or "E". The end of the
// socket on either side is the other's death.

// frameSize is the size of a frame from the program.
const frameSize = 32

// frame is a message of the program to the supervisor.
func frame(kind byte, id uint64) []byte {
	b := fmt.Appendf(make([]byte, 0, frameSize), "%c %d", kind, id)
	for len(b) < frameSize {
		b = append(b, ' ')
	}
	return b
}

// spec is what the supervisor is told of a command to start.
type spec struct {
	Argv []string `json:"argv"` // argv[0] an absolute path
	Env  []string `json:"env"`
	Dir  string   `json:"dir"` // absolute
}

// maxSpec bounds a command's spec.
const maxSpec = 16 << 20

// specWriteWait bounds the write of a spec to the supervisor.
const specWriteWait = 30 * time.Second

// group is a command of the supervisor: its process (and group) ID once
// started, and the signal asked for before that.
type group struct {
	pid     int
	pending syscall.Signal
}

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
		mu      sync.Mutex
		groups  = map[uint64]*group{} // commands starting or running, by ID
		closing bool                  // the program is gone: start nothing more
		sendMu  sync.Mutex
	)
	send := func(format string, args ...any) {
		sendMu.Lock()
		defer sendMu.Unlock()
		_, _ = conn.Write(fmt.Appendf(nil, format+"\n", args...))
	}
	kill := func(id uint64, sig syscall.Signal) {
		mu.Lock()
		defer mu.Unlock()
		switch g := groups[id]; {
		case g == nil: // ended: after the reap, the group's ID may be anyone's
		case g.pid > 1:
			_ = syscall.Kill(-g.pid, sig)
		case g.pending != syscall.SIGKILL:
			g.pending = sig // sent once it has started
		}
	}
	killAll := func() {
		mu.Lock()
		defer mu.Unlock()
		closing = true
		for _, g := range groups {
			if g.pid > 1 {
				_ = syscall.Kill(-g.pid, syscall.SIGKILL)
			}
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
	refuse := func(id uint64, err error) {
		mu.Lock()
		delete(groups, id)
		mu.Unlock()
		send("E %d %s", id, oneLine(err))
	}
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
		mu.Lock()
		if err == nil && closing {
			err = errors.New("the program is gone")
		}
		mu.Unlock()
		if err != nil {
			refuse(id, err)
			return
		}
		cmd := &exec.Cmd{Path: sp.Argv[0], Args: sp.Argv, Env: sp.Env, Dir: sp.Dir,
			Stdin: in, Stdout: out, Stderr: errf, SysProcAttr: commandSysProcAttr()}
		if err := cmd.Start(); err != nil {
			refuse(id, err)
			return
		}
		pid := cmd.Process.Pid
		mu.Lock()
		g := groups[id]
		g.pid = pid
		pending := g.pending
		if closing {
			pending = syscall.SIGKILL
		}
		mu.Unlock()
		send("P %d %d", id, pid)
		if pending != 0 {
			_ = syscall.Kill(-pid, pending)
		}
		in.Close()
		out.Close()
		errf.Close()
		go func() {
			var err error
			if peekExit(pid) {
				// The command exited and is not reaped yet (its ID, the
				// group's, is still reserved): kill what it left in its
				// group, and forget it before the reap.
				mu.Lock()
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				delete(groups, id)
				mu.Unlock()
				err = cmd.Wait()
			} else {
				err = cmd.Wait()
				mu.Lock()
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				delete(groups, id)
				mu.Unlock()
			}
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
	for {
		msg, files, err := receiveFrame(conn)
		if err != nil { // the program is gone
			killAll()
			return 0
		}
		kind, arg, _ := strings.Cut(strings.TrimSpace(string(msg)), " ")
		id, perr := strconv.ParseUint(arg, 10, 64)
		switch {
		case perr != nil:
		case kind == "S" && len(files) == 4:
			mu.Lock()
			groups[id] = &group{}
			mu.Unlock()
			go start(id, files[0], files[1], files[2], files[3])
			files = nil
		case kind == "S": // descriptors lost (e.g. none left here)
			send("E %d the command's descriptors did not arrive (%d of 4)", id, len(files))
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

// receiveFrame reads a frame of the program and the descriptors it
// carried, close-on-exec from the start: on Linux by the flag of the
// receive, elsewhere set under syscall.ForkLock (no command of a
// concurrent start may inherit them). Descriptors cut short (none left
// here) are closed, and the frame returned without them.
func receiveFrame(conn *net.UnixConn) ([]byte, []*os.File, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	buf := make([]byte, frameSize)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	var (
		files     []*os.File
		truncated bool
	)
	for got := 0; got < frameSize; {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			syscall.ForkLock.RLock()
			defer syscall.ForkLock.RUnlock()
			var oobn, flags int
			n, oobn, flags, _, rerr = syscall.Recvmsg(int(fd), buf[got:], oob, recvFlags)
			if rerr == syscall.EAGAIN {
				return false
			}
			if rerr == nil && oobn > 0 {
				for _, f := range receivedFiles(oob[:oobn]) {
					syscall.CloseOnExec(int(f.Fd()))
					files = append(files, f)
				}
			}
			truncated = truncated || flags&syscall.MSG_CTRUNC != 0
			return true
		})
		if err == nil {
			err = rerr
		}
		if err == nil && n == 0 {
			err = io.EOF
		}
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, nil, err
		}
		got += n
	}
	if truncated {
		for _, f := range files {
			f.Close()
		}
		files = nil
	}
	return buf, files, nil
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

	writeMu sync.Mutex // a frame at a time

	mu    sync.Mutex
	procs map[uint64]*proc // not ended
	next  uint64
	lost  bool
}

// current is the program's supervisor, nil before the first command.
var (
	currentMu sync.Mutex
	current   *supervisor
)

// theSupervisor returns the program's supervisor, starting it if there
// is none, or if it was lost.
func theSupervisor() (*supervisor, error) {
	currentMu.Lock()
	defer currentMu.Unlock()
	if current != nil && !current.isLost() {
		return current, nil
	}
	exe, err := selfPath()
	if err != nil {
		return nil, err
	}
	// Close-on-exec from the start: no command started meanwhile may
	// hold the socket.
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
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

// isLost reports whether s is gone (or its socket broken).
func (s *supervisor) isLost() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// lose marks s gone and closes its socket: its read ends, and fails what
// it ran.
func (s *supervisor) lose() {
	s.mu.Lock()
	s.lost = true
	s.mu.Unlock()
	s.conn.Close()
}

// read dispatches the supervisor's messages until it is gone.
func (s *supervisor) read() {
	sc := bufio.NewScanner(s.conn)
	for sc.Scan() {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
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
	s.lose()
	_ = s.cmd.Wait()
	s.mu.Lock()
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for _, p := range procs {
		if pid := p.pid.Load(); pid > 1 {
			// Nobody else will kill the group now. (A command whose start
			// was not reported yet dies with its parent-death signal, on
			// Linux.)
			_ = syscall.Kill(-int(pid), syscall.SIGKILL)
		}
		p.done <- exitStatus{err: fmt.Errorf("the commands' supervisor died (%v)", s.cmd.ProcessState)}
	}
}

// write sends a frame, with descriptors (rights) or none.
func (s *supervisor) write(b, rights []byte) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	n, _, err := s.conn.WriteMsgUnix(b, rights, nil)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	return err
}

// startProc starts argv (argv[0] an absolute path) under the program's
// supervisor, with exactly the environment env, in dir (relative to the
// program's working directory).
func startProc(argv, env []string, dir string) (_ *proc, err error) {
	if !supervisorReady.Load() {
		return nil, fmt.Errorf("commands: the program does not call command.Supervise at the start of main, so it cannot supervise commands")
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("the command's directory: %w", err)
	}
	b, err := json.Marshal(spec{Argv: argv, Env: env, Dir: dir})
	if err != nil {
		return nil, err
	}
	if len(b) > maxSpec {
		return nil, fmt.Errorf("the command's arguments and environment are %d bytes, over %d", len(b), maxSpec)
	}
	var theirs, mine []*os.File // the supervisor's ends, the program's
	defer func() {
		for _, f := range theirs {
			f.Close()
		}
		if err != nil {
			for _, f := range mine {
				f.Close()
			}
		}
	}()
	for range 4 {
		r, w, perr := os.Pipe()
		if perr != nil {
			return nil, perr
		}
		if len(theirs) == 0 { // standard input: the supervisor's end reads
			theirs, mine = append(theirs, r), append(mine, w)
		} else if len(theirs) < 3 { // outputs: it writes
			theirs, mine = append(theirs, w), append(mine, r)
		} else { // the spec: it reads
			theirs, mine = append(theirs, r), append(mine, w)
		}
	}
	rights := syscall.UnixRights(int(theirs[0].Fd()), int(theirs[1].Fd()), int(theirs[2].Fd()), int(theirs[3].Fd()))
	specW := mine[3]
	defer specW.Close()
	var s *supervisor
	for attempt := 0; ; attempt++ {
		if s, err = theSupervisor(); err != nil {
			return nil, err
		}
		p := &proc{sup: s, stdin: mine[0], stdout: mine[1], stderr: mine[2], done: make(chan exitStatus, 1)}
		s.mu.Lock()
		if s.lost {
			s.mu.Unlock()
			continue
		}
		s.next++
		p.id = s.next
		s.procs[p.id] = p
		s.mu.Unlock()
		if err = s.write(frame('S', p.id), rights); err != nil {
			s.mu.Lock()
			delete(s.procs, p.id)
			s.mu.Unlock()
			s.lose() // the next attempt starts a new one
			if attempt < 2 {
				continue
			}
			return nil, fmt.Errorf("the commands' supervisor: %w", err)
		}
		// The descriptors in flight hold the supervisor's ends: the
		// program's copies go now, so that a supervisor that dies or
		// stops reading the spec breaks its pipe.
		for _, f := range theirs {
			f.Close()
		}
		theirs = nil
		// The supervisor reads the spec while it is written; if it fails
		// to, the command's end says so ("E").
		_ = specW.SetWriteDeadline(time.Now().Add(specWriteWait))
		_, _ = specW.Write(b)
		return p, nil
	}
}

// signal asks the supervisor to send SIGTERM ('T') or SIGKILL ('K') to
// the command's process group.
func (p *proc) signal(what byte) {
	_ = p.sup.write(frame(what, p.id), nil)
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
