package gateway_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/upstreamtest"
	"github.com/mcptask/mcptask/source/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestObserveUpstreamTask (issue 31, shadow mode): a tool exported with
// Observe watches a task the upstream already runs, by its taskId, and
// projects it (status message, outcome, result) without ever calling the
// upstream tool: the upstream sees no tools/call of ours and no second
// run; a cancel of ours stops the watch and sends no tasks/cancel
// upstream; a call without taskId is refused and sends nothing.
func TestObserveUpstreamTask(t *testing.T) {
	up := upstreamtest.New(t)
	ctx := t.Context()
	// The existing system starts its work itself.
	direct, err := client.Dial(ctx, up.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	work, err := direct.CallTool(ctx, "work", map[string]any{"label": "nightly"})
	if err != nil || work.Task == nil {
		t.Fatalf("the upstream's own task: %+v %v", work, err)
	}
	block, err := direct.CallTool(ctx, "block", map[string]any{})
	if err != nil || block.Task == nil {
		t.Fatalf("the upstream's own block task: %+v %v", block, err)
	}
	calls := len(up.Traceparents("tools/call"))

	db := filepath.Join(t.TempDir(), "gw.db")
	url, _ := gatewayOn(t, db, gateway.Upstream{Name: "up", URL: up.URL, Policies: map[string]gateway.ToolPolicy{
		"work":  {Observe: true},
		"block": {Observe: true},
	}})
	c, err := client.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		schema, _ := json.Marshal(tl.InputSchema)
		if tl.Name == "work" && (!strings.Contains(string(schema), `"required":["taskId"]`) || tl.TaskSupport != "required") {
			t.Errorf("the shadow tool: %s, task support %q; want taskId required, tasks only", tl.InputSchema, tl.TaskSupport)
		}
	}
	if bad, err := c.CallTool(ctx, "work", map[string]any{"label": "x"}); err == nil && (bad.Task != nil || bad.Result == nil || !bad.Result.IsError) {
		t.Errorf("a shadow call without taskId: %+v; want refused", bad)
	}

	shadow, err := c.CallTool(ctx, "work", map[string]any{"taskId": work.Task.ID})
	if err != nil || shadow.Task == nil {
		t.Fatalf("the shadow call: %+v %v", shadow, err)
	}
	waitStatus(t, c, shadow.Task.ID, "watching", func(st *client.TaskStatus) bool {
		return strings.Contains(st.StatusMessage, "watching the task "+work.Task.ID)
	})
	up.Release()
	res, err := c.Wait(ctx, shadow.Task.ID, nil)
	if err != nil || text(res) != "nightly done, run 1" {
		t.Fatalf("the shadow's outcome: %q %v", text(res), err)
	}
	if theirs, err := direct.Wait(ctx, work.Task.ID, nil); err != nil || text(theirs) != text(res) {
		t.Fatalf("the upstream's own outcome: %q %v; want the projection's", text(theirs), err)
	}

	watch, err := c.CallTool(ctx, "block", map[string]any{"taskId": block.Task.ID})
	if err != nil || watch.Task == nil {
		t.Fatalf("the shadow of block: %+v %v", watch, err)
	}
	waitStatus(t, c, watch.Task.ID, "watching", func(st *client.TaskStatus) bool { return strings.Contains(st.StatusMessage, "watching") })
	if _, err := c.Cancel(ctx, watch.Task.ID); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, watch.Task.ID, "cancelled", func(st *client.TaskStatus) bool { return st.Status == "cancelled" })
	if st, err := direct.Get(ctx, block.Task.ID); err != nil || st.Status != "working" {
		t.Fatalf("the upstream's block task after our cancel: %+v %v; want it still working", st, err)
	}
	if n := len(up.Traceparents("tools/call")); n != calls {
		t.Fatalf("the upstream got %d tools/call from the gateway; want none", n-calls)
	}
	if n := len(up.Traceparents("tasks/cancel")); n != 0 {
		t.Fatalf("the upstream got %d tasks/cancel; want none", n)
	}
	if n := up.Runs.Load(); n != 1 {
		t.Fatalf("the upstream's work ran %d times; want 1 (its own)", n)
	}
}

// TestObserveLateUpstream: a shadow tool of an upstream that was down at
// the start is not exported when the upstream comes up (its other tools
// are, as plain calls until the next start): exported as a plain call it
// would call the upstream tool.
func TestObserveLateUpstream(t *testing.T) {
	up := upstreamtest.New(t)
	var upNow atomic.Bool
	target, _ := url.Parse(up.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !upNow.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		front.CloseClientConnections()
		front.Close()
	})
	logs := &lockedLog{}
	var mu sync.Mutex
	var added []string
	servertest.Start(t, servertest.Options{Register: func(ts *mcptask.Server) (func(), error) {
		gw := gateway.New([]gateway.Upstream{{Name: "up", URL: front.URL, Policies: map[string]gateway.ToolPolicy{"work": {Observe: true}}}},
			slog.New(slog.NewTextHandler(logs, nil)), &gateway.Options{AddTool: func(tl *mcp.Tool, _ mcp.ToolHandler) {
				mu.Lock()
				added = append(added, tl.Name)
				mu.Unlock()
			}})
		if err := gw.Register(t.Context(), ts); err != nil {
			return nil, err
		}
		return func() { _ = gw.Close() }, nil
	}})
	upNow.Store(true)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(logs.String(), "is not exported until the next start") {
		if time.Now().After(deadline) {
			t.Fatalf("the shadow tool's late export was never decided; the gateway's log:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond) // polling the log, not timing the test
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(added, "work") || !slices.Contains(added, "block") {
		t.Fatalf("tools added late: %v; want the others but not the shadow tool", added)
	}
}

// lockedLog is a log sink for a gateway's records.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
