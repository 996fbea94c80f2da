package proctest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary, re-executed by the tests, act as the
// process under test instead; its value says how.
const helperEnv = "PROCTEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

// helper is the process under test:
//   - serve: serves /healthz on loopback, prints its listening line,
//     logs "started" and, on SIGTERM, "stopped" and exits 0;
//   - exit: logs "failing" and exits 3 without listening;
//   - flood: logs "line" 1000 times and exits 0 without listening;
//   - silent: waits to be killed without listening.
func helper(mode string) int {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	switch mode {
	case "serve":
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Error("listen", "err", err)
			return 1
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(http.ResponseWriter, *http.Request) {})
		go http.Serve(ln, mux)
		log.Info("started", "n", 1)
		fmt.Printf("some other line\n%shttp://%s/mcp\n", ListenPrefix, ln.Addr())
		<-sigs
		log.Info("stopped")
		return 0
	case "exit":
		log.Error("failing")
		return 3
	case "flood":
		for range 1000 {
			log.Info("line")
		}
		return 0
	case "silent":
		time.Sleep(time.Hour) // until killed
		return 0
	}
	return 2
}

// start starts the test binary as a helper in mode.
func start(t *testing.T, mode string, c Config) *Process {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c.Path = exe
	c.Env = append(os.Environ(), helperEnv+"="+mode)
	p, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

func TestServe(t *testing.T) {
	p := start(t, "serve", Config{})
	url, err := p.WaitListening(context.Background(), time.Minute)
	if err != nil {
		t.Fatalf("WaitListening: %v\n%s", err, p.Logs())
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/mcp") {
		t.Fatalf("URL %q", url)
	}
	if err := WaitHTTPOK(context.Background(), strings.TrimSuffix(url, "/mcp")+"/healthz", time.Minute); err != nil {
		t.Fatal(err)
	}
	if !p.Running() || p.Pid() <= 0 {
		t.Fatalf("running %v, pid %d", p.Running(), p.Pid())
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(time.Minute):
		t.Fatalf("no exit within a minute of SIGTERM\n%s", p.Logs())
	}
	if err := p.Err(); err != nil {
		t.Fatalf("exit: %v\n%s", err, p.Logs())
	}
	started := p.LogRecords("started")
	if len(started) != 1 || started[0]["n"] != 1.0 {
		t.Fatalf("started records %v\n%s", started, p.Logs())
	}
	if n := len(p.LogRecords("stopped")); n != 1 {
		t.Fatalf("%d stopped records\n%s", n, p.Logs())
	}
}

func TestExitBeforeListening(t *testing.T) {
	p := start(t, "exit", Config{})
	if _, err := p.WaitListening(context.Background(), time.Minute); !errors.Is(err, ErrExited) {
		t.Fatalf("WaitListening: %v, want ErrExited", err)
	}
	var ee *exec.ExitError
	if !errors.As(p.Err(), &ee) || ee.ExitCode() != 3 {
		t.Fatalf("Err %v, want exit status 3", p.Err())
	}
	if p.Running() || len(p.LogRecords("failing")) != 1 {
		t.Fatalf("running %v, log\n%s", p.Running(), p.Logs())
	}
}

func TestTimeoutAndKill(t *testing.T) {
	p := start(t, "silent", Config{})
	if _, err := p.WaitListening(context.Background(), 50*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("WaitListening: %v, want ErrTimeout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.WaitListening(ctx, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitListening: %v, want context.Canceled", err)
	}
	if p.Err() != nil {
		t.Fatalf("Err %v before the process exits", p.Err())
	}
	p.Kill()
	var ee *exec.ExitError
	if !errors.As(p.Err(), &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("Err %v, want killed", p.Err())
	}
	p.Kill() // again: a no-op
}

func TestMaxLogAndOnLog(t *testing.T) {
	var lines int // read only once the process has exited
	p := start(t, "flood", Config{MaxLog: 1000, OnLog: func(line []byte) {
		if strings.Contains(string(line), `"msg":"line"`) {
			lines++
		}
	}})
	<-p.Exited()
	if lines != 1000 {
		t.Fatalf("OnLog saw %d lines, want 1000", lines)
	}
	if n := len(p.Logs()); n < 1000 || n > 1200 {
		t.Fatalf("Logs kept %d bytes, want about 1000", n)
	}
}

func TestWaitHTTPOKTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/healthz"
	ln.Close() // nothing listens there now
	if err := WaitHTTPOK(context.Background(), url, 50*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("WaitHTTPOK: %v, want ErrTimeout", err)
	}
}

func TestBuild(t *testing.T) {
	out := filepath.Join(t.TempDir(), "hello")
	if err := Build(context.Background(), out, "./testdata/hello", false, os.Stderr); err != nil {
		t.Fatal(err)
	}
	if got, err := exec.Command(out).Output(); err != nil || string(got) != "hello\n" {
		t.Fatalf("built binary: %q, %v", got, err)
	}
	if err := Build(context.Background(), out, "./testdata/nosuchpackage", false, &strings.Builder{}); err == nil {
		t.Fatal("building a missing package succeeded")
	}
}
