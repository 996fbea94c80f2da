//go:build unix

package client

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on path (created if needed), blocking
// until it is free, and returns its release. The operating system releases
// the lock if the process dies holding it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
