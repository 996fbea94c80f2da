package mcptask_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// The host's span the test requests continue.
const (
	hostTraceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
	hostSpanID     = "00f067aa0ba902b7"
	hostTraceparnt = "00-" + hostTraceID + "-" + hostSpanID + "-01"
)

// recorded returns a provider recording every span, and its recorder.
func recorded() (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), rec
}

// waitSpans waits until the recorder holds ended spans for which cond
// holds, and returns them.
func waitSpans(t *testing.T, rec *tracetest.SpanRecorder, what string, cond func([]sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		spans := rec.Ended()
		if cond(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; spans: %v", what, names(spans))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func named(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// callTraced starts a task of tool with the host's traceparent in _meta.
func callTraced(t *testing.T, c *wiretest.Client, tool string, args map[string]any) string {
	t.Helper()
	meta := c.Meta()
	meta["traceparent"] = hostTraceparnt
	meta["tracestate"] = "vendor=1"
	var h wiretest.Task
	if err := c.Result(ctxT(t), "tools/call", map[string]any{"name": tool, "arguments": args, "_meta": meta}, &h); err != nil {
		t.Fatal(err)
	}
	if h.TaskID == "" {
		t.Fatalf("%s: no task: %+v", tool, h)
	}
	return h.TaskID
}

// checkHostChild checks that s continues the host's trace as a child of
// the host's span.
func checkHostChild(t *testing.T, s sdktrace.ReadOnlySpan) {
	t.Helper()
	if got := s.SpanContext().TraceID().String(); got != hostTraceID {
		t.Errorf("%s: trace %s, want the host's %s", s.Name(), got, hostTraceID)
	}
	if got := s.Parent().SpanID().String(); got != hostSpanID || !s.Parent().IsRemote() {
		t.Errorf("%s: parent %s (remote %v), want the host's span %s", s.Name(), got, s.Parent().IsRemote(), hostSpanID)
	}
	if got := s.SpanContext().TraceState().Get("vendor"); got != "1" {
		t.Errorf("%s: tracestate vendor=%q, want 1", s.Name(), got)
	}
}

// TestTraceCreateRunInput: a task created with a traceparent in _meta
// continues the host's trace: its create and run spans are children of
// the host's span, each input wait a child of the run, and the run ends
// with the task's outcome.
func TestTraceCreateRunInput(t *testing.T) {
	tp, rec := recorded()
	s := startServerOpts(t, filepath.Join(t.TempDir(), "tasks.db"), mcptask.Options{TracerProvider: tp}, func(ts *mcptask.Server) { registerTestTools(ts, &gates{}) })
	c, _ := clients(s)
	ctx := ctxT(t)

	id := callTraced(t, c, "ask", nil)
	for range 2 {
		tk, err := c.WaitFor(ctx, id, func(tk *wiretest.Task) bool { return tk.Status == "input_required" && len(tk.InputRequests) == 1 })
		if err != nil {
			t.Fatal(err)
		}
		for key := range tk.InputRequests {
			answer := map[string]any{"action": "accept", "content": map[string]any{"ok": true}}
			if err := c.Result(ctx, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{key: answer}}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if tk, err := c.WaitFor(ctx, id, wiretest.Terminal); err != nil || tk.Status != "completed" {
		t.Fatalf("task: %+v, %v", tk, err)
	}
	spans := waitSpans(t, rec, "create, run and 2 input spans", func(s []sdktrace.ReadOnlySpan) bool {
		return len(named(s, "mcptask.create")) == 1 && len(named(s, "mcptask.run")) == 1 && len(named(s, "mcptask.input")) == 2
	})
	create, run := named(spans, "mcptask.create")[0], named(spans, "mcptask.run")[0]
	checkHostChild(t, create)
	checkHostChild(t, run)
	if create.SpanKind() != trace.SpanKindServer {
		t.Errorf("create span kind %v", create.SpanKind())
	}
	for _, kv := range []struct {
		s        sdktrace.ReadOnlySpan
		key, val string
	}{
		{create, "mcptask.tool", "ask"}, {create, "mcptask.wire", "2026-07-28"}, {create, "mcptask.task.id", id},
		{run, "mcptask.tool", "ask"}, {run, "mcptask.task.id", id}, {run, "mcptask.outcome", "completed"},
	} {
		if got := attr(kv.s, kv.key).AsString(); got != kv.val {
			t.Errorf("%s %s = %q, want %q", kv.s.Name(), kv.key, got, kv.val)
		}
	}
	if got := attr(run, "mcptask.attempt").AsInt64(); got != 1 {
		t.Errorf("run attempt %d, want 1", got)
	}
	if run.Status().Code != codes.Ok {
		t.Errorf("run status %v", run.Status())
	}
	for _, in := range named(spans, "mcptask.input") {
		if in.Parent().SpanID() != run.SpanContext().SpanID() {
			t.Errorf("input span's parent %s, want the run %s", in.Parent().SpanID(), run.SpanContext().SpanID())
		}
		if got := attr(in, "mcptask.input.method").AsString(); got != "elicitation/create" {
			t.Errorf("input method %q", got)
		}
	}

	// A failed task's run ends in error.
	rec.Reset()
	id = callTraced(t, c, "rpc_error", nil)
	if tk, err := c.WaitFor(ctx, id, wiretest.Terminal); err != nil || tk.Status != "failed" {
		t.Fatalf("task: %+v, %v", tk, err)
	}
	spans = waitSpans(t, rec, "the failed run", func(s []sdktrace.ReadOnlySpan) bool { return len(named(s, "mcptask.run")) == 1 })
	run = named(spans, "mcptask.run")[0]
	if run.Status().Code != codes.Error || run.Status().Description != "backend unavailable" || attr(run, "mcptask.outcome").AsString() != "failed" {
		t.Errorf("failed run: status %+v, outcome %q", run.Status(), attr(run, "mcptask.outcome").AsString())
	}
}

// spanSeen records the span context a tool handler ran in.
type spanSeen struct {
	mu   sync.Mutex
	seen []trace.SpanContext
	rec  []bool
}

func (s *spanSeen) add(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, trace.SpanContextFromContext(ctx))
	s.rec = append(s.rec, trace.SpanFromContext(ctx).IsRecording())
}

func (s *spanSeen) last() (trace.SpanContext, bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		return trace.SpanContext{}, false, 0
	}
	return s.seen[len(s.seen)-1], s.rec[len(s.rec)-1], len(s.seen)
}

// registerSpanTool adds "traced", a Rerunnable tool that records the
// span it runs in and waits for gate.
func registerSpanTool(ts *mcptask.Server, seen *spanSeen, gate chan struct{}) {
	mcptask.AddTool(ts, &mcp.Tool{Name: "traced", Description: "records its span"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			seen.add(ctx)
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return text("traced"), nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Optional, Rerunnable: true})
}

// TestTraceRerunContinues: a task re-run after a restart continues the
// trace of its stored call: its second run attempt is a child of the
// host's span, and the handler runs in it.
func TestTraceRerunContinues(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	tp1, rec1 := recorded()
	seen := &spanSeen{}
	gate := make(chan struct{})
	s1 := startServerOpts(t, db, mcptask.Options{TracerProvider: tp1}, func(ts *mcptask.Server) { registerSpanTool(ts, seen, gate) })
	c, _ := clients(s1)
	ctx := ctxT(t)
	id := callTraced(t, c, "traced", nil)
	waitUntilSeen := func(n int) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, _, got := seen.last(); got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the handler did not run %d times", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitUntilSeen(1)
	s1.close() // the work stops; the Rerunnable task runs again at the next start
	spans := waitSpans(t, rec1, "the stopped first run", func(s []sdktrace.ReadOnlySpan) bool { return len(named(s, "mcptask.run")) == 1 })
	first := named(spans, "mcptask.run")[0]
	if got := attr(first, "mcptask.outcome").AsString(); got != "stopped" {
		t.Errorf("first run outcome %q, want stopped", got)
	}

	tp2, rec2 := recorded()
	close(gate)
	s2 := startServerOpts(t, db, mcptask.Options{TracerProvider: tp2}, func(ts *mcptask.Server) { registerSpanTool(ts, seen, gate) })
	c, _ = clients(s2)
	if tk, err := c.WaitFor(ctx, id, wiretest.Terminal); err != nil || tk.Status != "completed" {
		t.Fatalf("re-run task: %+v, %v", tk, err)
	}
	spans = waitSpans(t, rec2, "the re-run", func(s []sdktrace.ReadOnlySpan) bool { return len(named(s, "mcptask.run")) == 1 })
	run := named(spans, "mcptask.run")[0]
	checkHostChild(t, run)
	if got := attr(run, "mcptask.attempt").AsInt64(); got != 2 {
		t.Errorf("re-run attempt %d, want 2", got)
	}
	if got := attr(run, "mcptask.outcome").AsString(); got != "completed" {
		t.Errorf("re-run outcome %q", got)
	}
	waitUntilSeen(2)
	sc, recording, _ := seen.last()
	if sc.SpanID() != run.SpanContext().SpanID() || !recording {
		t.Errorf("the re-run handler ran in span %s (recording %v), want the run's %s", sc.SpanID(), recording, run.SpanContext().SpanID())
	}
}

// TestTracingOffByDefault: without a TracerProvider (and no global one
// installed) nothing records, yet the host's trace context still reaches
// the handler, for a tool that propagates it itself.
func TestTracingOffByDefault(t *testing.T) {
	seen := &spanSeen{}
	gate := make(chan struct{})
	close(gate)
	s := startServerWith(t, filepath.Join(t.TempDir(), "tasks.db"), func(ts *mcptask.Server) { registerSpanTool(ts, seen, gate) })
	c, _ := clients(s)
	id := callTraced(t, c, "traced", nil)
	if tk, err := c.WaitFor(ctxT(t), id, wiretest.Terminal); err != nil || tk.Status != "completed" {
		t.Fatalf("task: %+v, %v", tk, err)
	}
	sc, recording, n := seen.last()
	if n != 1 || recording {
		t.Fatalf("handler ran %d times, in a recording span: %v", n, recording)
	}
	if sc.TraceID().String() != hostTraceID || sc.SpanID().String() != hostSpanID {
		t.Errorf("handler's span context %s/%s, want the host's", sc.TraceID(), sc.SpanID())
	}
}

// TestTraceJobTool: a task started through the job tools (job_start, for
// clients without task support) is traced in the trace of that call: its
// create and run spans are children of the host's span, and the tool
// handler runs in the run span.
func TestTraceJobTool(t *testing.T) {
	tp, rec := recorded()
	seen := &spanSeen{}
	gate := make(chan struct{})
	close(gate)
	s := startServerOpts(t, filepath.Join(t.TempDir(), "tasks.db"), mcptask.Options{TracerProvider: tp}, func(ts *mcptask.Server) {
		registerSpanTool(ts, seen, gate)
		ts.AddJobTools("")
	})
	_, c := clients(s) // a client without task support
	meta := c.Meta()
	meta["traceparent"] = hostTraceparnt
	meta["tracestate"] = "vendor=1"
	var res struct {
		IsError bool `json:"isError"`
	}
	if err := c.Result(ctxT(t), "tools/call", map[string]any{"name": "job_start", "arguments": map[string]any{"tool": "traced"}, "_meta": meta}, &res); err != nil || res.IsError {
		t.Fatalf("job_start: %+v, %v", res, err)
	}
	spans := waitSpans(t, rec, "the job's create and run", func(s []sdktrace.ReadOnlySpan) bool {
		return len(named(s, "mcptask.create")) == 1 && len(named(s, "mcptask.run")) == 1
	})
	create, run := named(spans, "mcptask.create")[0], named(spans, "mcptask.run")[0]
	checkHostChild(t, create)
	checkHostChild(t, run)
	if got := attr(run, "mcptask.outcome").AsString(); got != "completed" {
		t.Errorf("job run outcome %q", got)
	}
	sc, recording, n := seen.last()
	if n != 1 || sc.SpanID() != run.SpanContext().SpanID() || !recording {
		t.Errorf("the job's handler ran %d times, last in span %s (recording %v), want the run's %s", n, sc.SpanID(), recording, run.SpanContext().SpanID())
	}
}

// TestTraceStoreSpans: with a TracerProvider, a task call's store
// operations are spans of their own under the create span, naming the
// database system, the operation and the task, never the principal or
// the arguments.
func TestTraceStoreSpans(t *testing.T) {
	tp, rec := recorded()
	seen := &spanSeen{}
	gate := make(chan struct{})
	close(gate)
	s := startServerOpts(t, filepath.Join(t.TempDir(), "tasks.db"), mcptask.Options{TracerProvider: tp}, func(ts *mcptask.Server) { registerSpanTool(ts, seen, gate) })
	c, _ := clients(s)
	id := callTraced(t, c, "traced", nil)
	if tk, err := c.WaitFor(ctxT(t), id, wiretest.Terminal); err != nil || tk.Status != "completed" {
		t.Fatalf("task: %+v, %v", tk, err)
	}
	spans := waitSpans(t, rec, "the create and its store span", func(s []sdktrace.ReadOnlySpan) bool {
		return len(named(s, "mcptask.create")) == 1 && len(named(s, "mcptask.store.create")) == 1
	})
	create, stored := named(spans, "mcptask.create")[0], named(spans, "mcptask.store.create")[0]
	if stored.Parent().SpanID() != create.SpanContext().SpanID() || stored.SpanContext().TraceID().String() != hostTraceID {
		t.Errorf("store span's parent %s in trace %s, want the create span %s in the host's trace", stored.Parent().SpanID(), stored.SpanContext().TraceID(), create.SpanContext().SpanID())
	}
	if stored.SpanKind() != trace.SpanKindClient {
		t.Errorf("store span kind %v", stored.SpanKind())
	}
	for key, want := range map[string]string{"db.system.name": "sqlite", "db.operation.name": "create", "mcptask.task.id": id} {
		if got := attr(stored, key).Emit(); got != want {
			t.Errorf("store span %s = %q, want %q", key, got, want)
		}
	}
	for _, sp := range spans {
		if !strings.HasPrefix(sp.Name(), "mcptask.store.") {
			continue
		}
		for _, kv := range sp.Attributes() {
			if strings.Contains(string(kv.Key), "principal") || strings.Contains(string(kv.Key), "owner") || strings.Contains(string(kv.Key), "argument") {
				t.Errorf("%s carries %s=%s", sp.Name(), kv.Key, kv.Value.Emit())
			}
		}
	}

	// A tasks/get joins the trace of its _meta: its store read (one view:
	// the task, its latest operation and log position) is a child of the
	// host's span; without a trace context it makes no span.
	rec.Reset()
	if err := c.Result(ctxT(t), "tasks/get", map[string]any{"taskId": id, "_meta": c.Meta()}, nil); err != nil {
		t.Fatal(err)
	}
	meta := c.Meta()
	meta["traceparent"] = hostTraceparnt
	if err := c.Result(ctxT(t), "tasks/get", map[string]any{"taskId": id, "_meta": meta}, nil); err != nil {
		t.Fatal(err)
	}
	if gets := named(rec.Ended(), "mcptask.store.get"); len(gets) != 0 {
		t.Errorf("%d store get spans for tasks/get, want none (one view)", len(gets))
	}
	gets := named(rec.Ended(), "mcptask.store.view")
	if len(gets) != 1 {
		t.Fatalf("%d store view spans for a traced and an untraced tasks/get, want 1", len(gets))
	}
	if gets[0].Parent().SpanID().String() != hostSpanID || gets[0].SpanContext().TraceID().String() != hostTraceID {
		t.Errorf("tasks/get's store span: parent %s in trace %s, want the host's span", gets[0].Parent().SpanID(), gets[0].SpanContext().TraceID())
	}
}
