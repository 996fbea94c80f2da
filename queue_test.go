package mcptask_test

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/pgtest"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/postgres"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tracker records the runs of a capped tool across every server of a
// test: which labels run now, the most that ever ran at once, and the
// order in which they started. A run waits for its gate.
type tracker struct {
	g       gates
	mu      sync.Mutex
	running map[string]bool
	most    int
	order   []string
	changed chan struct{} // closed and replaced at each start and end
}

func newTracker() *tracker {
	return &tracker{running: map[string]bool{}, changed: make(chan struct{})}
}

func (k *tracker) signalLocked() {
	close(k.changed)
	k.changed = make(chan struct{})
}

func (k *tracker) run(ctx context.Context, _ *mcp.CallToolRequest, in sleepArgs) (*mcp.CallToolResult, any, error) {
	k.mu.Lock()
	k.running[in.Label] = true
	k.most = max(k.most, len(k.running))
	k.order = append(k.order, in.Label)
	k.signalLocked()
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		delete(k.running, in.Label)
		k.signalLocked()
		k.mu.Unlock()
	}()
	select {
	case <-k.g.get(in.Label):
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	return text("done " + in.Label), nil, nil
}

// waitRunning waits until exactly the labels want run.
func (k *tracker) waitRunning(t *testing.T, ctx context.Context, want []string) {
	t.Helper()
	for {
		k.mu.Lock()
		got := make([]string, 0, len(k.running))
		for l := range k.running {
			got = append(got, l)
		}
		ch := k.changed
		k.mu.Unlock()
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("running %v, want %v", got, want)
		}
	}
}

// queueServer serves the capped tool "capped" (a cap of max) on st, over
// loopback HTTP.
func queueServer(t *testing.T, st store.Store, exclusive bool, k *tracker, max int) string {
	t.Helper()
	url, _ := queueServerStop(t, st, exclusive, k, max)
	return url
}

// queueServerStop is queueServer that also returns a function that
// stops the server (its work gets a moment to return) and closes st.
func queueServerStop(t *testing.T, st store.Store, exclusive bool, k *tracker, max int) (string, func()) {
	return queueServerLane(t, st, exclusive, k, max, false)
}

// queueServerLane is queueServerStop with the fast lane on when lane is
// set (a task that waited in its queue then runs its tool directly, see
// adapter.Config.Direct).
func queueServerLane(t *testing.T, st store.Store, exclusive bool, k *tracker, max int, lane bool) (string, func()) {
	t.Helper()
	s := servertest.Start(t, servertest.Options{
		Store:  st,
		Engine: engine.Options{Exclusive: exclusive},
		Tasks:  mcptask.Options{FastLane: lane},
		HTTP:   &mcp.StreamableHTTPOptions{Stateless: true},
		Register: func(ts *mcptask.Server) (func(), error) {
			mcptask.AddTool(ts, &mcp.Tool{Name: "capped"}, k.run, mcptask.ToolOptions{Support: mcptask.Optional, MaxConcurrent: max})
			return nil, nil
		},
	})
	return s.URL, s.Stop
}

