package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/proctest"
)

// buildDaemon builds cmd/mcptaskd into dir and returns the binary's path.
// It must run inside the mcptask module (e.g. from the repository).
func buildDaemon(ctx context.Context, dir string, stderr io.Writer) (string, error) {
	bin := filepath.Join(dir, "mcptaskd")
	if err := proctest.Build(ctx, bin, "github.com/mcptask/mcptask/cmd/mcptaskd", false, stderr); err != nil {
		return "", fmt.Errorf("building mcptaskd (run from the mcptask module, or give -mcptaskd): %w", err)
	}
	return bin, nil
}

// logRecord is one JSON log record of a daemon.
type logRecord struct {
	Time time.Time `json:"time"`
	Msg  string    `json:"msg"`
	Task string    `json:"task"`
}

// daemon is one running mcptaskd process.
type daemon struct {
	p    *proctest.Process // its Logs keep the first MiB of stderr, for errors
	name string
	URL  string

	mu      sync.Mutex
	records []logRecord
}

// startDaemon starts mcptaskd (bin) on a free loopback port with args
// (JSON logs are added), and waits until it serves /healthz.
func startDaemon(ctx context.Context, bin, name string, args ...string) (*daemon, error) {
	// The load is one anonymous requester: mcptaskd's per-requester
	// limits would measure themselves, not the store.
	args = append([]string{"-addr", "127.0.0.1:0", "-log-format", "json", "-audit-log", "off",
		"-max-active-tasks", "0", "-create-rate", "0", "-request-rate", "0"}, args...)
	d := &daemon{name: name}
	p, err := proctest.Start(proctest.Config{Path: bin, Args: args, MaxLog: 1 << 20, OnLog: func(line []byte) {
		var rec logRecord
		if json.Unmarshal(line, &rec) == nil {
			d.mu.Lock()
			d.records = append(d.records, rec)
			d.mu.Unlock()
		}
	}})
	if err != nil {
		return nil, err
	}
	d.p = p
	d.URL, err = p.WaitListening(ctx, 60*time.Second)
	switch {
	case errors.Is(err, proctest.ErrExited):
		return nil, fmt.Errorf("%s exited before listening:\n%s", name, d.log())
	case errors.Is(err, proctest.ErrTimeout):
		d.kill()
		return nil, fmt.Errorf("%s did not listen within 60s:\n%s", name, d.log())
	case err != nil:
		d.kill()
		return nil, err
	}
	if err := proctest.WaitHTTPOK(ctx, strings.TrimSuffix(d.URL, "/mcp")+"/healthz", 30*time.Second); err != nil {
		d.kill()
		return nil, fmt.Errorf("%s: /healthz not OK within 30s:\n%s", name, d.log())
	}
	return d, nil
}

func (d *daemon) log() string { return d.p.Logs() }

// find returns the first record with message msg about task id.
func (d *daemon) find(msg, id string) (logRecord, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.records {
		if r.Msg == msg && r.Task == id {
			return r, true
		}
	}
	return logRecord{}, false
}

// kill kills the process with SIGKILL and waits until it is reaped.
func (d *daemon) kill() { d.p.Kill() }

// stop stops the process gracefully (SIGTERM), or kills it after timeout.
func (d *daemon) stop(timeout time.Duration) {
	d.p.Signal(syscall.SIGTERM)
	select {
	case <-d.p.Exited():
	case <-time.After(timeout):
		d.kill()
	}
}

// newSchemaName returns a fresh schema name for one measurement.
func newSchemaName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "mcptask_fleet_" + hex.EncodeToString(b)
}

// tempDir makes a temporary directory and returns a function removing it.
func tempDir() (string, func(), error) {
	dir, err := os.MkdirTemp("", "mcptask-fleet-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

var errNoDSN = errors.New("no PostgreSQL DSN: give -postgres or set MCPTASK_TEST_POSTGRES_DSN")
