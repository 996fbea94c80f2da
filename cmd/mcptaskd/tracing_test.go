package main

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// receivedSpan is a span an OTLP receiver got.
type receivedSpan struct {
	Name, TraceID, SpanID, ParentID, Service string
	Attrs                                    map[string]string
}

// otlpReceiver is an OTLP/HTTP trace receiver on loopback.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
	posts int
}

func startReceiver(t *testing.T) (*otlpReceiver, string) {
	r := &otlpReceiver{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
			http.NotFound(w, req)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&msg)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(hs.Close)
	return r, hs.URL
}

func (r *otlpReceiver) add(msg *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posts++
	for _, rs := range msg.GetResourceSpans() {
		service := attrsOf(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, receivedSpan{
					Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()), Service: service, Attrs: attrsOf(s.GetAttributes()),
				})
			}
		}
	}
}

func attrsOf(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = strconv.FormatBool(v.BoolValue)
		}
	}
	return m
}

// find returns the spans named name in trace.
func (r *otlpReceiver) find(name, trace string) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, s := range r.spans {
		if s.Name == name && s.TraceID == trace {
			out = append(out, s)
		}
	}
	return out
}

// await waits until trace has a span named name for which cond holds.
func (r *otlpReceiver) await(t *testing.T, name, trace string, cond func(receivedSpan) bool) receivedSpan {
	t.Helper()
	var found receivedSpan
	waitUntil(t, 30*time.Second, name+" span in trace "+trace, func() (bool, error) {
		for _, s := range r.find(name, trace) {
			if cond(s) {
				found = s
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// callWithTrace starts a task whose tools/call carries traceparent.
func callWithTrace(t *testing.T, c *wiretest.Client, traceparent, tool string, args map[string]any) string {
	t.Helper()
	meta := c.Meta()
	meta["traceparent"] = traceparent
	var h wiretest.Task
	if err := c.Result(context.Background(), "tools/call", map[string]any{"name": tool, "arguments": args, "_meta": meta}, &h); err != nil {
		t.Fatal(err)
	}
	if h.TaskID == "" {
		t.Fatalf("no task: %+v", h)
	}
	return h.TaskID
}

// TestTracesExportedOverOTLP: mcptaskd with OTEL_EXPORTER_OTLP_ENDPOINT
// exports the create and run spans of a task to the receiver, in the
// trace of the call's traceparent, children of the host's span; a task
// re-run after a crash (kill -9, same SQLite file) continues that trace
// in its second run attempt.
func TestTracesExportedOverOTLP(t *testing.T) {
	rcv, endpoint := startReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_SERVICE_NAME", "")
	db := filepath.Join(t.TempDir(), "tasks.db")
	d1 := startDaemon(t, "traced#1", db)
	c := d1.client(true)

	const traceA, hostA = "11111111111111111111111111111111", "aaaaaaaaaaaaaaaa"
	id := callWithTrace(t, c, "00-"+traceA+"-"+hostA+"-01", "long_computation", map[string]any{"n": 100, "steps": 1, "step_delay_ms": 0})
	waitTask(t, c, id, 30*time.Second, "completed", func(tk *wiretest.Task) bool { return tk.Status == "completed" })
	create := rcv.await(t, "mcptask.create", traceA, func(s receivedSpan) bool { return s.ParentID == hostA })
	if create.Attrs["mcptask.tool"] != "long_computation" || create.Attrs["mcptask.task.id"] != id || create.Service != "mcptaskd" {
		t.Errorf("create span %+v", create)
	}
	run := rcv.await(t, "mcptask.run", traceA, func(s receivedSpan) bool { return s.ParentID == hostA })
	if run.Attrs["mcptask.outcome"] != "completed" || run.Attrs["mcptask.attempt"] != "1" || run.Attrs["mcptask.task.id"] != id {
		t.Errorf("run span %+v", run)
	}

	const traceB, hostB = "22222222222222222222222222222222", "bbbbbbbbbbbbbbbb"
	id = callWithTrace(t, c, "00-"+traceB+"-"+hostB+"-01", "long_computation", map[string]any{"n": 1000, "steps": 2, "step_delay_ms": 1000})
	waitTask(t, c, id, 30*time.Second, "working", func(tk *wiretest.Task) bool {
		return tk.Status == "working" && strings.HasPrefix(tk.StatusMessage, "step 1 of 2")
	})
	rcv.await(t, "mcptask.create", traceB, func(s receivedSpan) bool { return s.ParentID == hostB })
	d1.kill9()

	d2 := startDaemon(t, "traced#2", db)
	c = d2.client(true)
	waitTask(t, c, id, 60*time.Second, "re-run to completion", func(tk *wiretest.Task) bool { return tk.Status == "completed" })
	if err := d2.signal(syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("mcptaskd#2 stopping: %v", err)
	}
	rerun := rcv.await(t, "mcptask.run", traceB, func(s receivedSpan) bool { return s.Attrs["mcptask.attempt"] == "2" })
	if rerun.ParentID != hostB || rerun.Attrs["mcptask.outcome"] != "completed" || rerun.Attrs["mcptask.task.id"] != id {
		t.Errorf("re-run span %+v, want a completed child of the host's span %s", rerun, hostB)
	}
}

// TestTracingConfig: the environment decides whether mcptaskd exports
// traces; with nothing set, or OTEL_TRACES_EXPORTER=none, no provider and
// so no exporter exists (mcptask then records nothing).
func TestTracingConfig(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		env     map[string]string
		want    bool
		wantErr bool
	}{
		{env: nil},
		{env: map[string]string{"OTEL_SERVICE_NAME": "x"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: true},
	} {
		getenv := func(k string) string { return tc.env[k] }
		tp, stop, err := newTracerProvider(context.Background(), getenv, log)
		if (err != nil) != tc.wantErr {
			t.Errorf("%v: err %v", tc.env, err)
			continue
		}
		if err != nil {
			continue
		}
		if (tp != nil) != tc.want {
			t.Errorf("%v: provider %v, want one: %v", tc.env, tp, tc.want)
		}
		if err := stop(context.Background()); err != nil {
			t.Errorf("%v: stop: %v", tc.env, err)
		}
	}
}
