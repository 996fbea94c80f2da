package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/mcptask/mcptask/bench/internal/loadgen"
)

// childEnv, when set in the environment, makes the command (or its test
// binary) serve mcptask as a child process instead of measuring: the
// variable's value is the sleep of sleep_task. -mcptask-child starts it so.
const childEnv = "MCPTASK_PEERS_CHILD_SLEEP"

// serveChild serves the mcptask server of loadgen.StartServer on a SQLite
// file in a temporary directory, prints "listening URL" and exits when its
// standard input is closed, as the peers do. It returns the exit code.
func serveChild(sleep string) int {
	d, err := time.ParseDuration(sleep)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	tmp, err := os.MkdirTemp("", "mcptask-peers-child-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	srv, err := loadgen.StartServer(filepath.Join(tmp, "tasks.db"), &loadgen.ServerOptions{Sleep: d})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("listening %s\n", srv.URL)
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startChild starts this executable as a child serving mcptask.
func startChild(sleep time.Duration) (*peerProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return startPeerEnv(exe, []string{childEnv + "=" + sleep.String()})
}
