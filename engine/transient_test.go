package engine_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/faultproxy"
	"github.com/mcptask/mcptask/internal/testkit/pgtest"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/postgres"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// logBuffer collects an engine's log records for a test.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWorkRidesOutStoreOutage: PostgreSQL becomes unreachable for one
// engine (a TCP proxy in front of the real server cuts its connections
// and refuses new ones, as a restart does) while its task's work sets a
// status message and while it waits for the client's input. The work
// carries on once the database is back and the task completes; a short
// outage failed it ("asking for confirmation failed: ... connection
// refused").
func TestWorkRidesOutStoreOutage(t *testing.T) {
	dsn := os.Getenv("MCPTASK_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("PostgreSQL only: set MCPTASK_TEST_POSTGRES_DSN (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run it")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.NewTCP(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	viaProxy := *u
	viaProxy.Host = proxy.Addr

	schema := pgtest.Schema(t, dsn, "engine_outage_")
	ctx := t.Context()
	direct, err := postgres.Open(ctx, dsn, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	proxied, err := postgres.Open(ctx, viaProxy.String(), &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer proxied.Close()

	logs := &logBuffer{}
	a, err := engine.New(engine.Options{Store: proxied, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Lease: 20 * time.Second, InputPollInterval: 50 * time.Millisecond, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// A failure mid-outage must not leave the engine retrying its
		// writes through a proxy that stays down.
		proxy.SetDown(false)
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		a.Shutdown(sctx)
	}()
	// b answers for the client, on a connection the outage leaves alone.
	b, err := engine.New(engine.Options{Store: direct, Logger: slog.New(slog.DiscardHandler), Lease: 20 * time.Second, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown(context.Background())

	proceed := make(chan struct{})
	statusErr := make(chan error, 1)
	tk, err := a.Start(ctx, engine.StartSpec{Tool: "deploy"}, func(ctx context.Context) (json.RawMessage, error) {
		h := engine.FromContext(ctx)
		<-proceed
		statusErr <- h.SetStatusMessage(ctx, "building (during the outage)")
		answer, err := h.RequestInput(ctx, json.RawMessage(`{"method":"elicitation/create","params":{"message":"deploy?"}}`))
		if err != nil {
			return nil, err
		}
		return json.RawMessage(`{"content":[],"structuredContent":` + string(answer) + `}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// An outage while the work writes its status message.
	proxy.SetDown(true)
	close(proceed)
	waitFor(t, "the status write tried during the outage", func() bool { return proxy.Refused() >= 3 })
	proxy.SetDown(false)
	if err := <-statusErr; err != nil {
		t.Fatalf("SetStatusMessage across a short outage: %v", err)
	}
	waitFor(t, "input_required", func() bool {
		cur, err := direct.Get(ctx, tk.ID)
		return err == nil && cur.Status == task.InputRequired
	})
	cur, _ := direct.Get(ctx, tk.ID)
	if len(cur.InputRequests) != 1 {
		t.Fatalf("input requests after the retried writes: %v, want exactly one", cur.InputRequests)
	}

	// An outage while the work waits for its answer, which arrives
	// during it.
	proxy.SetDown(true)
	for key := range cur.InputRequests {
		if _, _, err := b.Respond(ctx, tk.Owner, tk.ID, map[string]json.RawMessage{key: json.RawMessage(`{"action":"accept"}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The outage lasts until the input wait itself met it: refused
	// connections of the change feed or the heartbeat are not enough (an
	// outage of a few milliseconds fell between two input polls).
	waitFor(t, "the input wait to meet the outage", func() bool { return strings.Contains(logs.String(), "still waiting") })
	proxy.SetDown(false)
	waitFor(t, "the task to end", func() bool {
		cur, err := direct.Get(ctx, tk.ID)
		return err == nil && cur.Status.Terminal()
	})
	cur, _ = direct.Get(ctx, tk.ID)
	if cur.Status != task.Completed {
		t.Fatalf("task %s after two short outages: %v\n%s", cur.Status, cur.Error, logs)
	}
	for _, want := range []string{"trying again within the lease", "still waiting", "task store reachable again"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the engine's log lacks %q: the outage was not ridden out where the test says\n%s", want, logs)
		}
	}
}

// TestOwnOutcomeIsNotEndedElsewhere: the change feed announces a task's
// own outcome to its engine; the engine does not take it for a task ended
// elsewhere (it logged "stopping work of a task ended elsewhere" after
// most completions, which misleads an operator reading the log).
func TestOwnOutcomeIsNotEndedElsewhere(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logs := &logBuffer{}
	e, err := engine.New(engine.Options{Store: st, Logger: slog.New(slog.NewTextHandler(logs, nil)), SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ids []task.ID
	for range 20 {
		tk, err := e.Start(t.Context(), engine.StartSpec{Tool: "quick"}, func(context.Context) (json.RawMessage, error) {
			return json.RawMessage(`{"content":[]}`), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tk.ID)
	}
	for _, id := range ids {
		waitFor(t, "the task to complete", func() bool {
			cur, err := st.Get(context.Background(), id)
			return err == nil && cur.Status == task.Completed
		})
	}
	if err := e.Shutdown(context.Background()); err != nil { // waits for the feed's checks
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "ended elsewhere") {
		t.Errorf("a task's own completion was logged as ended elsewhere:\n%s", logs)
	}
}

// TestExclusiveEngineResolvesItsOrphans: an exclusive (SQLite) engine
// holds a task with no work running for it (its outcome or re-run could
// not be recorded; made here by claiming the task for the engine before
// it starts). Once the task's lease lapses, the engine resolves it by the
// recovery policy instead of leaving it working until the next start.
func TestExclusiveEngineResolvesItsOrphans(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := engine.New(engine.Options{Store: st, Logger: slog.New(slog.DiscardHandler), Exclusive: true, SweepInterval: -1,
		Lease: 300 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, ClaimInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	now := time.Now()
	orphan := &task.Task{ID: task.NewID(), Owner: task.AnonymousOwner(""), Tool: "deploy", Status: task.Working,
		CreatedAt: now, LastUpdatedAt: now, TTL: time.Hour, PollInterval: time.Second, Attempts: 1}
	if err := st.Create(ctx, orphan, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Claim(ctx, store.ClaimRequest{Runner: e.InstanceID(), Now: now, Lease: 300 * time.Millisecond, IgnoreLeases: true}); err != nil || len(got) != 1 {
		t.Fatalf("claiming the orphan for the engine: %v, %v", got, err)
	}
	if err := e.Run(ctx); err != nil { // its start-up claim skips the tasks it holds
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	waitFor(t, "the orphaned task to be resolved", func() bool {
		cur, err := st.Get(ctx, orphan.ID)
		return err == nil && cur.Status.Terminal()
	})
	cur, _ := st.Get(ctx, orphan.ID)
	if cur.Status != task.Failed || cur.Error == nil || !strings.Contains(cur.Error.Message, "without its outcome being recorded") {
		t.Fatalf("orphan: %s %+v; want failed, saying its outcome was not recorded", cur.Status, cur.Error)
	}
}
