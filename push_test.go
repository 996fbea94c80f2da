package mcptask_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/pgtest"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/postgres"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// methodCounter counts the requests per Mcp-Method header (both wires'
// clients here set it) and per JSON-RPC method of 2025-11-25 sessions.
type methodCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *methodCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m := r.Header.Get("Mcp-Method"); m != "" {
			c.mu.Lock()
			if c.n == nil {
				c.n = map[string]int{}
			}
			c.n[m]++
			c.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (c *methodCounter) count(m string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[m]
}

// userOwner makes the X-User header the requester, for tests with two
// principals.
func userOwner(_ context.Context, req mcp.Request) task.Owner {
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		if u := ex.Header.Get("X-User"); u != "" {
			return task.TokenOwner(u)
		}
	}
	return task.AnonymousOwner("")
}

type pushServer struct {
	*servertest.Server
	steps   *servertest.Stepper
	methods *methodCounter
}

func startPush(t *testing.T, st store.Store, n mcptask.Notifications) *pushServer {
	t.Helper()
	return startPushWith(t, st, n, &servertest.Stepper{})
}

// startPushWith starts a server whose tools steps (and steps_rerun,
// Rerunnable) move as steps allows.
func startPushWith(t *testing.T, st store.Store, n mcptask.Notifications, steps *servertest.Stepper) *pushServer {
	t.Helper()
	p := &pushServer{steps: steps, methods: &methodCounter{}}
	p.Server = servertest.Start(t, servertest.Options{
		Store: st,
		Tasks: mcptask.Options{Owner: userOwner, Notifications: n},
		Wrap:  p.methods.wrap,
		Register: func(ts *mcptask.Server) (func(), error) {
			mcptask.AddTool(ts, &mcp.Tool{Name: "steps"}, p.steps.Run, mcptask.ToolOptions{Support: mcptask.Optional})
			mcptask.AddTool(ts, &mcp.Tool{Name: "steps_rerun"}, p.steps.Run, mcptask.ToolOptions{Support: mcptask.Optional, Rerunnable: true})
			return nil, nil
		},
	})
	return p
}

func user(u string) http.Header { return http.Header{"X-User": {u}} }

// next returns the next message of a stream, failing the test when none
// comes.
func next(t *testing.T, ctx context.Context, msgs <-chan wiretest.Message) wiretest.Message {
	t.Helper()
	select {
	case m, ok := <-msgs:
		if !ok {
			t.Fatal("the stream ended")
		}
		return m
	case <-ctx.Done():
		t.Fatal("no message on the stream")
	}
	return wiretest.Message{}
}

type taskNote struct {
	TaskID        string          `json:"taskId"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"statusMessage"`
	Result        json.RawMessage `json:"result"`
	Meta          map[string]any  `json:"_meta"`
}

