//go:build unix && !linux

package command

import (
	"os"
	"syscall"
)

// selfPath is the program's own executable.
func selfPath() (string, error) { return os.Executable() }

// supervisorSysProcAttr: no parent-death signal outside Linux; the end of
// the supervisor's socket tells it its program died.
func supervisorSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// commandSysProcAttr: the command leads a process group of its own.
func commandSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// peekExit cannot wait without reaping here: the group is killed just
// after the command is reaped instead.
func peekExit(int) bool { return false }

// undumpable does nothing here: PR_SET_DUMPABLE is Linux's.
func undumpable() {}

// recvFlags: no MSG_CMSG_CLOEXEC everywhere; receiveFrame sets the flag
// under syscall.ForkLock instead.
const recvFlags = 0
