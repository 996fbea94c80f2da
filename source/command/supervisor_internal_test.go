//go:build unix

package command

import (
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// waitEnd returns how p ended, failing the test if it did not within 20 s.
func waitEnd(t *testing.T, p *proc) exitStatus {
	t.Helper()
	select {
	case es := <-p.done:
		return es
	case <-time.After(20 * time.Second):
		t.Fatalf("command %d never ended", p.id)
		return exitStatus{}
	}
}

func sleepPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1) here")
	}
	return path
}

// TestSupervisorSignalAtStart: a SIGKILL asked for just after the start,
// while the supervisor may still be starting the command, reaches it (it
// was dropped, and the command ran its course).
func TestSupervisorSignalAtStart(t *testing.T) {
	sleep := sleepPath(t)
	for range 20 {
		p, err := startProc([]string{sleep, "30"}, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		p.signal('K')
		if es := waitEnd(t, p); es.signal != syscall.SIGKILL {
			t.Fatalf("the command ended %+v, want killed by SIGKILL", es)
		}
		p.release()
	}
}

// TestSupervisorSpecTooLarge: arguments over the spec's bound are refused
// at once (a start used to hang, writing a spec nobody read).
func TestSupervisorSpecTooLarge(t *testing.T) {
	_, err := startProc([]string{sleepPath(t), strings.Repeat("x", maxSpec)}, nil, "")
	if err == nil || !strings.Contains(err.Error(), "over") {
		t.Fatalf("startProc of a %d-byte argument: %v, want refused", maxSpec, err)
	}
}

// TestSupervisorLostDuringStarts: starts racing the loss of the
// supervisor (kill -9) each end, none hangs: they run under a new
// supervisor, or end saying the supervisor died; the next start runs.
func TestSupervisorLostDuringStarts(t *testing.T) {
	sleep := sleepPath(t)
	first, err := startProc([]string{sleep, "30"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			p, err := startProc([]string{sleep, "30"}, nil, "")
			if err != nil {
				return // refused: it did not start
			}
			p.signal('K')
			waitEnd(t, p)
			p.release()
		})
	}
	if err := first.sup.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if es := waitEnd(t, first); es.err == nil || !strings.Contains(es.err.Error(), "supervisor died") {
		t.Fatalf("a command of the killed supervisor ended %+v, want its death reported", es)
	}
	wg.Wait()
	p, err := startProc([]string{sleep, "0"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if es := waitEnd(t, p); es.err != nil || es.code != 0 {
		t.Fatalf("the next command ended %+v", es)
	}
}
