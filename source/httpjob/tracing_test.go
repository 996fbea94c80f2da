package httpjob_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/source/httpjob"
	"github.com/mcptask/mcptask/task"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestJobRequestsTraced: each request of an HTTP job tool to its job API
// is a client span in the run attempt's trace, and the job API receives
// its trace context as the traceparent header.
func TestJobRequestsTraced(t *testing.T) {
	j := newJobs(t)
	// The job API as seen through a proxy that records the traceparent
	// header of each request.
	var mu sync.Mutex
	got := map[string]string{} // traceparent by method and path
	target, _ := url.Parse(j.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/test/") {
			mu.Lock()
			got[r.Method+" "+r.URL.Path] = r.Header.Get("traceparent")
			mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(api.Close)

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := servertest.Start(t, servertest.Options{
		DB:     filepath.Join(t.TempDir(), "tasks.db"),
		Logger: slog.New(slog.DiscardHandler),
		Engine: engine.Options{Policy: task.Policy{PollInterval: 20 * time.Millisecond}},
		Tasks:  mcptask.Options{TracerProvider: tp},
		Register: func(ts *mcptask.Server) (func(), error) {
			return nil, httpjob.New([]httpjob.Tool{buildTool(api.URL, false)}, &http.Client{}, nil).Register(t.Context(), ts)
		},
	})
	c := &wiretest.Client{URL: s.URL + "/mcp", Tasks: true}
	const traceID, hostSpan = "33333333333333333333333333333333", "cccccccccccccccc"
	meta := c.Meta()
	meta["traceparent"] = "00-" + traceID + "-" + hostSpan + "-01"
	var h wiretest.Task
	if err := c.Result(context.Background(), "tools/call", map[string]any{"name": "build", "arguments": map[string]any{"ref": "main", "count": 1}, "_meta": meta}, &h); err != nil || h.TaskID == "" {
		t.Fatalf("build: %+v, %v", h, err)
	}
	// The job finishes when the test says so.
	j.hook(t, "/test/jobs/"+j.jobOf(t, h.TaskID)+"/finish", map[string]any{"artifact": "main.tgz"})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tk, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal)
	if err != nil || tk.Status != "completed" {
		t.Fatalf("task: %+v, %v", tk, err)
	}

	var run sdktrace.ReadOnlySpan
	var jobSpans []sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		switch sp.Name() {
		case "mcptask.run":
			run = sp
		case "mcptask.job.http":
			jobSpans = append(jobSpans, sp)
		}
	}
	if run == nil || len(jobSpans) < 2 {
		t.Fatalf("want a run span and at least the start and result requests' spans; got run %v, %d job spans", run != nil, len(jobSpans))
	}
	if run.SpanContext().TraceID().String() != traceID || run.Parent().SpanID().String() != hostSpan {
		t.Errorf("run span not a child of the host's span: %s/%s", run.SpanContext().TraceID(), run.Parent().SpanID())
	}
	sent := map[string]bool{}
	for _, sp := range jobSpans {
		if sp.Parent().SpanID() != run.SpanContext().SpanID() {
			t.Errorf("job span %v: parent %s, want the run %s", sp.Attributes(), sp.Parent().SpanID(), run.SpanContext().SpanID())
		}
		sent["00-"+traceID+"-"+sp.SpanContext().SpanID().String()+"-01"] = true
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 2 {
		t.Fatalf("the job API got %d distinct requests: %v", len(got), got)
	}
	for req, tp := range got {
		if !strings.HasPrefix(tp, "00-"+traceID+"-") || !sent[tp] {
			t.Errorf("%s: traceparent %q is not one of the job spans' %v", req, tp, sent)
		}
	}
}
