package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// jobUpstream is a plain MCP server (the go-sdk's, no tasks) on loopback
// HTTP in the test's process, whose tool "job" {label} waits until the
// test releases its label (or its call is cancelled) and answers "LABEL
// done". It records what an upstream behind a concurrency cap sees: the
// order of the calls, how often each label ran, and how many calls ran at
// once.
type jobUpstream struct {
	url string
	// orphan is the label of the call cut by the kill of the mcptaskd
	// that made it: the test releases it, but it may still run when
	// another instance starts the next task (mcptaskd cannot stop a call
	// its dead process made), so it is left out of the overlap count.
	orphan string

	mu       sync.Mutex
	order    []string // labels in the order their calls started
	runs     map[string]int
	active   map[string]int
	overlap  int // the most other calls (orphan aside) running when a call started
	releases map[string]chan struct{}
}

type jobArgs struct {
	Label string `json:"label"`
}

func newJobUpstream(t *testing.T, orphan string) *jobUpstream {
	t.Helper()
	u := &jobUpstream{orphan: orphan, runs: map[string]int{}, active: map[string]int{}, releases: map[string]chan struct{}{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "jobs", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "job", Description: "runs until the test releases it"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in jobArgs) (*mcp.CallToolResult, any, error) {
			u.mu.Lock()
			others := 0
			for l, n := range u.active {
				if l != u.orphan {
					others += n
				}
			}
			u.overlap = max(u.overlap, others)
			u.order = append(u.order, in.Label)
			u.runs[in.Label]++
			u.active[in.Label]++
			release := u.gate(in.Label)
			u.mu.Unlock()
			defer func() {
				u.mu.Lock()
				u.active[in.Label]--
				u.mu.Unlock()
			}()
			select {
			case <-release:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Label + " done"}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	u.url = hs.URL
	t.Cleanup(func() {
		u.mu.Lock()
		for l := range u.releases {
			u.releaseLocked(l)
		}
		u.mu.Unlock()
		hs.CloseClientConnections()
		hs.Close()
	})
	return u
}

// gate returns the channel that releases label; u.mu is held.
func (u *jobUpstream) gate(label string) chan struct{} {
	ch, ok := u.releases[label]
	if !ok {
		ch = make(chan struct{})
		u.releases[label] = ch
	}
	return ch
}

func (u *jobUpstream) releaseLocked(label string) {
	ch := u.gate(label)
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// release lets the calls of label finish.
func (u *jobUpstream) release(label string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.releaseLocked(label)
}

// snapshot returns the calls' order, the runs of each label, the calls
// running, and the overlap.
func (u *jobUpstream) snapshot() (order []string, runs map[string]int, active, overlap int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, n := range u.active {
		active += n
	}
	runs = map[string]int{}
	for l, n := range u.runs {
		runs[l] = n
	}
	return slices.Clone(u.order), runs, active, u.overlap
}

// waitStarted waits until the call of label started.
func (u *jobUpstream) waitStarted(t *testing.T, label string) {
	t.Helper()
	waitUntil(t, 60*time.Second, "the upstream call of "+label, func() (bool, error) {
		_, runs, _, _ := u.snapshot()
		return runs[label] > 0, nil
	})
}

// waitIdle waits until no call runs.
func (u *jobUpstream) waitIdle(t *testing.T) {
	t.Helper()
	waitUntil(t, 60*time.Second, "the upstream idle", func() (bool, error) {
		_, _, active, _ := u.snapshot()
		return active == 0, nil
	})
}

// queueConfig is a configuration whose only upstream is u, capped at one
// running task.
func queueConfig(t *testing.T, u *jobUpstream) string {
	return writeConfig(t, fmt.Sprintf("demo: false\nmcpServers:\n  jobs:\n    url: %q\n    maxConcurrent: 1\n", u.url+"/mcp"))
}

// checkQueued checks that the tasks ids wait, in that order ("queued:
// next to start", "queued: 1 ahead", ...).
func checkQueued(t *testing.T, c *wiretest.Client, ids ...string) {
	t.Helper()
	for i, id := range ids {
		want := "queued: next to start"
		if i > 0 {
			want = fmt.Sprintf("queued: %d ahead", i)
		}
		tk, err := c.Get(context.Background(), id)
		if err != nil || tk.Status != "working" || tk.StatusMessage != want {
			t.Errorf("waiting task %d: %+v, %v; want working, %q", i+1, tk, err, want)
		}
	}
}

// checkUnknown checks that the task id failed by the recovery policy of a
// tool not declared re-runnable.
func checkUnknown(t *testing.T, c *wiretest.Client, id string) {
	t.Helper()
	tk := waitTask(t, c, id, 60*time.Second, "resolved by its recovery policy", terminal)
	if tk.Status != "failed" || tk.Error == nil || !strings.Contains(tk.Error.Message, "outcome is unknown") {
		t.Errorf("the running task cut by the kill: %s %+v (%q); want failed, outcome unknown", tk.Status, tk.Error, tk.StatusMessage)
	}
}

// drain lets the waiting tasks ids (of the labels labels) run one by one:
// each starts only when the one before ended, the others still waiting,
// and completes with its upstream's result.
func drain(t *testing.T, c *wiretest.Client, u *jobUpstream, ids, labels []string) {
	t.Helper()
	for i, id := range ids {
		u.waitStarted(t, labels[i])
		_, runs, _, _ := u.snapshot()
		for _, l := range labels[i+1:] {
			if runs[l] != 0 {
				t.Errorf("%s started while %s, ahead of it, ran", l, labels[i])
			}
		}
		checkQueued(t, c, ids[i+1:]...)
		u.release(labels[i])
		tk := waitTask(t, c, id, 60*time.Second, "terminal", terminal)
		if r := resultOf(t, tk); r.text() != labels[i]+" done" {
			t.Errorf("task of %s: result %q", labels[i], r.text())
		}
	}
}

// checkRuns checks the upstream saw each label once, in order, never two
// calls of mcptaskd's live tasks at once.
func checkRuns(t *testing.T, u *jobUpstream, labels ...string) {
	t.Helper()
	order, runs, _, overlap := u.snapshot()
	if !slices.Equal(order, labels) {
		t.Errorf("the upstream calls ran in the order %v, want %v", order, labels)
	}
	for _, l := range labels {
		if runs[l] != 1 {
			t.Errorf("the upstream call of %s ran %d times, want once", l, runs[l])
		}
	}
	if overlap != 0 {
		t.Errorf("up to %d other calls ran when a call started: the cap of 1 was exceeded", overlap)
	}
}

// TestQueueKill9SQLite: an upstream capped at one running task, one task
// running and two waiting, mcptaskd killed with SIGKILL; restarted on the
// same SQLite file, it resolves the running task by its recovery policy
// (not re-runnable: failed, outcome unknown), and the waiting tasks, still
// waiting, start one by one in creation order and complete: none lost,
// none run twice, never two at once.
func TestQueueKill9SQLite(t *testing.T) {
	t.Parallel()
	up := newJobUpstream(t, "a")
	config := queueConfig(t, up)
	db := filepath.Join(t.TempDir(), "tasks.db")
	d := startDaemon(t, "first", db, "-config", config)
	c := d.client(true)
	running := startTask(t, c, "job", map[string]any{"label": "a"})
	up.waitStarted(t, "a")
	waiting := []string{startTask(t, c, "job", map[string]any{"label": "b"}), startTask(t, c, "job", map[string]any{"label": "c"})}
	checkQueued(t, c, waiting...)

	d.kill9()
	// The call the dead process made is not mcptaskd's to end any more.
	up.release("a")
	up.waitIdle(t)

	d = startDaemon(t, "restarted", db, "-config", config)
	c = d.client(true)
	checkUnknown(t, c, running)
	drain(t, c, up, waiting, []string{"b", "c"})
	checkRuns(t, up, "a", "b", "c")
	for _, id := range waiting {
		if !logged(d, "task started from its queue", id) {
			t.Errorf("the restarted mcptaskd did not start %s from its queue", id)
		}
	}
	if n := len(d.LogRecords("task re-run after restart")); n != 0 {
		t.Errorf("%d tasks were re-run after the restart, want none", n)
	}
}

// TestQueueKill9Postgres: the same on PostgreSQL with three instances:
// the task running under the cap on instance A, three waiting ones
// created through A, B and C; A killed with SIGKILL. After A's lease the
// survivors resolve its task by its recovery policy and drain the queue
// between them in creation order, never two at once across instances,
// each waiting task run once (those created through A rebuilt from their
// stored call).
func TestQueueKill9Postgres(t *testing.T) {
	t.Parallel()
	dsn := pgDSN(t)
	schema := pgSchema(t, dsn)
	up := newJobUpstream(t, "a")
	config := queueConfig(t, up)
	const lease = 2 * time.Second
	ds := startTogether(t, []string{"A", "B", "C"}, append(pgFlags(t, dsn, schema, lease), "-config", config)...)
	a, b, c := ds[0], ds[1], ds[2]
	ca, cb, cc := a.client(true), b.client(true), c.client(true)

	running := startTask(t, ca, "job", map[string]any{"label": "a"})
	up.waitStarted(t, "a")
	waiting := []string{
		startTask(t, cb, "job", map[string]any{"label": "b"}),
		startTask(t, cc, "job", map[string]any{"label": "c"}),
		startTask(t, ca, "job", map[string]any{"label": "d"}),
	}
	checkQueued(t, cb, waiting...)
	if logged(a, "task waits in its queue", running) || !logged(a, "task waits in its queue", waiting[2]) {
		t.Fatalf("the first task does not run on A, or the last one does not wait")
	}

	a.kill9()
	killed := time.Now()
	up.release("a")

	checkUnknown(t, cb, running)
	t.Logf("the survivors resolved A's running task %v after SIGKILL (lease %v)", time.Since(killed).Round(time.Millisecond), lease)
	drain(t, cc, up, waiting, []string{"b", "c", "d"})
	checkRuns(t, up, "a", "b", "c", "d")
	survivors := []*daemon{b, c}
	starts := taskRecords(survivors, "task started from its queue")
	for i, id := range waiting {
		if starts[id] != 1 {
			t.Errorf("waiting task %d started from its queue %d times by the survivors, want once", i+1, starts[id])
		}
		for _, d := range survivors {
			if logged(d, "task started from its queue", id) {
				t.Logf("waiting task %d started on %s", i+1, d.name)
			}
		}
	}
	if n := taskRecords(survivors, "task re-run after restart")[running]; n != 0 {
		t.Errorf("the task cut by the kill was re-run %d times, want none (its tool is not re-runnable)", n)
	}
}
