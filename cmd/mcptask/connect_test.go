//go:build unix

package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// silentServerArg runs the test binary as a stdio MCP server that never
// answers (see TestMain and silentServer).
const silentServerArg = "-mcptask-test-silent-server"

// silentServer is a stdio server that reads its requests and never answers
// one. It writes its process ID to pidFile first, and exits when its
// standard input closes, as a stdio server must.
func silentServer(pidFile string) int {
	tmp := pidFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return 1
	}
	if err := os.Rename(tmp, pidFile); err != nil {
		return 1
	}
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// connectApp is an app for an in-process connect, without a journal and
// with a short connection timeout.
func connectApp(timeout time.Duration) *app {
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }, dialTimeout: timeout}
	a.g.init(a.getenv)
	a.g.journal = "off"
	return a
}

// eventually polls cond until it holds or the timeout passes.
func eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronization
	}
	return true
}

// TestConnectTimeoutStopsStdioServer connects to a --stdio server that
// never answers initialize: once the connection times out, the server has
// been stopped and reaped, not left running behind a dial that goes on.
func TestConnectTimeoutStopsStdioServer(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	a := connectApp(300 * time.Millisecond)
	a.g.stdio = shellQuote(self) + " " + silentServerArg + " " + shellQuote(pidFile)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // ends a dial left behind, so that a failure does not leak past the test

	c, err := a.connect(ctx, a.g.target(), "")
	if err == nil {
		c.Close()
		t.Fatal("connected to a server that never answers")
	}
	if want := "cannot connect to " + a.g.target() + ": no answer within 300ms"; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %q, want %q", err, want)
	}
	var pid int
	if !eventually(10*time.Second, func() bool {
		b, err := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(string(b))
		return err == nil && pid > 0
	}) {
		t.Fatal("the stdio server never started")
	}
	// Signal 0 finds any process not yet reaped, a zombie included.
	if !eventually(10*time.Second, func() bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the stdio server (pid %d) is still there 10s after the connection timed out", pid)
	}
}

// TestConnectTimeoutClosesHTTPConnection connects to an HTTP server that
// never answers: once the connection times out, the request has been
// abandoned and its TCP connection closed.
func TestConnectTimeoutClosesHTTPConnection(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	requests := 0 // in the handler
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		mu.Unlock()
		defer func() {
			mu.Lock()
			requests--
			mu.Unlock()
		}()
		// Reading the request through lets the server notice when the
		// client goes away (which ends r.Context()).
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done() // never answers
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			open[c] = true
		case http.StateClosed, http.StateHijacked:
			delete(open, c)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // runs before srv.Close, which waits for the handlers

	a := connectApp(300 * time.Millisecond)
	a.g.url = srv.URL + "/mcp"
	c, err := a.connect(ctx, a.g.target(), "")
	if err == nil {
		c.Close()
		t.Fatal("connected to a server that never answers")
	}
	if want := "cannot connect to " + a.g.target() + ": no answer within 300ms"; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %q, want %q", err, want)
	}
	settled := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(open) == 0 && requests == 0
	}
	if !eventually(10*time.Second, settled) {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("10s after the connection timed out, %d connection(s) are open and %d request(s) in the handler", len(open), requests)
	}
}
