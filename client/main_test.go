package client_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
)

// Environment of the host helper process (see runHost).
const (
	envHost    = "MCPTASK_CLIENT_TEST_HOST"
	envURL     = "MCPTASK_CLIENT_TEST_URL"
	envJournal = "MCPTASK_CLIENT_TEST_JOURNAL"
	envWire    = "MCPTASK_CLIENT_TEST_WIRE"
	// envSilent makes the test binary a stdio server that reads its
	// requests, never answers one, and exits when its stdin closes.
	envSilent = "MCPTASK_CLIENT_TEST_SILENT"
)

func TestMain(m *testing.M) {
	if os.Getenv(envHost) != "" {
		os.Exit(runHost())
	}
	if os.Getenv(envSilent) != "" {
		io.Copy(io.Discard, os.Stdin) // a stdio server that never answers
		os.Exit(0)
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// runHost is a host process: it calls the counted tool with a journal,
// prints "task ID" and waits for the task, until the test kills it.
func runHost() int {
	ctx := context.Background()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := client.Dial(dctx, os.Getenv(envURL), &client.Options{
		Journal:         os.Getenv(envJournal),
		ProtocolVersion: os.Getenv(envWire),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "host: dial:", err)
		return 1
	}
	defer c.Close()
	call, err := c.CallTool(dctx, "counted", nil)
	if err != nil || call.Task == nil {
		fmt.Fprintf(os.Stderr, "host: call: %+v %v\n", call, err)
		return 1
	}
	fmt.Printf("task %s\n", call.Task.ID)
	res, err := c.Wait(ctx, call.Task.ID, nil)
	fmt.Printf("result %+v %v\n", res, err)
	return 0
}