// runQueueScenario makes 50 racing task calls of the capped tool (cap 3)
// spread over the servers at urls, then releases the running tasks one at
// a time: exactly 3 run at any moment, the waiting ones say how many are
// ahead of them, and they start in creation order.
func runQueueScenario(t *testing.T, k *tracker, urls []string) {
	const n, capN = 50, 3
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 100, MaxIdleConnsPerHost: 100}}
	cs := make([]*wiretest.Client, len(urls))
	for i, u := range urls {
		cs[i] = &wiretest.Client{URL: u, Tasks: true, HTTP: hc}
	}
	type created struct {
		label, id, at string
		c             *wiretest.Client
	}
	all := make([]created, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			c := cs[i%len(cs)]
			label := fmt.Sprintf("q%02d", i)
			h, err := c.CallTool(ctx, "capped", map[string]any{"millis": -1, "label": label})
			if err != nil || h.TaskID == "" || h.Status != "working" {
				t.Errorf("task call %s: %+v, %v", label, h, err)
				return
			}
			all[i] = created{label: label, id: h.TaskID, at: h.CreatedAt, c: c}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// The store's order: creation time (ms), then ID.
	slices.SortFunc(all, func(a, b created) int { return cmp.Or(strings.Compare(a.at, b.at), strings.Compare(a.id, b.id)) })

	// Which 3 run is the race's business (a task created a little later
	// may have been inserted first); from then on, the waiting tasks start
	// oldest first, one per freed slot.
	var running []string
	deadline := time.Now().Add(time.Minute)
	for len(running) < capN {
		k.mu.Lock()
		running = running[:0]
		for l := range k.running {
			running = append(running, l)
		}
		ch := k.changed
		k.mu.Unlock()
		if len(running) >= capN {
			break
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("only %v run after 50 task calls with a cap of %d", running, capN)
		}
	}
	slices.Sort(running)
	var waiting []created
	for _, c := range all {
		if !slices.Contains(running, c.label) {
			waiting = append(waiting, c)
		}
	}
	// Each waiting task says it is queued.
	for _, w := range waiting[:5] {
		got, err := w.c.Get(ctx, w.id)
		if err != nil || got.Status != "working" || !strings.HasPrefix(got.StatusMessage, "queued") {
			t.Errorf("waiting task %s: %+v, %v; want working, \"queued: …\"", w.label, got, err)
		}
	}
	for len(running) > 0 {
		done := running[0]
		close(k.g.get(done))
		running = running[1:]
		if len(waiting) > 0 {
			running = append(running, waiting[0].label)
			waiting = waiting[1:]
		}
		want := slices.Sorted(slices.Values(running))
		k.waitRunning(t, ctx, want)
	}
	for _, c := range all {
		got, err := c.c.WaitFor(ctx, c.id, wiretest.Terminal)
		if err != nil || got.Status != "completed" {
			t.Errorf("task %s: %+v, %v", c.label, got, err)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.most != capN || len(k.order) != n {
		t.Errorf("at most %d ran at once (want %d), %d runs (want %d)", k.most, capN, len(k.order), n)
	}
}

// TestQueueSQLite: a tool with a cap of 3 on SQLite under 50 racing task
// calls: every call is answered at once with a working task, 3 run, the
// others wait (status "queued: N ahead") and start in creation order as
// slots free.
func TestQueueSQLite(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	k := newTracker()
	runQueueScenario(t, k, []string{queueServer(t, st, true, k, 3)})
}

// TestQueuePostgresTwoInstances: the same over two servers sharing one
// PostgreSQL schema: the cap holds across both, and the waiting tasks
// start in creation order on whichever instance frees a slot or sees it
// first.
func TestQueuePostgresTwoInstances(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn, "queue_test_")
	k := newTracker()
	var urls []string
	for range 2 {
		st, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, queueServer(t, st, false, k, 3))
	}
	runQueueScenario(t, k, urls)
}

// TestQueueSurvivesRestart: tasks waiting in a queue when the server
// stops start, in order, once it runs again on the same file; with the
// fast lane too, where their tool is called directly (no in-memory
// session).
func TestQueueSurvivesRestart(t *testing.T) {
	for _, lane := range []bool{false, true} {
		t.Run(fmt.Sprintf("lane=%v", lane), func(t *testing.T) { testQueueSurvivesRestart(t, lane) })
	}
}

