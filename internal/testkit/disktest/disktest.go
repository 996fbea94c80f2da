// Package disktest gives tests a small disk they may fill: a tmpfs mounted
// on a directory of theirs (Linux, as root), and a way to fill it to the
// last byte, to see what a program does when its disk is full.
package disktest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// Mount mounts a tmpfs of the given size (e.g. "8m") on dir, which must
// exist. It returns a function that unmounts it, or an error saying why
// it cannot (not Linux, not root, no mount command): tests then skip.
func Mount(dir, size string) (unmount func(), err error) {
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("mounting a tmpfs on %s: %v %s", dir, err, out)
	}
	return func() { _ = exec.Command("umount", "-l", dir).Run() }, nil
}

// Fill writes the file filler until the file system holding it has no
// byte left (the last partial block included) and returns nil then, or
// the first error that is not "no space left on device".
func Fill(filler string) error {
	f, err := os.Create(filler)
	if err != nil {
		return err
	}
	defer f.Close()
	block := make([]byte, 64<<10)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				return fmt.Errorf("filling the disk: %w", err)
			}
			break
		}
	}
	for n := 4096; n > 0; n /= 2 {
		for {
			if _, err := f.Write(block[:n]); err != nil {
				break
			}
		}
	}
	return nil
}
