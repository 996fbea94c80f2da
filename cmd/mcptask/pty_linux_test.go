package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// openPTY opens a pseudo-terminal pair with the standard library only.
func openPTY(cols uint16) (master, tty *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	ioctl := func(f *os.File, req uintptr, arg unsafe.Pointer) error {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
			return errno
		}
		return nil
	}
	var unlock int32
	var n uint32
	if err := ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		master.Close()
		return nil, nil, err
	}
	if err := ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		master.Close()
		return nil, nil, err
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	ws := struct{ Row, Col, X, Y uint16 }{Row: 30, Col: cols}
	if err := ioctl(tty, syscall.TIOCSWINSZ, unsafe.Pointer(&ws)); err != nil {
		master.Close()
		tty.Close()
		return nil, nil, err
	}
	return master, tty, nil
}

// TestTerminal runs mcptask on a terminal, as a person would: the live
// status line, and the confirmation asked and answered on the terminal.
func TestTerminal(t *testing.T) {
	t.Parallel()
	master, tty, err := openPTY(100)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	d := startDaemon(t)
	c := newCLI(t, d.URL)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := c.command(ctx, "call", "deploy_with_confirmation", "service=api", "build_steps=4", "step_delay_ms=200")
	var stdout bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &stdout, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child has it

	var mu sync.Mutex
	var screen bytes.Buffer
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	shown := func() string {
		mu.Lock()
		defer mu.Unlock()
		return screen.String()
	}
	waitFor := func(s string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(shown(), s) {
			if time.Now().After(deadline) {
				t.Fatalf("the terminal never showed %q:\n%q", s, shown())
			}
			time.Sleep(10 * time.Millisecond) // polling the screen
		}
	}

	waitFor("Reply: [a]ccept, [d]ecline or [c]ancel?")
	io.WriteString(master, "a\n")
	waitFor("[y/n]")
	io.WriteString(master, "y\n")
	err = cmd.Wait()
	if code := exitCode(err); code != exitOK {
		t.Fatalf("exit code %d\nstdout: %s\nterminal: %q", code, stdout.String(), shown())
	}
	if !strings.Contains(stdout.String(), "Deployed api@latest to production.") {
		t.Fatalf("stdout: %q", stdout.String())
	}
	screenText := shown()
	for _, s := range []string{
		"\r\x1b[K",                          // the live line is rewritten in place
		"working ",                          // with the status,
		"building api@latest: step",         // the status message
		"The build of api@latest succeeded", // the question
		"sent: accept {\"confirm\":true}",
		"completed ", // and the final status stays
	} {
		if !strings.Contains(screenText, s) {
			t.Errorf("the terminal lacks %q:\n%q", s, screenText)
		}
	}
	for line := range strings.SplitSeq(screenText, "\r\x1b[K") {
		if !strings.Contains(line, "\n") && len([]rune(line)) >= 100 { // a live line, later rewritten
			t.Errorf("a live line does not fit 100 columns: %q", line)
		}
	}
}