func testQueueSurvivesRestart(t *testing.T, lane bool) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	open := func() store.Store {
		st, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	k := newTracker()
	url, stop := queueServerLane(t, open(), true, k, 1, lane)
	c := &wiretest.Client{URL: url, Tasks: true}
	var ids []string
	for i := range 3 {
		h, err := c.CallTool(ctx, "capped", map[string]any{"millis": -1, "label": fmt.Sprintf("r%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, h.TaskID)
		if i == 0 {
			k.waitRunning(t, ctx, []string{"r0"})
		}
		// A queue's order is its tasks' creation times, in milliseconds
		// (then their IDs): the next one is created in a later one.
		for ms := time.Now().UnixMilli(); time.Now().UnixMilli() == ms; {
			runtime.Gosched()
		}
	}
	if got, _ := c.Get(ctx, ids[2]); got.StatusMessage != "queued: 1 ahead" {
		t.Errorf("third task: %q, want \"queued: 1 ahead\"", got.StatusMessage)
	}
	// A stop cuts the running task short (its tool is not declared safe
	// to re-run: it fails); the waiting ones stay waiting.
	stop()
	url2, _ := queueServerLane(t, open(), true, k, 1, lane)
	c2 := &wiretest.Client{URL: url2, Tasks: true}
	if got, err := c2.Get(ctx, ids[0]); err != nil || got.Status != "failed" {
		t.Errorf("the task cut short by the stop: %+v, %v; want failed", got, err)
	}
	k.waitRunning(t, ctx, []string{"r1"})
	if got, _ := c2.Get(ctx, ids[2]); got.StatusMessage != "queued: next to start" {
		t.Errorf("third task after the restart: %q, want \"queued: next to start\"", got.StatusMessage)
	}
	close(k.g.get("r1"))
	k.waitRunning(t, ctx, []string{"r2"})
	close(k.g.get("r2"))
	for _, id := range ids[1:] {
		got, err := c2.WaitFor(ctx, id, wiretest.Terminal)
		if err != nil || got.Status != "completed" {
			t.Errorf("task %s after the restart: %+v, %v", id, got, err)
		}
	}
}

// TestDrainHoldsQueue: while the drain switch refuses new tasks of a
// capped tool, its waiting tasks do not start either (they keep their
// place); once the switch is lifted they start. A queue of a tool that is
// not drained keeps going meanwhile, which is also how the test knows the
// held queue was looked at.
func TestDrainHoldsQueue(t *testing.T) {
	k := newTracker()
	srv := servertest.Start(t, servertest.Options{
		HTTP: &mcp.StreamableHTTPOptions{Stateless: true},
		Register: func(ts *mcptask.Server) (func(), error) {
			for _, name := range []string{"deploy", "report"} {
				mcptask.AddTool(ts, &mcp.Tool{Name: name}, k.run, mcptask.ToolOptions{Support: mcptask.Optional, MaxConcurrent: 1})
			}
			return nil, nil
		},
	})
	ts, hs := srv.Tasks, srv
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := &wiretest.Client{URL: hs.URL, Tasks: true}
	call := func(tool, label string) string {
		h, err := c.CallTool(ctx, tool, map[string]any{"millis": -1, "label": label})
		if err != nil {
			t.Fatal(err)
		}
		return h.TaskID
	}
	d0 := call("deploy", "d0")
	r0 := call("report", "r0")
	k.waitRunning(t, ctx, []string{"d0", "r0"})
	d1, r1 := call("deploy", "d1"), call("report", "r1")
	if err := ts.SetDrain(ctx, mcptask.DrainState{Tools: []string{"deploy"}}, "test", ""); err != nil {
		t.Fatal(err)
	}
	close(k.g.get("d0"))
	if got, err := c.WaitFor(ctx, d0, wiretest.Terminal); err != nil || got.Status != "completed" {
		t.Fatalf("d0: %+v, %v", got, err)
	}
	// The report queue's next task starts in a round that came after d0
	// ended, and that round held the deploy queue.
	close(k.g.get("r0"))
	k.waitRunning(t, ctx, []string{"r1"})
	if got, err := c.Get(ctx, d1); err != nil || got.Status != "working" || !strings.HasPrefix(got.StatusMessage, "queued") {
		t.Errorf("waiting task of a drained tool: %+v, %v; want it still queued", got, err)
	}
	if err := ts.SetDrain(ctx, mcptask.DrainState{}, "test", ""); err != nil {
		t.Fatal(err)
	}
	k.waitRunning(t, ctx, []string{"d1", "r1"})
	close(k.g.get("d1"))
	close(k.g.get("r1"))
	for _, id := range []string{r0, d1, r1} {
		if got, err := c.WaitFor(ctx, id, wiretest.Terminal); err != nil || got.Status != "completed" {
			t.Errorf("task %s: %+v, %v", id, got, err)
		}
	}
}
