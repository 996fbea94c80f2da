package gateway_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/gateway"
	"github.com/mcptask/mcptask/internal/servertest"
	"github.com/mcptask/mcptask/internal/wiretest"
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
