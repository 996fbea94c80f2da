package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcptask/mcptask/bench/internal/loadgen"
	"github.com/mcptask/mcptask/task"
)

// TestScaleListenStreams measures one server holding many tasks at work,
// each followed by a subscriptions/listen stream of its own (2026-07-28)
// opened by another process (the test binary again, as
// TestScaleListenClient): the server's memory per working task and per
// stream, its CPU while all of them wait, and how soon each stream
// tells of its task's end when all end at once (from the task's
// lastUpdatedAt to the client's reading). A measurement, not a check:
// MCPTASK_SCALE_STREAMS=N runs it with N tasks and streams (16 streams per
// requester, mcptask's default cap; each stream one HTTP/1.1 connection,
// so N is bounded by the open-file limit of each process).
// MCPTASK_SCALE_TASKS_ONLY=1 measures the working tasks alone, without
// streams.
func TestScaleListenStreams(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MCPTASK_SCALE_STREAMS"))
	if n <= 0 {
		t.Skip("MCPTASK_SCALE_STREAMS=N runs it")
	}
	hold := make(chan struct{})
	srv, err := loadgen.StartServer(filepath.Join(t.TempDir(), "tasks.db"), &loadgen.ServerOptions{
		RequesterHeader: loadgen.RequesterHeader, Hold: hold})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	base := serverMemory()

	// N tasks at work, 16 per requester.
	const perRequester = 16
	owners := (n + perRequester - 1) / perRequester
	ids := make([][]string, owners)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var createErr error
	start := time.Now()
	sem := make(chan struct{}, 8)
	for o := range owners {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := loadgen.NewClient(srv.URL, loadgen.ClientOptions{TaskTool: loadgen.HoldTool, Requester: fmt.Sprintf("o%d", o)})
			if err != nil {
				mu.Lock()
				createErr = err
				mu.Unlock()
				return
			}
			defer c.Close()
			for k := 0; k < perRequester && o*perRequester+k < n; k++ {
				id, err := c.Create(ctx)
				if err != nil {
					mu.Lock()
					createErr = err
					mu.Unlock()
					return
				}
				ids[o] = append(ids[o], id)
			}
		})
	}
	wg.Wait()
	if createErr != nil {
		t.Fatal(createErr)
	}
	t.Logf("%d tasks created in %v", n, time.Since(start).Round(time.Millisecond))
	withTasks := serverMemory()
	// (MCPTASK_SCALE_HEAPPROFILE=FILE writes the heap's profile here.)
	if path := os.Getenv("MCPTASK_SCALE_HEAPPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}

	if os.Getenv("MCPTASK_SCALE_TASKS_ONLY") != "" {
		// Tasks at work, no streams: their memory, the server's CPU
		// while they wait (their leases renewed), how soon all end.
		perTask := float64(withTasks.heap-base.heap) / float64(n)
		t.Logf("server, %d working tasks: heap %d → %d MB (%.1f KB per task), %d goroutines (%.1f per task), RSS %d MB",
			n, base.heap>>20, withTasks.heap>>20, perTask/1024, withTasks.goroutines, float64(withTasks.goroutines-base.goroutines)/float64(n), withTasks.rss>>20)
		t.Logf("server CPU while all wait: %.1f%% of one core", idleCPU(t)*100)
		ended := time.Now()
		close(hold)
		for _, got := range ids {
			for _, id := range got {
				for {
					changed := srv.Engine.Watch(task.ID(id))
					tk, err := srv.Tasks.Get(ctx, task.ID(id))
					if err != nil {
						t.Fatal(err)
					}
					if tk.Status.Terminal() {
						break
					}
					<-changed
				}
			}
		}
		t.Logf("all %d ended in %v", n, time.Since(ended).Round(time.Millisecond))
		return
	}

	// The streams, from another process.
	var list bytes.Buffer
	fmt.Fprintln(&list, srv.URL)
	for o, got := range ids {
		for _, id := range got {
			fmt.Fprintf(&list, "o%d %s\n", o, id)
		}
	}
	file := filepath.Join(t.TempDir(), "streams")
	if err := os.WriteFile(file, list.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestScaleListenClient$", "-test.v")
	cmd.Env = append(os.Environ(), "MCPTASK_SCALE_CLIENT="+file)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(out)
	wait := func(prefix string) string {
		t.Helper()
		for lines.Scan() {
			if l := lines.Text(); strings.HasPrefix(l, prefix) {
				return l
			} else if strings.HasPrefix(l, "FAIL") || strings.Contains(l, "--- FAIL") {
				t.Fatalf("the client: %s", l)
			}
		}
		t.Fatalf("the client ended before %q: %v", prefix, lines.Err())
		return ""
	}
	t.Log(wait("ready "))
	withStreams := serverMemory()

	// Idle: every task waits, every stream is open.
	idle := idleCPU(t)

	close(hold)
	t.Log(wait("latency "))
	_ = cmd.Wait()

	perTask := float64(withTasks.heap-base.heap) / float64(n)
	perStream := float64(withStreams.heap-withTasks.heap) / float64(n)
	t.Logf("server, %d working tasks: heap %d → %d MB (%.1f KB per task), %d goroutines (%.1f per task), RSS %d MB",
		n, base.heap>>20, withTasks.heap>>20, perTask/1024, withTasks.goroutines, float64(withTasks.goroutines-base.goroutines)/float64(n), withTasks.rss>>20)
	t.Logf("server, %d streams open: heap %d MB (%.1f KB per stream), %d goroutines (%.1f per stream), RSS %d MB (%.1f KB per stream)",
		n, withStreams.heap>>20, perStream/1024, withStreams.goroutines, float64(withStreams.goroutines-withTasks.goroutines)/float64(n),
		withStreams.rss>>20, float64(withStreams.rss-withTasks.rss)/float64(n)/1024)
	t.Logf("server CPU while all wait: %.1f%% of one core", idle*100)
}

// idleCPU is the share of one core this process uses over 5 s
// (MCPTASK_SCALE_CPUPROFILE=FILE writes its CPU profile).
func idleCPU(t *testing.T) float64 {
	t.Helper()
	if path := os.Getenv("MCPTASK_SCALE_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	cpu0, wall0 := cpuTime(), time.Now()
	time.Sleep(5 * time.Second) // a measurement window, not a wait for a condition
	return float64(cpuTime()-cpu0) / float64(time.Since(wall0))
}

// memory is what serverMemory reads.
type memory struct {
	heap, rss  uint64
	goroutines int
}

// serverMemory is this process's heap in use (after a collection), RSS
// and goroutines.
func serverMemory() memory {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := memory{heap: ms.HeapInuse + ms.StackInuse, goroutines: runtime.NumGoroutine()}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseUint(f[1], 10, 64)
			m.rss = pages * uint64(os.Getpagesize())
		}
	}
	return m
}

