//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// dbLockHeld says whether lockDB holds a lock: yes.
const dbLockHeld = true

// lockDB takes an exclusive lock on db+".lock" for the life of the
// process, so that two servers never share one task database: at start-up
// a server resolves every unfinished task in it as left behind by a dead
// process, which would be wrong for the tasks of a live one. The operating
// system releases the lock when the process ends, however it ends.
func lockDB(db string) (release func(), err error) {
	path := db + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("the task database %s is in use by another mcptaskd (lock file %s)", db, path)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
