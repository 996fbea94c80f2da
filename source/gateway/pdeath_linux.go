package gateway

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill a stdio upstream when the gateway's
// process dies, however it dies (kill -9 included).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
