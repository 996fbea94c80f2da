//go:build unix

package command

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// runDirPrefix starts the name of a run's directory in runParent.
const runDirPrefix = "run-"

// runParent is the directory of the runs' directories of this user's
// programs, made if need be: DIR/mcptask-commands-UID (DIR the system's
// temporary directory), a directory of this user, mode 0700, not a link.
func runParent() (string, error) {
	p := filepath.Join(os.TempDir(), fmt.Sprintf("mcptask-commands-%d", os.Getuid()))
	if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm() != 0o700 {
		return "", fmt.Errorf("%s is not a directory of this user with mode 0700 (%v): refusing to keep the commands' files there", p, fi.Mode())
	}
	return p, nil
}

// newRunDir makes the directory of one run (its result file), locked
// (flock) for as long as the run lasts: a directory nobody locks is a dead
// run's, which sweepRunDirs removes, whatever killed its program. done
// removes it and releases the lock.
func newRunDir() (dir string, done func(), err error) {
	parent, err := runParent()
	if err != nil {
		return "", nil, err
	}
	for range 10 {
		dir, err := os.MkdirTemp(parent, runDirPrefix)
		if err != nil {
			return "", nil, err
		}
		f, err := os.Open(dir)
		if err != nil {
			continue // swept before it was locked: another
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			return "", nil, fmt.Errorf("locking %s: %w", dir, err)
		}
		// A sweep between MkdirTemp and Flock removed it: make another.
		if fi, err := os.Stat(dir); err != nil || !sameFile(f, fi) {
			f.Close()
			continue
		}
		return dir, func() {
			_ = os.RemoveAll(dir)
			f.Close()
		}, nil
	}
	return "", nil, errors.New("could not make a run directory (swept each time)")
}

func sameFile(f *os.File, fi fs.FileInfo) bool {
	fi2, err := f.Stat()
	return err == nil && os.SameFile(fi, fi2)
}

// sweepRunDirs removes the run directories that no process locks: those
// of runs whose program died without removing them (kill -9). Those of
// live programs (another instance on this host) are locked, and kept. It
// returns how many it removed.
func sweepRunDirs() (int, error) {
	parent, err := runParent()
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), runDirPrefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY, 0)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			if os.RemoveAll(dir) == nil {
				removed++
			}
		}
		f.Close()
	}
	return removed, nil
}
