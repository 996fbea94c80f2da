package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/metrics"
	"github.com/mcptask/mcptask/task"
)

// BenchmarkMetricsCost measures the cost of the metrics on the hot paths,
// over loopback HTTP on SQLite (FULL): create (a task-augmented
// tools/call of a tool that answers at once) and tasks/get of a finished
// task, with no observer (off) and with metrics.Metrics (on), scraped
// once at the end. Compare the variants of one run.
func BenchmarkMetricsCost(b *testing.B) {
	for _, op := range []string{"create", "get"} {
		for _, on := range []bool{false, true} {
			name := op + "/metrics=off"
			if on {
				name = op + "/metrics=on"
			}
			b.Run(name, func(b *testing.B) { benchMetrics(b, op, on) })
		}
	}
}

func benchMetrics(b *testing.B, op string, on bool) {
	var eo engine.Options
	reg := prometheus.NewRegistry()
	if on {
		eo.Observer = metrics.New(reg)
	}
	hs := servertest.Start(b, servertest.Options{
		Engine: eo,
		HTTP:   &mcp.StreamableHTTPOptions{Stateless: true},
		Register: func(ts *mcptask.Server) (func(), error) {
			mcptask.AddTool(ts, &mcp.Tool{Name: "job"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
			}, mcptask.ToolOptions{Support: mcptask.Optional})
			return nil, nil
		},
	})
	if on {
		if err := eo.Observer.(*metrics.Metrics).CollectStore(hs.Store, 0, nil); err != nil {
			b.Fatal(err)
		}
	}
	c := &wiretest.Client{URL: hs.URL, Tasks: true}
	ctx := context.Background()
	tk, err := c.CallTool(ctx, "job", nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.WaitFor(ctx, tk.TaskID, wiretest.Terminal); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		switch op {
		case "create":
			if _, err := c.CallTool(ctx, "job", nil); err != nil {
				b.Fatal(err)
			}
		case "get":
			if _, err := c.Get(ctx, tk.TaskID); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	if on {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkObserverCalls measures what the metrics add per event: the
// calls a tasks/get makes (one request counted) and those of a task's
// life (created, finished with its duration).
func BenchmarkObserverCalls(b *testing.B) {
	m := metrics.New(prometheus.NewRegistry())
	b.Run("get", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.Request("tasks/get", "ok")
		}
	})
	b.Run("task", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.TaskCreated("job")
			m.TaskFinished("job", task.OutcomeOK, 1500*time.Microsecond)
		}
	})
}
