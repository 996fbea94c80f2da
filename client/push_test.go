package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sleepy runs for ms milliseconds, setting its status message every
// 500 ms.
func sleepy(ctx context.Context, _ *mcp.CallToolRequest, in struct {
	Ms int `json:"ms"`
}) (*mcp.CallToolResult, any, error) {
	end := time.Now().Add(time.Duration(in.Ms) * time.Millisecond)
	for i := 1; time.Now().Before(end); i++ {
		select {
		case <-time.After(min(500*time.Millisecond, time.Until(end))):
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if tk := mcptask.FromContext(ctx); tk != nil && time.Now().Before(end) {
			if err := tk.SetStatusMessage(ctx, fmt.Sprintf("tick %d", i)); err != nil {
				return nil, nil, err
			}
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil, nil
}

// statusLog collects what OnStatus reports.
type statusLog struct {
	mu   sync.Mutex
	seen []string // "status: message"
}

func (l *statusLog) on(st *client.TaskStatus) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, st.Status+": "+st.StatusMessage)
}

func (l *statusLog) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.seen, s)
}

func (l *statusLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

type waitOutcome struct {
	res *mcp.CallToolResult
	err error
}

// stepThrough calls the steps tool (label, 2 steps) on c, waits for it in
// the background and walks it through its steps, each once OnStatus has
// seen the one before; between is called after step 1 was seen. It
// returns the wait's outcome and what OnStatus saw.
func stepThrough(t *testing.T, s *testServer, c *client.Client, label string, between func()) (waitOutcome, []string) {
	t.Helper()
	ctx := testCtx(t)
	call, err := c.CallTool(ctx, "steps", map[string]any{"label": label, "steps": 2})
	if err != nil || call.Task == nil {
		t.Fatalf("CallTool: %+v, %v", call, err)
	}
	var log statusLog
	done := make(chan waitOutcome, 1)
	go func() {
		res, err := c.Wait(ctx, call.Task.ID, &client.WaitOptions{OnStatus: log.on})
		done <- waitOutcome{res, err}
	}()
	for i := 1; i <= 2; i++ {
		s.Steps.Step(label)
		want := fmt.Sprintf("working: step %d", i)
		waitFor(t, 20*time.Second, want, func() bool { return log.has(want) })
		if i == 1 && between != nil {
			between()
		}
	}
	s.Steps.Step(label)
	select {
	case out := <-done:
		return out, log.all()
	case <-ctx.Done():
		t.Fatal("Wait did not return")
	}
	return waitOutcome{}, nil
}

func checkDone(t *testing.T, out waitOutcome, label string, seen []string) {
	t.Helper()
	if out.err != nil || text(out.res) != "done "+label {
		t.Fatalf("Wait = %q, %v", text(out.res), out.err)
	}
	for _, want := range []string{"working: step 1", "working: step 2"} {
		if !slices.Contains(seen, want) {
			t.Fatalf("OnStatus saw %q, not %q", seen, want)
		}
	}
}

// TestWaitPush: over Streamable HTTP, Wait follows the server's task
// notifications: on 2026-07-28 (a listen stream) it sends no tasks/get at
// all, on 2025-11-25 (notifications/tasks/status on the standalone GET
// stream) one; OnStatus sees every step and Wait returns the result as
// soon as the task completes. With DisablePush it polls.
func TestWaitPush(t *testing.T) {
	for _, tc := range []struct {
		wire    string
		maxGets int
	}{{client.Wire20260728, 0}, {client.Wire20251125, 1}} {
		t.Run(tc.wire, func(t *testing.T) {
			s := newServer(t, serverOpts{})
			c := dial(t, s.URL, &client.Options{ProtocolVersion: tc.wire})
			out, seen := stepThrough(t, s, c, "push", nil)
			checkDone(t, out, "push", seen)
			t.Logf("push: %d tasks/get; OnStatus saw %q", s.count(wire.MethodTasksGet), seen)
			if n := s.count(wire.MethodTasksGet); n > tc.maxGets {
				t.Fatalf("%d tasks/get with push, want at most %d", n, tc.maxGets)
			}

			before := s.count(wire.MethodTasksGet)
			c2 := dial(t, s.URL, &client.Options{ProtocolVersion: tc.wire, DisablePush: true})
			out, seen = stepThrough(t, s, c2, "poll", nil)
			checkDone(t, out, "poll", seen)
			t.Logf("DisablePush: %d tasks/get", s.count(wire.MethodTasksGet)-before)
			if n := s.count(wire.MethodTasksGet) - before; n <= tc.maxGets {
				t.Fatalf("%d tasks/get with DisablePush: it did not poll", n)
			}
		})
	}
}

// TestWaitPush2025Connect: on a connection of its own (here in memory, as
// stdio is), a 2025-11-25 wait gets the status notifications on the
// connection itself: one tasks/get.
func TestWaitPush2025Connect(t *testing.T) {
	s := newServer(t, serverOpts{})
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.TS.Run(ctx, st) }()
	t.Cleanup(func() { cancel(); <-served })
	c, err := client.Connect(testCtx(t), ct, "memory:test", &client.Options{ProtocolVersion: client.Wire20251125})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	out, seen := stepThrough(t, s, c, "mem", nil)
	checkDone(t, out, "mem", seen)
	if n := s.count(wire.MethodTasksGet); n > 1 {
		t.Fatalf("%d tasks/get with push on the connection, want at most 1", n)
	}
}

