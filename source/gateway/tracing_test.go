package gateway_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/upstreamtest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/source/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestUpstreamCallTraced: a gateway tool's upstream call is a client span
// of the task's run, and the upstream receives its trace context in the
// call's _meta.
func TestUpstreamCallTraced(t *testing.T) {
	got := make(chan string, 1) // the traceparent the upstream received
	up := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "traced", Description: "reports the trace context it got"},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			tp, _ := req.Params.GetMeta()["traceparent"].(string)
			got <- tp
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(hs.Close)

	rec := tracetest.NewSpanRecorder()
	s := servertest.Start(t, servertest.Options{
		Logger:    slog.New(slog.DiscardHandler),
		StopGrace: 5 * time.Second,
		Tasks:     mcptask.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))},
		Register:  startGateway(t, []gateway.Upstream{{Name: "up", URL: hs.URL, Default: gateway.ToolPolicy{Support: mcptask.Optional}}}),
	})
	c := &wiretest.Client{URL: s.URL + "/mcp", Tasks: true}
	const traceID, hostSpan = "44444444444444444444444444444444", "dddddddddddddddd"
	meta := c.Meta()
	meta["traceparent"] = "00-" + traceID + "-" + hostSpan + "-01"
	var h wiretest.Task
	if err := c.Result(t.Context(), "tools/call", map[string]any{"name": "traced", "_meta": meta}, &h); err != nil || h.TaskID == "" {
		t.Fatalf("traced: %+v, %v", h, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if tk, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal); err != nil || tk.Status != "completed" {
		t.Fatalf("task: %+v, %v", tk, err)
	}
	var run, call sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		switch sp.Name() {
		case "mcptask.run":
			run = sp
		case "mcptask.upstream.call":
			call = sp
		}
	}
	if run == nil || call == nil {
		t.Fatalf("want run and upstream call spans; got run %v, call %v", run != nil, call != nil)
	}
	if run.SpanContext().TraceID().String() != traceID || run.Parent().SpanID().String() != hostSpan {
		t.Errorf("run span not a child of the host's span")
	}
	if call.Parent().SpanID() != run.SpanContext().SpanID() || call.SpanContext().TraceID().String() != traceID {
		t.Errorf("upstream call span's parent %s, want the run %s", call.Parent().SpanID(), run.SpanContext().SpanID())
	}
	want := "00-" + traceID + "-" + call.SpanContext().SpanID().String() + "-01"
	select {
	case tp := <-got:
		if tp != want {
			t.Errorf("the upstream got traceparent %q, want the call span's %q", tp, want)
		}
	default:
		t.Fatal("the upstream was not called")
	}
}

// TestUpstreamTaskTraced: the requests the gateway sends an upstream that
// speaks tasks (the tools/call that creates the upstream task, then
// tasks/get on 2026-07-28 or tasks/result on 2025-11-25) carry the trace
// context of the task's run in their _meta, so that the upstream
// continues the trace; without tracing (and no trace context from the
// host) they carry none. (On 2026-07-28 the upstream's task notifications
// usually bring the outcome, over the session's one subscriptions/listen
// stream, which carries no task's trace; any tasks/get is checked.)
func TestUpstreamTaskTraced(t *testing.T) {
	const traceID, hostSpan = "55555555555555555555555555555555", "eeeeeeeeeeeeeeee"
	for _, tc := range []struct {
		name, wire, follow string
		traced, mustFollow bool
	}{
		{"on/2026", client.Wire20260728, "tasks/get", true, false},
		{"on/2025", client.Wire20251125, "tasks/result", true, true},
		{"off/2026", client.Wire20260728, "tasks/get", false, false},
		{"off/2025", client.Wire20251125, "tasks/result", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := upstreamtest.New(t)
			rec := tracetest.NewSpanRecorder()
			var opts mcptask.Options
			if tc.traced {
				opts.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			}
			s := servertest.Start(t, servertest.Options{
				Logger:    slog.New(slog.DiscardHandler),
				StopGrace: 5 * time.Second,
				Tasks:     opts,
				Register:  startGateway(t, []gateway.Upstream{{Name: "up", URL: up.URL, ProtocolVersion: tc.wire}}),
			})
			c := &wiretest.Client{URL: s.URL + "/mcp", Tasks: true}
			meta := c.Meta()
			if tc.traced {
				meta["traceparent"] = "00-" + traceID + "-" + hostSpan + "-01"
			}
			var h wiretest.Task
			if err := c.Result(t.Context(), "tools/call", map[string]any{"name": "work", "arguments": map[string]any{"label": "x"}, "_meta": meta}, &h); err != nil || h.TaskID == "" {
				t.Fatalf("work: %+v, %v", h, err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			// Released once the upstream task runs: the gateway follows it.
			if _, err := c.WaitFor(ctx, h.TaskID, func(tk *wiretest.Task) bool { return tk.StatusMessage == "upstream working on x" }); err != nil {
				t.Fatal(err)
			}
			up.Release()
			if tk, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal); err != nil || tk.Status != "completed" {
				t.Fatalf("task: %+v, %v", tk, err)
			}
			calls, follows := up.Traceparents("tools/call"), up.Traceparents(tc.follow)
			if len(calls) != 1 || tc.mustFollow && len(follows) == 0 {
				t.Fatalf("the upstream got %d tools/call and %d %s (tasks/get %d, tasks/result %d, tasks/listen %d)", len(calls), len(follows), tc.follow,
					len(up.Traceparents("tasks/get")), len(up.Traceparents("tasks/result")), len(up.Traceparents("tasks/listen")))
			}
			if !tc.traced {
				for _, tp := range append(calls, follows...) {
					if tp != "" {
						t.Errorf("without tracing the upstream got traceparent %q", tp)
					}
				}
				return
			}
			var run, call sdktrace.ReadOnlySpan
			for _, sp := range rec.Ended() {
				switch sp.Name() {
				case "mcptask.run":
					run = sp
				case "mcptask.upstream.call":
					call = sp
				}
			}
			if run == nil || call == nil {
				t.Fatalf("want run and upstream call spans; got run %v, call %v", run != nil, call != nil)
			}
			if want := "00-" + traceID + "-" + call.SpanContext().SpanID().String() + "-01"; calls[0] != want {
				t.Errorf("the upstream's tools/call got traceparent %q, want the call span's %q", calls[0], want)
			}
			want := "00-" + traceID + "-" + run.SpanContext().SpanID().String() + "-01"
			for _, tp := range follows {
				if tp != want {
					t.Errorf("the upstream's %s got traceparent %q, want the run span's %q", tc.follow, tp, want)
				}
			}
		})
	}
}
