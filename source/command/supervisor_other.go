//go:build !unix

package command

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
)

// supervisorReady is never set here: commands need Unix process groups.
var supervisorReady atomic.Bool

// Supervise does nothing outside Unix, where commands cannot run.
func Supervise() {}

// exitStatus is how a command ended.
type exitStatus struct {
	code   int
	signal syscall.Signal
	err    error
}

// proc is a running command (never, here).
type proc struct {
	stdin, stdout, stderr *os.File
	pid                   atomic.Int64
	done                  chan exitStatus
}

func startProc(argv, env []string, dir string) (*proc, error) {
	return nil, errors.New("commands: not supported on this system (they need Unix process groups)")
}

func (p *proc) signal(byte) {}
func (p *proc) release()    {}

func openNoBlock(path string) (*os.File, error) { return os.Open(path) }

func undumpable() {}
