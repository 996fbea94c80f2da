// Package clitest is what the tests that run mcptask's binaries as
// processes share (the CLI's end-to-end tests, mcptaskd's, the fault
// suite): the binaries built once per test run, with the race detector
// when the tests run with it; an environment without mcptask's own
// variables; the end of one run and the check of its exit code and
// output.
package clitest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/proctest"
)

// Build builds each package of pkgs (a path as go build takes it, e.g.
// "../mcptaskd") into a new temporary directory, named after the
// package's last element, with -race when the tests run with the race
// detector, and prints how long it took on standard error. It returns the
// binaries' paths in the order of pkgs and a function that removes them.
func Build(pkgs ...string) (bins []string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "mcptask-bin-")
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	start := time.Now()
	var names []string
	for _, pkg := range pkgs {
		name := filepath.Base(filepath.Clean(pkg))
		if name == "." {
			wd, _ := os.Getwd()
			name = filepath.Base(wd)
		}
		out := filepath.Join(dir, name)
		if err := proctest.Build(context.Background(), out, pkg, Race, os.Stderr); err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("building %s: %w", pkg, err)
		}
		bins = append(bins, out)
		names = append(names, name)
	}
	fmt.Fprintf(os.Stderr, "built %s (race=%v) in %v\n", strings.Join(names, " and "), Race, time.Since(start).Round(time.Millisecond))
	return bins, cleanup, nil
}

// CleanEnv returns this process's environment without mcptask's own
// variables (MCPTASK_*), so that a child runs with only what a test gives
// it.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCPTASK_") {
			env = append(env, kv)
		}
	}
	return env
}

// Result is the end of one run of a command: its arguments (without its
// name), what it wrote and its exit code.
type Result struct {
	Args           []string
	Stdout, Stderr string
	Code           int
}

// String shows the run for a test failure.
func (r Result) String() string {
	return fmt.Sprintf("mcptask %q exited %d\n--- stdout ---\n%s--- stderr ---\n%s", r.Args, r.Code, r.Stdout, r.Stderr)
}

// Expect fails t unless the run exited with code and its standard output
// and standard error hold each of the given strings.
func Expect(t testing.TB, r Result, code int, stdout, stderr []string) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("want exit code %d\n%s", code, r)
	}
	for _, s := range stdout {
		if !strings.Contains(r.Stdout, s) {
			t.Fatalf("stdout lacks %q\n%s", s, r)
		}
	}
	for _, s := range stderr {
		if !strings.Contains(r.Stderr, s) {
			t.Fatalf("stderr lacks %q\n%s", s, r)
		}
	}
}
