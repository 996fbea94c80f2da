package mcptask_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/pgtest"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store/postgres"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ticker is a tool that changes its status message each time the
// benchmark asks, noting when it made each change.
type ticker struct {
	tick chan struct{}
	mu   sync.Mutex
	at   map[string]time.Time // status message -> when the tool set it
}

func (k *ticker) run(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	tk := mcptask.FromContext(ctx)
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case _, ok := <-k.tick:
			if !ok {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
			}
		}
		msg := fmt.Sprintf("tick %d", i)
		k.mu.Lock()
		k.at[msg] = time.Now()
		k.mu.Unlock()
		if err := tk.SetStatusMessage(ctx, msg); err != nil {
			return nil, nil, err
		}

	}
}

// BenchmarkPushLatency measures the time from a tool's status change (the
// call of SetStatusMessage, its durable write included) to the
// notifications/tasks carrying it on a client's subscriptions/listen
// stream: on SQLite with the stream on the instance running the task, and
// on PostgreSQL with the stream on another instance (through the change
// feed). Each change waits for the previous notification; "every" sends
// every change; "coalesced" uses the default 50 ms minimum interval, with
// changes back to back (each waits for the rest of the interval after the
// previous notification: the worst case) or 60 ms apart (each is sent at
// once). It reports p50-ms and p99-ms.
func BenchmarkPushLatency(b *testing.B) {
	for _, mode := range []struct {
		name string
		n    mcptask.Notifications
		gap  time.Duration
	}{
		{"every", mcptask.Notifications{MinInterval: -1}, 0},
		{"coalesced/back-to-back", mcptask.Notifications{}, 0},
		{"coalesced/60ms-apart", mcptask.Notifications{}, 60 * time.Millisecond},
	} {
		b.Run("sqlite/same-instance/"+mode.name, func(b *testing.B) {
			k := &ticker{tick: make(chan struct{}), at: map[string]time.Time{}}
			s := startTicker(b, nil, mode.n, k)
			benchPush(b, k, s.URL, s.URL, mode.gap)
		})
		b.Run("postgres/cross-instance/"+mode.name, func(b *testing.B) {
			dsn := pgtest.DSN(b)
			schema := pgtest.Schema(b, dsn, "push_bench_")
			k := &ticker{tick: make(chan struct{}), at: map[string]time.Time{}}
			var urls []string
			for range 2 {
				st, err := postgres.Open(b.Context(), dsn, &postgres.Options{Schema: schema})
				if err != nil {
					b.Fatal(err)
				}
				urls = append(urls, startTicker(b, st, mode.n, k).URL)
			}
			benchPush(b, k, urls[0], urls[1], mode.gap)
		})
	}
}

func startTicker(b *testing.B, st interface {
	Close() error
}, n mcptask.Notifications, k *ticker) *servertest.Server {
	b.Helper()
	o := servertest.Options{
		Tasks: mcptask.Options{Notifications: n},
		Register: func(ts *mcptask.Server) (func(), error) {
			mcptask.AddTool(ts, &mcp.Tool{Name: "ticker"}, k.run, mcptask.ToolOptions{Support: mcptask.Optional})
			return nil, nil
		},
	}
	if ps, ok := st.(*postgres.Store); ok {
		o.Store = ps
	}
	return servertest.Start(b, o)
}

// benchPush creates the ticker's task on runURL and follows it on a listen
// stream at listenURL.
func benchPush(b *testing.B, k *ticker, runURL, listenURL string, gap time.Duration) {
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	runner := &wiretest.Client{URL: runURL, Tasks: true}
	tk, err := runner.CallTool(ctx, "ticker", nil)
	if err != nil {
		b.Fatal(err)
	}
	listener := &wiretest.Client{URL: listenURL, Tasks: true}
	s, err := listener.Listen(ctx, map[string]any{"taskIds": []string{tk.TaskID}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	recv := func() (string, time.Time) {
		for {
			select {
			case m, ok := <-s.Messages:
				if !ok {
					b.Fatal("the stream ended")
				}
				if m.Method != wire.MethodTasks {
					continue
				}
				var n struct {
					StatusMessage string `json:"statusMessage"`
				}
				_ = json.Unmarshal(m.Params, &n)
				return n.StatusMessage, time.Now()
			case <-ctx.Done():
				b.Fatal("no notification")
			}
		}
	}
	recv() // the task's state at the listen
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if gap > 0 {
			time.Sleep(gap) // the workload: changes this far apart
		}
		k.tick <- struct{}{}
		want := fmt.Sprintf("tick %d", i)
		for {
			msg, at := recv()
			if msg != want {
				continue
			}
			k.mu.Lock()
			lat = append(lat, at.Sub(k.at[want]))
			k.mu.Unlock()
			break
		}
	}
	b.StopTimer()
	close(k.tick)
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
