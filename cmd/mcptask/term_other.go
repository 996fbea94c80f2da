//go:build !linux && !darwin

package main

import "os"

// isTerminal reports whether f looks like a terminal (a character device).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// termWidth returns 0: the width is unknown on this system.
func termWidth(*os.File) int { return 0 }
