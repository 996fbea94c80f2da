//go:build !unix

package command

import (
	"errors"
)

func newRunDir() (string, func(), error) {
	return "", nil, errors.New("commands: not supported on this system")
}

func sweepRunDirs() (int, error) { return 0, nil }

const runDirPrefix = "run-"

func runParent() (string, error) { return "", errors.New("commands: not supported on this system") }