// taskListen reports whether r is a subscriptions/listen for tasks (not
// one the go-sdk client opens for its own notifications), and leaves its
// body readable.
func taskListen(r *http.Request) bool {
	if r.Header.Get("Mcp-Method") != wire.MethodSubscriptionsListen {
		return false
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return bytes.Contains(body, []byte(`"taskIds"`))
}

// listenGate counts a server's subscriptions/listen requests for tasks
// and refuses them once closed.
type listenGate struct {
	n       atomic.Int64
	refused atomic.Bool
}

func (g *listenGate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if taskListen(r) {
			g.n.Add(1)
			if g.refused.Load() {
				http.Error(rw, "no more streams", http.StatusMethodNotAllowed)
				return
			}
		}
		h.ServeHTTP(rw, r)
	})
}

// TestWaitPushStreamBreaks: when the server cuts every connection while
// the task runs (the notifications' stream with them), Wait polls and
// still returns the result; on 2026-07-28 it opens another listen stream
// when the server gives one.
func TestWaitPushStreamBreaks(t *testing.T) {
	for _, tc := range []struct {
		wire   string
		relist bool // the server takes new listen streams after the cut
	}{{client.Wire20260728, false}, {client.Wire20260728, true}, {client.Wire20251125, false}} {
		t.Run(fmt.Sprintf("%s/relisten=%v", tc.wire, tc.relist), func(t *testing.T) {
			var gate listenGate
			s := newServer(t, serverOpts{wrap: gate.wrap})
			c := dial(t, s.URL, &client.Options{ProtocolVersion: tc.wire})
			var before int
			var listens int64
			out, seen := stepThrough(t, s, c, "cut", func() {
				before, listens = s.count(wire.MethodTasksGet), gate.n.Load()
				gate.refused.Store(!tc.relist)
				s.HS.CloseClientConnections()
			})
			checkDone(t, out, "cut", seen)
			gets := s.count(wire.MethodTasksGet)
			t.Logf("%d tasks/get before the cut, %d in all; %d listens before the cut, %d in all", before, gets, listens, gate.n.Load())
			switch {
			case tc.relist && gate.n.Load() <= listens:
				t.Fatal("no listen stream opened again after the cut")
			case !tc.relist && gets <= before:
				t.Fatalf("no tasks/get after the stream broke (%d before, %d after)", before, gets)
			}
		})
	}
}

// TestWaitWithoutPush: a server that gives no notifications (the listen
// refused on 2026-07-28; no standalone GET stream on 2025-11-25) is
// polled.
func TestWaitWithoutPush(t *testing.T) {
	refuse := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet || r.Header.Get("Mcp-Method") == wire.MethodSubscriptionsListen {
				http.Error(rw, "no streams here", http.StatusMethodNotAllowed)
				return
			}
			h.ServeHTTP(rw, r)
		})
	}
	for _, w := range []string{client.Wire20260728, client.Wire20251125} {
		t.Run(w, func(t *testing.T) {
			s := newServer(t, serverOpts{wrap: refuse})
			c := dial(t, s.URL, &client.Options{ProtocolVersion: w})
			out, seen := stepThrough(t, s, c, "nopush", nil)
			checkDone(t, out, "nopush", seen)
			if n := s.count(wire.MethodTasksGet); n <= 1 {
				t.Fatalf("%d tasks/get: it did not poll", n)
			}
		})
	}
}

