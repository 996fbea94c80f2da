package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcptask/mcptask/bench/internal/loadgen"
)

// findPeers returns the directory bench/peers, looked for from the working
// directory upwards.
func findPeers() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "bench", "peers")
		if _, err := os.Stat(filepath.Join(p, "mcpgo", "go.mod")); err == nil {
			return p, nil
		}
		if filepath.Base(dir) == "bench" {
			if _, err := os.Stat(filepath.Join(dir, "peers", "mcpgo", "go.mod")); err == nil {
				return filepath.Join(dir, "peers"), nil
			}
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("bench/peers not found from the working directory: give -peers")
		}
		dir = up
	}
}

// buildPeer builds the peer module dir (bench/peers/NAME) into out with
// the go command goBin.
func buildPeer(ctx context.Context, goBin, dir, out string) error {
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, ".")
	cmd.Dir = dir
	var msg bytes.Buffer
	cmd.Stdout, cmd.Stderr = &msg, &msg
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build in %s: %w\n%s", dir, err, msg.Bytes())
	}
	return nil
}

// peerProc is a peer server run as a child process.
type peerProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
	URL    string
	exited chan struct{}
}

// startPeer starts the peer binary bin on a free loopback port and waits
// until it prints the URL it serves ("listening URL").
func startPeer(bin string, args ...string) (*peerProc, error) {
	return startPeerEnv(bin, nil, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
}

// startPeerEnv is startPeer with env added to the environment and args as
// the whole command line.
func startPeerEnv(bin string, env []string, args ...string) (*peerProc, error) {
	p := &peerProc{exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	select {
	case line, ok := <-lines:
		u, found := strings.CutPrefix(line, "listening ")
		if !ok || !found {
			p.stop()
			return nil, fmt.Errorf("%s: did not start: %q %s", bin, line, p.stderr.Bytes())
		}
		if err := loadgen.CheckLoopback(u); err != nil {
			p.stop()
			return nil, err
		}
		p.URL = u
		return p, nil
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, fmt.Errorf("%s: not listening after 30 s", bin)
	}
}

// stop closes the peer's standard input (it then shuts down) and kills it
// if it has not exited within 3 s.
func (p *peerProc) stop() {
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(3 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}
