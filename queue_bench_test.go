package mcptask_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkQueueThroughput measures tasks finished per second by a tool
// whose work takes work (0: none), with and without a cap of 4 running
// tasks, on SQLite (FULL) over loopback HTTP: 16 clients create b.N tasks
// at once, and the clock stops when the last one has finished. With a
// cap the tasks beyond it wait in the durable queue and start as slots
// free (one store write more per task, the start); the ideal at the cap
// is 4 ÷ work. Compare the variants of one run. The server has the fast
// lane, as mcptaskd (MCPTASK_BENCH_NO_LANE=1: without it).
func BenchmarkQueueThroughput(b *testing.B) {
	for _, work := range []time.Duration{0, 10 * time.Millisecond} {
		for _, capN := range []int{0, 4} {
			b.Run(fmt.Sprintf("work=%v/cap=%d", work, capN), func(b *testing.B) {
				benchQueue(b, work, capN)
			})
		}
	}
}

func benchQueue(b *testing.B, work time.Duration, capN int) {
	var finished atomic.Int64
	done := make(chan struct{})
	var target atomic.Int64
	var running, most atomic.Int64
	job := func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if work > 0 {
			time.Sleep(work) // the work this task stands for
		}
		running.Add(-1)
		if finished.Add(1) == target.Load() {
			close(done)
		}
		return text("ok"), nil, nil
	}
	hs := servertest.Start(b, servertest.Options{
		HTTP:      &mcp.StreamableHTTPOptions{Stateless: true},
		Tasks:     mcptask.Options{FastLane: os.Getenv("MCPTASK_BENCH_NO_LANE") == ""},
		StopGrace: time.Minute,
		Register: func(ts *mcptask.Server) (func(), error) {
			mcptask.AddTool(ts, &mcp.Tool{Name: "job"}, job, mcptask.ToolOptions{Support: mcptask.Optional, MaxConcurrent: capN})
			return nil, nil
		},
	})
	c := &wiretest.Client{URL: hs.URL, Tasks: true, HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	target.Store(int64(b.N))
	next := atomic.Int64{}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := c.CallTool(context.Background(), "job", map[string]any{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d tasks finished", finished.Load(), b.N)
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "tasks/s")
	b.ReportMetric(float64(most.Load()), "max-running")
	if capN > 0 && most.Load() > int64(capN) {
		b.Errorf("%d ran at once under a cap of %d", most.Load(), capN)
	}
}