// TestListenTaskNotifications: a 2026-07-28 client that opened a
// subscriptions/listen stream for its task learns every change of it
// (status message steps, then completed with the result) without a single
// tasks/get; the acknowledgement agrees only its own task (not an unknown
// ID, not another requester's task), and the stream ends with the
// listen's result once the task has ended.
func TestListenTaskNotifications(t *testing.T) {
	p := startPush(t, nil, mcptask.Notifications{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	alice := &wiretest.Client{URL: p.URL, Tasks: true, Header: user("alice")}
	mallory := &wiretest.Client{URL: p.URL, Tasks: true, Header: user("mallory")}

	tk, err := alice.CallTool(ctx, "steps", map[string]any{"label": "a", "steps": 2})
	if err != nil || tk.ResultType != "task" {
		t.Fatalf("tools/call = %+v, %v", tk, err)
	}
	other, err := mallory.CallTool(ctx, "steps", map[string]any{"label": "m", "steps": 0})
	if err != nil {
		t.Fatal(err)
	}
	unknown := string(task.NewID())
	s, err := alice.Listen(ctx, map[string]any{"taskIds": []string{tk.TaskID, other.TaskID, unknown, tk.TaskID}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ack := next(t, ctx, s.Messages)
	if ack.Method != wire.MethodSubscriptionsAcknowledged {
		t.Fatalf("first message = %+v, want the acknowledgement", ack)
	}
	var ap struct {
		Notifications struct {
			TaskIDs []string `json:"taskIds"`
		} `json:"notifications"`
		Meta map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(ack.Params, &ap); err != nil {
		t.Fatal(err)
	}
	if len(ap.Notifications.TaskIDs) != 1 || ap.Notifications.TaskIDs[0] != tk.TaskID {
		t.Fatalf("agreed task IDs = %v, want only %s (not another requester's, not an unknown one)", ap.Notifications.TaskIDs, tk.TaskID)
	}
	wantSub := fmt.Sprint(s.ID)
	note := func(wantStatus, wantMessage string) taskNote {
		t.Helper()
		m := next(t, ctx, s.Messages)
		var n taskNote
		if m.Method != wire.MethodTasks || json.Unmarshal(m.Params, &n) != nil {
			t.Fatalf("message = %s %s, want %s", m.Method, m.Params, wire.MethodTasks)
		}
		if n.TaskID != tk.TaskID || n.Status != wantStatus || n.StatusMessage != wantMessage {
			t.Fatalf("notification = %+v, want %s %q", n, wantStatus, wantMessage)
		}
		if got := fmt.Sprint(n.Meta[wire.MetaSubscriptionID]); got != wantSub {
			t.Fatalf("notification subscription ID = %v, want %s", n.Meta[wire.MetaSubscriptionID], wantSub)
		}
		return n
	}
	note("working", "")
	p.steps.Step("a")
	note("working", "step 1")
	p.steps.Step("a")
	note("working", "step 2")
	p.steps.Step("a")
	done := note("completed", "step 2")
	if !json.Valid(done.Result) || len(done.Result) < 10 {
		t.Fatalf("completed notification lacks the result: %s", done.Result)
	}
	// The result is a 2026-07-28 CallToolResult, resultType included, as
	// tasks/get inlines it (ext-tasks validates both).
	if err := wiretest.CheckCallToolResult(done.Result); err != nil {
		t.Errorf("the completed notification's result: %v", err)
	}
	end := next(t, ctx, s.Messages)
	if string(end.ID) != wantSub || end.Result == nil {
		t.Fatalf("last message = %+v, want the listen's result", end)
	}
	if n := p.methods.count(wire.MethodTasksGet); n != 0 {
		t.Fatalf("%d tasks/get requests; the client learned everything from the stream", n)
	}
	p.steps.Step("m")
}

// TestListenRefusals: without the extension declared the listen is
// refused with -32021; a bad taskIds with -32602; beyond the per-requester
// stream cap with the limit error; a listen without taskIds stays the
// go-sdk's.
func TestListenRefusals(t *testing.T) {
	p := startPush(t, nil, mcptask.Notifications{MaxStreams: 1})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	plain := &wiretest.Client{URL: p.URL, Header: user("alice")}
	s, err := plain.Listen(ctx, map[string]any{"taskIds": []string{string(task.NewID())}})
	if err != nil {
		t.Fatal(err)
	}
	if m := next(t, ctx, s.Messages); m.Error == nil || m.Error.Code != mcp.CodeMissingRequiredClientCapabilities || s.HTTPStatus != http.StatusBadRequest {
		t.Fatalf("listen without the extension = HTTP %d %+v, want 400 and -32021", s.HTTPStatus, m)
	}
	alice := &wiretest.Client{URL: p.URL, Tasks: true, Header: user("alice")}
	s, err = alice.Listen(ctx, map[string]any{"taskIds": "nope"})
	if err != nil {
		t.Fatal(err)
	}
	if m := next(t, ctx, s.Messages); m.Error == nil || m.Error.Code != -32602 {
		t.Fatalf("listen with a bad taskIds = %+v, want -32602", m)
	}

	tk, err := alice.CallTool(ctx, "steps", map[string]any{"label": "a", "steps": 0})
	if err != nil {
		t.Fatal(err)
	}
	first, err := alice.Listen(ctx, map[string]any{"taskIds": []string{tk.TaskID}})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if m := next(t, ctx, first.Messages); m.Method != wire.MethodSubscriptionsAcknowledged {
		t.Fatalf("first listen: %+v", m)
	}
	second, err := alice.Listen(ctx, map[string]any{"taskIds": []string{tk.TaskID}})
	if err != nil {
		t.Fatal(err)
	}
	if m := next(t, ctx, second.Messages); m.Error == nil || m.Error.Code != wire.CodeLimitExceeded {
		t.Fatalf("a second stream beyond the cap of 1 = %+v, want the limit error", m)
	}
	// Another requester is not affected by alice's streams.
	bob := &wiretest.Client{URL: p.URL, Tasks: true, Header: user("bob")}
	third, err := bob.Listen(ctx, map[string]any{"taskIds": []string{tk.TaskID}})
	if err != nil {
		t.Fatal(err)
	}
	m := next(t, ctx, third.Messages)
	if m.Method != wire.MethodSubscriptionsAcknowledged || !jsonHas(m.Params, `"taskIds":[]`) {
		t.Fatalf("bob's listen for alice's task = %s %s, want an acknowledgement agreeing no task", m.Method, m.Params)
	}
	if end := next(t, ctx, third.Messages); end.Result == nil {
		t.Fatalf("bob's listen with nothing agreed ends at once with its result; got %+v", end)
	}
	p.steps.Step("a")
}

func jsonHas(raw json.RawMessage, s string) bool {
	return json.Valid(raw) && strings.Contains(string(raw), s)
}

// Test2025StatusOverHTTP: a 2025-11-25 session over Streamable HTTP gets
// notifications/tasks/status (without the related-task _meta) for each status
// change of the task it created, on its standalone GET stream, without
// polling.
func Test2025StatusOverHTTP(t *testing.T) {
	p := startPush(t, nil, mcptask.Notifications{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := &wiretest.Session{URL: p.URL, Header: user("alice")}
	if _, err := s.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	status, msgs, err := s.Stream(ctx)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET stream: %d, %v", status, err)
	}
	raw, err := s.Call(ctx, "tools/call", map[string]any{"name": "steps", "arguments": map[string]any{"label": "h", "steps": 1}, "task": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Task struct{ TaskID, Status string } `json:"task"`
	}
	if err := json.Unmarshal(raw, &created); err != nil || created.Task.TaskID == "" {
		t.Fatalf("tools/call = %s, %v", raw, err)
	}
	id := created.Task.TaskID
	note := func(wantStatus, wantMessage string) {
		t.Helper()
		for {
			m := next(t, ctx, msgs)
			if m.Method != wire.MethodTaskStatus {
				continue // the go-sdk's own (e.g. a ping)
			}
			var n taskNote
			if err := json.Unmarshal(m.Params, &n); err != nil {
				t.Fatal(err)
			}
			// "SHOULD NOT include the io.modelcontextprotocol/related-task
			// metadata, as the task ID is already present" (2025-11-25).
			_, rel := n.Meta["io.modelcontextprotocol/related-task"]
			if n.TaskID != id || n.Status != wantStatus || n.StatusMessage != wantMessage || rel {
				t.Fatalf("status notification = %s, want %s %q without the related-task _meta", m.Params, wantStatus, wantMessage)
			}
			return
		}
	}
	// The stream may have opened after the first step was taken, so each
	// step waits for its notification.
	p.steps.Step("h")
	note("working", "step 1")
	p.steps.Step("h")
	note("completed", "step 1")
	if n := p.methods.count(wire.MethodTasksGet); n != 0 {
		t.Fatalf("%d tasks/get requests", n)
	}
	// Another session cannot read this session's stream.
	mallory := &wiretest.Session{URL: p.URL, Header: user("mallory"), ID: s.ID}
	if st, _, err := mallory.Stream(ctx); err == nil && st == http.StatusOK {
		t.Fatalf("another principal opened the session's stream: HTTP %d", st)
	}
}

// TestPushKeepAlive: with KeepAlive set, a running task's status is sent
// again without a change.
func TestPushKeepAlive(t *testing.T) {
	p := startPush(t, nil, mcptask.Notifications{KeepAlive: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	alice := &wiretest.Client{URL: p.URL, Tasks: true, Header: user("alice")}
	tk, err := alice.CallTool(ctx, "steps", map[string]any{"label": "k", "steps": 0})
	if err != nil {
		t.Fatal(err)
	}
	s, err := alice.Listen(ctx, map[string]any{"taskIds": []string{tk.TaskID}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for working := 0; working < 3; {
		m := next(t, ctx, s.Messages)
		if m.Method == wire.MethodTasks && jsonHas(m.Params, `"status":"working"`) {
			working++
		}
	}
	p.steps.Step("k")
}

// TestListenAcrossInstancesPostgres: two instances share one PostgreSQL
// task space; a task runs on one, and a client's listen stream is held by
// the other: every change reaches the client through the change feed, with
// no tasks/get. A 2025-11-25 session on the other instance that read the
// task once gets its status notifications too.
func TestListenAcrossInstancesPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn, "push_test_")
	steps := &servertest.Stepper{}
	var servers [2]*pushServer
	for i := range servers {
		st, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		servers[i] = startPushWith(t, st, mcptask.Notifications{}, steps)
	}
	a, b := servers[0], servers[1]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	onA := &wiretest.Client{URL: a.URL, Tasks: true, Header: user("alice")}
	onB := &wiretest.Client{URL: b.URL, Tasks: true, Header: user("alice")}
	tk, err := onA.CallTool(ctx, "steps", map[string]any{"label": "x", "steps": 2})
	if err != nil {
		t.Fatal(err)
	}
	s, err := onB.Listen(ctx, map[string]any{"taskIds": []string{tk.TaskID}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if m := next(t, ctx, s.Messages); m.Method != wire.MethodSubscriptionsAcknowledged || !jsonHas(m.Params, tk.TaskID) {
		t.Fatalf("acknowledgement on the other instance = %s %s", m.Method, m.Params)
	}
	sess := &wiretest.Session{URL: b.URL, Header: user("alice")}
	if _, err := sess.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	_, msgs, err := sess.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Call(ctx, wire.MethodTasksGet, map[string]any{"taskId": tk.TaskID}); err != nil {
		t.Fatal(err)
	}
	want := func(status, message string) {
		t.Helper()
		for {
			var n taskNote
			m := next(t, ctx, s.Messages)
			if m.Method != wire.MethodTasks || json.Unmarshal(m.Params, &n) != nil {
				t.Fatalf("listen stream: %s %s", m.Method, m.Params)
			}
			if n.Status == status && n.StatusMessage == message {
				break
			}
			if n.Status != "working" || n.StatusMessage != "" {
				t.Fatalf("listen stream: %+v, want %s %q", n, status, message)
			}
		}
		for {
			var n taskNote
			m := next(t, ctx, msgs)
			if m.Method != wire.MethodTaskStatus || json.Unmarshal(m.Params, &n) != nil {
				continue
			}
			if n.Status == status && n.StatusMessage == message {
				return
			}
		}
	}
	steps.Step("x")
	want("working", "step 1")
	steps.Step("x")
	want("working", "step 2")
	steps.Step("x")
	want("completed", "step 2")
	if n := b.methods.count(wire.MethodTasksGet) + a.methods.count(wire.MethodTasksGet); n != 0 {
		t.Fatalf("%d tasks/get requests of 2026-07-28 clients", n)
	}
}

// TestListenEndsAtShutdownAndResumes: a listen stream is ended cleanly
// (with the listen's result) when the server shuts down, and a client that
// listens again on the restarted server gets the task's state and its
// later changes.
func TestListenEndsAtShutdownAndResumes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	open := func() store.Store {
		st, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	steps := &servertest.Stepper{}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	first := startPushWith(t, open(), mcptask.Notifications{}, steps)
	c := &wiretest.Client{URL: first.URL, Tasks: true, Header: user("alice")}
	tk, err := c.CallTool(ctx, "steps_rerun", map[string]any{"label": "r", "steps": 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Listen(ctx, map[string]any{"taskIds": []string{tk.TaskID}})
	if err != nil {
		t.Fatal(err)
	}
	if m := next(t, ctx, s.Messages); m.Method != wire.MethodSubscriptionsAcknowledged {
		t.Fatalf("first message %+v", m)
	}
	if m := next(t, ctx, s.Messages); m.Method != wire.MethodTasks {
		t.Fatalf("second message %+v", m)
	}
	closed := make(chan error, 1)
	go func() {
		cctx, stop := context.WithTimeout(context.Background(), 100*time.Millisecond) // the running task is stopped then
		defer stop()
		closed <- first.Tasks.Close(cctx)
	}()
	end := next(t, ctx, s.Messages)
	if end.Result == nil || fmt.Sprint(s.ID) != string(end.ID) {
		t.Fatalf("at shutdown the stream got %+v, want the listen's result", end)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	first.Stop()

	second := startPushWith(t, open(), mcptask.Notifications{}, steps)
	c.URL = second.URL
	s, err = c.Listen(ctx, map[string]any{"taskIds": []string{tk.TaskID}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if m := next(t, ctx, s.Messages); m.Method != wire.MethodSubscriptionsAcknowledged || !jsonHas(m.Params, tk.TaskID) {
		t.Fatalf("after the restart: %s %s", m.Method, m.Params)
	}
	// The rerunnable task runs again after the restart: its state, then
	// its step, are seen on the new stream.
	want := func(message string) {
		t.Helper()
		for {
			var n taskNote
			m := next(t, ctx, s.Messages)
			if m.Method != wire.MethodTasks || json.Unmarshal(m.Params, &n) != nil || n.Status != "working" {
				t.Fatalf("after the restart: %+v (result %s)", m, m.Result)
			}
			if message == "*" || n.StatusMessage == message {
				return
			}
		}
	}
	want("*") // its state at the listen (the recovery may have set a message)
	steps.Step("r")
	want("step 1")
	steps.Step("r")
	for {
		var n taskNote
		m := next(t, ctx, s.Messages)
		if m.Method == wire.MethodTasks && json.Unmarshal(m.Params, &n) == nil && n.Status == "completed" {
			break
		}
	}
}

// Test2025StatusOnResultStream: while a session's tasks/result waits for
// its task, the task's status notifications go on that request's stream
// (where they relate to a request of the client's), not only on the GET
// stream; the result ends the stream.
func Test2025StatusOnResultStream(t *testing.T) {
	// The keep-alive makes the wait for the stream's first notification
	// deterministic: it comes once the server holds the stream.
	p := startPush(t, nil, mcptask.Notifications{KeepAlive: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := &wiretest.Session{URL: p.URL, Header: user("alice")}
	if _, err := s.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := s.Call(ctx, "tools/call", map[string]any{"name": "steps", "arguments": map[string]any{"label": "rs", "steps": 1}, "task": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Task struct{ TaskID string } `json:"task"`
	}
	if err := json.Unmarshal(raw, &created); err != nil {
		t.Fatal(err)
	}
	msgs, err := s.CallStream(ctx, wire.MethodTasksResult, map[string]any{"taskId": created.Task.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	status := func(want string) {
		t.Helper()
		for {
			m := next(t, ctx, msgs)
			var n taskNote
			if m.Method != wire.MethodTaskStatus || json.Unmarshal(m.Params, &n) != nil || n.TaskID != created.Task.TaskID {
				t.Fatalf("on the tasks/result stream: %+v", m)
			}
			if n.StatusMessage == want {
				return
			}
		}
	}
	status("") // a keep-alive: the stream is held
	p.steps.Step("rs")
	status("step 1")
	p.steps.Step("rs")
	for {
		m := next(t, ctx, msgs)
		if m.Result != nil {
			if !jsonHas(m.Result, "done rs") {
				t.Fatalf("tasks/result = %s", m.Result)
			}
			return
		}
		if m.Method != wire.MethodTaskStatus {
			t.Fatalf("on the tasks/result stream: %+v", m)
		}
	}
}