// BenchmarkWaitGets measures the tasks/get requests of one wait for a 2 s
// task (status message every 500 ms; the server suggests polling every
// 500 ms) with and without push, on both wires over Streamable HTTP:
//
//	go test -run '^$' -bench WaitGets -benchtime 3x ./client/
func BenchmarkWaitGets(b *testing.B) {
	for _, w := range []string{client.Wire20260728, client.Wire20251125} {
		for _, push := range []bool{true, false} {
			name := w + "/push"
			if !push {
				name = w + "/poll"
			}
			b.Run(name, func(b *testing.B) {
				s := newServer(b, serverOpts{poll: 500 * time.Millisecond})
				c := dial(b, s.URL, &client.Options{ProtocolVersion: w, DisablePush: !push})
				ctx := context.Background()
				before := s.count(wire.MethodTasksGet)
				b.ResetTimer()
				for range b.N {
					call, err := c.CallTool(ctx, "sleepy", map[string]any{"ms": 2000})
					if err != nil || call.Task == nil {
						b.Fatalf("CallTool: %+v, %v", call, err)
					}
					if _, err := c.Wait(ctx, call.Task.ID, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(s.count(wire.MethodTasksGet)-before)/float64(b.N), "gets/op")
			})
		}
	}
}

// TestWaitPushInputRequired: a task that asks a question is answered from
// its notifications: on 2026-07-28 the input request comes in a
// notifications/tasks and the answer goes out with tasks/update, without a
// tasks/get; on 2025-11-25 the input_required notification starts
// tasks/result, which carries the question, after one tasks/get.
func TestWaitPushInputRequired(t *testing.T) {
	for _, tc := range []struct {
		wire    string
		maxGets int
	}{{client.Wire20260728, 0}, {client.Wire20251125, 1}} {
		t.Run(tc.wire, func(t *testing.T) {
			s := newServer(t, serverOpts{})
			el := &confirm{}
			c := dial(t, s.URL, &client.Options{ProtocolVersion: tc.wire, Elicit: el.Elicit})
			tk := startTask(t, c, "deploy_with_confirmation", map[string]any{"service": "api", "version": "2", "build_steps": 1, "step_delay_ms": 0})
			res, err := c.Wait(testCtx(t), tk.ID, nil)
			if err != nil || text(res) != "Deployed api@2 to production." {
				t.Fatalf("Wait = %q, %v", text(res), err)
			}
			if n := el.count(tk.ID); n != 1 {
				t.Fatalf("Elicit called %d times, want once", n)
			}
			if n := s.count(wire.MethodTasksGet); n > tc.maxGets {
				t.Fatalf("%d tasks/get with push, want at most %d", n, tc.maxGets)
			}
		})
	}
}

// TestWaitPushGarbageNotifications: a listen stream that agrees the task
// but sends junk for it (an unknown status, another task, no JSON) and
// ends is ignored: the wait polls and returns the result.
func TestWaitPushGarbageNotifications(t *testing.T) {
	var listens atomic.Int64
	junk := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if !taskListen(r) {
				h.ServeHTTP(rw, r)
				return
			}
			listens.Add(1)
			var req struct {
				Params struct {
					Notifications struct {
						TaskIDs []string `json:"taskIds"`
					} `json:"notifications"`
				} `json:"params"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Params.Notifications.TaskIDs) != 1 {
				http.Error(rw, "bad listen", http.StatusBadRequest)
				return
			}
			id := req.Params.Notifications.TaskIDs[0]
			rw.Header().Set("Content-Type", "text/event-stream")
			for _, m := range []string{
				fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"taskIds":[%q]}}}`, id),
				fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":%q,"status":"exploded"}}`, id),
				`{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"someoneelse","status":"completed","result":{"content":[]}}}`,
				`<<garbage>>`,
			} {
				fmt.Fprintf(rw, "data: %s\n\n", m)
			}
		})
	}
	s := newServer(t, serverOpts{wrap: junk})
	c := dial(t, s.URL, &client.Options{ProtocolVersion: client.Wire20260728})
	out, seen := stepThrough(t, s, c, "junk", nil)
	checkDone(t, out, "junk", seen)
	if listens.Load() == 0 || s.count(wire.MethodTasksGet) == 0 {
		t.Fatalf("%d listens, %d tasks/get: want the junk stream tried, then polls", listens.Load(), s.count(wire.MethodTasksGet))
	}
	if n := listens.Load(); n > 3 {
		t.Fatalf("%d listens: want at most 3 for one wait", n)
	}
}
