package command

import (
	"syscall"
	"unsafe"
)

// selfPath is the program's own executable, as the kernel knows it (it
// works even after the file was replaced or removed).
func selfPath() (string, error) { return "/proc/self/exe", nil }

// supervisorSysProcAttr: the supervisor gets SIGTERM when the program
// dies, however it dies (kill -9 included), and then kills every
// command's group.
func supervisorSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// commandSysProcAttr: the command leads a process group of its own, and
// dies if its supervisor does.
func commandSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// peekExit waits until the child pid has exited, without reaping it
// (waitid with WNOWAIT), and reports that it did.
func peekExit(pid int) bool {
	const (
		pPID    = 1
		wExited = 4
		wNoWait = 0x01000000
	)
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		if e != syscall.EINTR {
			return e == 0
		}
	}
}

// undumpable makes the process non-dumpable (PR_SET_DUMPABLE 0): another
// process of the same user that is not root (a command) can then neither
// read its /proc files (environ, memory) nor ptrace it.
func undumpable() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0)
}

// recvFlags makes the descriptors a receive carries close-on-exec.
const recvFlags = syscall.MSG_CMSG_CLOEXEC