// cpuTime is the CPU time this process used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestScaleListenClient is TestScaleListenStreams's client process: it
// opens a subscriptions/listen stream per task of the file
// MCPTASK_SCALE_CLIENT names (its first line the URL, then "REQUESTER
// TASKID" lines), prints "ready N" once every stream told its task's
// state, then, once every task told its end, "latency" and the
// percentiles of (read − the task's lastUpdatedAt).
func TestScaleListenClient(t *testing.T) {
	file := os.Getenv("MCPTASK_SCALE_CLIENT")
	if file == "" {
		t.Skip("the client process of TestScaleListenStreams")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(string(b)), "\n")
	url, rows := rows[0], rows[1:]
	tr := &http.Transport{MaxIdleConnsPerHost: -1, DisableCompression: true}
	hc := &http.Client{Transport: tr}
	const meta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"mcptask-scale","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	var (
		ready, ended sync.WaitGroup
		mu           sync.Mutex
		lats         []time.Duration
		failures     []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	ready.Add(len(rows))
	ended.Add(len(rows))
	for _, row := range rows {
		owner, id, _ := strings.Cut(row, " ")
		go func() {
			defer ended.Done()
			isReady := false
			defer func() {
				if !isReady {
					ready.Done()
				}
			}()
			body := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["` + id + `"]},"_meta":` + meta + `}}`
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
				"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"subscriptions/listen"}, loadgen.RequesterHeader: {owner}}
			res, err := hc.Do(req)
			if err != nil {
				fail("stream of %s: %v", id, err)
				return
			}
			defer res.Body.Close()
			sc := bufio.NewScanner(res.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				data, ok := strings.CutPrefix(sc.Text(), "data:")
				if !ok {
					continue
				}
				var msg struct {
					Method string `json:"method"`
					Params struct {
						Status        string    `json:"status"`
						LastUpdatedAt time.Time `json:"lastUpdatedAt"`
					} `json:"params"`
				}
				if json.Unmarshal([]byte(strings.TrimSpace(data)), &msg) != nil || msg.Method != "notifications/tasks" {
					continue
				}
				switch msg.Params.Status {
				case "working":
					if !isReady {
						isReady = true
						ready.Done()
					}
				case "completed":
					lat := time.Since(msg.Params.LastUpdatedAt)
					mu.Lock()
					lats = append(lats, lat)
					mu.Unlock()
					return
				default:
					fail("task %s: %s", id, msg.Params.Status)
					return
				}
			}
			fail("stream of %s ended without the task's end: %v", id, sc.Err())
		}()
	}
	ready.Wait()
	fmt.Printf("ready %d streams\n", len(rows))
	ended.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d streams failed, e.g. %s", len(failures), failures[0])
	}
	slices.Sort(lats)
	p := func(q float64) time.Duration {
		return lats[min(len(lats)-1, int(q*float64(len(lats))))].Round(time.Millisecond)
	}
	fmt.Printf("latency of the end, %d streams: p50 %v p90 %v p99 %v max %v\n", len(lats), p(0.5), p(0.9), p(0.99), lats[len(lats)-1].Round(time.Millisecond))
}
