package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/upstreamtest"
	"github.com/mcptask/mcptask/source/gateway"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
	mcpwire "github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// gatewayOn is an mcptask server on the SQLite file db whose tools are the
// upstreams', served on loopback HTTP; stop shuts it down with the grace
// of ctx (an expired ctx stops the running work at once, as a restart
// does).
func gatewayOn(t *testing.T, db string, ups ...gateway.Upstream) (url string, stop func(ctx context.Context)) {
	t.Helper()
	s := servertest.Start(t, servertest.Options{
		DB:        db,
		Logger:    slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		Engine:    engine.Options{Policy: task.Policy{PollInterval: 20 * time.Millisecond}},
		StopGrace: 5 * time.Second,
		Register:  startGateway(t, ups),
	})
	return s.URL + "/mcp", s.Close
}

// startGateway is a servertest Register function that starts a gateway
// of ups on the server.
func startGateway(t testing.TB, ups []gateway.Upstream) func(*mcptask.Server) (func(), error) {
	return func(ts *mcptask.Server) (func(), error) {
		gw := gateway.New(ups, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})), nil)
		err := gw.Register(t.Context(), ts)
		if err != nil {
			return nil, err
		}
		return func() { _ = gw.Close() }, nil
	}
}

// waitStatus polls our task until cond holds.
func waitStatus(t *testing.T, c *client.Client, id string, what string, cond func(*client.TaskStatus) bool) *client.TaskStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.Get(t.Context(), id)
		if err == nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: never %s (last %+v, %v)", id, what, st, err)
		}
		time.Sleep(10 * time.Millisecond) // polling the task, not timing the test
	}
}

// TestTaskUpstream: an upstream that speaks tasks gets each call as a task
// of its own, on both of our wires: the upstream task's ID is recorded
// before our create is answered, its status message is ours, its input
// request is our task's (the answer goes back upstream), its log is
// relayed into ours, our cancel cancels it, and an upstream that forgot
// the task fails ours clearly.
func TestTaskUpstream(t *testing.T) {
	up := upstreamtest.New(t)
	for _, wire := range []string{client.Wire20260728, client.Wire20251125} {
		t.Run(wire, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "gw.db")
			url, _ := gatewayOn(t, db, gateway.Upstream{Name: "up", URL: up.URL})
			ctx := t.Context()
			c, err := client.Dial(ctx, url, &client.Options{ProtocolVersion: wire,
				Elicit: func(_ context.Context, _ string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes to " + p.Message}}, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()

			// The tool's task support is the upstream's.
			tools, err := c.Tools(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, tl := range tools {
				if tl.Name == "ask" && wire == client.Wire20251125 && tl.TaskSupport != "required" {
					t.Errorf("ask: task support %q, want required (the upstream's)", tl.TaskSupport)
				}
			}

			// Input relayed both ways.
			call, err := c.CallTool(ctx, "ask", map[string]any{"question": "deploy?"})
			if err != nil || call.Task == nil {
				t.Fatalf("ask: %+v, %v; want a task", call, err)
			}
			ref := externalRefOf(t, db, call.Task.ID)
			if !strings.Contains(ref, `"upstream":"up"`) || !strings.Contains(ref, `"taskId":"`) {
				t.Errorf("the external ref when the create was answered: %q; want the upstream task", ref)
			}
			res, err := c.Wait(ctx, call.Task.ID, nil)
			if err != nil || text(res) != "accept: yes to deploy?" {
				t.Fatalf("ask: %q, %v", text(res), err)
			}
			// The upstream task's log relayed into ours, streams kept.
			page, err := c.ReadLog(ctx, call.Task.ID, 0, 0)
			if err != nil || len(page.Lines) != 2 || page.Lines[0].Text != "asking: deploy?" || page.Lines[0].Stream != "log" ||
				page.Lines[1].Text != "answered: accept" || page.Lines[1].Stream != "stderr" {
				t.Errorf("our task's log: %+v, %v; want the upstream task's two lines", page, err)
			}
			// The upstream task on the ledger: its ID the receipt,
			// confirmed by its result.
			var upRef struct {
				TaskID string `json:"taskId"`
			}
			_ = json.Unmarshal([]byte(ref), &upRef)
			if op := operationOf(t, db, call.Task.ID); op == nil || op.Receipt != upRef.TaskID || op.State != task.OpConfirmed {
				t.Errorf("the ledger's operation of the upstream call: %+v; want confirmed with receipt %s", op, upRef.TaskID)
			}

			// Cancel relayed.
			call, err = c.CallTool(ctx, "block", map[string]any{})
			if err != nil || call.Task == nil {
				t.Fatalf("block: %+v, %v; want a task", call, err)
			}
			if _, err := c.Cancel(ctx, call.Task.ID); err != nil {
				t.Fatal(err)
			}
			select {
			case <-up.Cancelled():
			case <-time.After(30 * time.Second):
				t.Fatal("the upstream task was never cancelled")
			}
			up.ResetCancelled()

			// A cancel the upstream refuses: ours is refused too, and
			// our task goes on to the upstream's outcome. (An upstream
			// of its own: the first's work is released for good.)
			up2 := upstreamtest.New(t)
			url2, _ := gatewayOn(t, filepath.Join(t.TempDir(), "gw2.db"), gateway.Upstream{Name: "up", URL: up2.URL})
			c2, err := client.Dial(ctx, url2, &client.Options{ProtocolVersion: wire})
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			c = c2
			call, err = c.CallTool(ctx, "deploy", map[string]any{"label": "v2"})
			if err != nil || call.Task == nil {
				t.Fatalf("deploy: %+v, %v; want a task", call, err)
			}
			_, err = c.Cancel(ctx, call.Task.ID)
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != mcpwire.CodeCancelRefused || !strings.Contains(je.Message, "upstream up refused to cancel its task") ||
				!strings.Contains(je.Message, "a deploy cannot be stopped once started") {
				t.Fatalf("cancel of a task whose upstream refuses: %v; want code %d naming the upstream's reason", err, mcpwire.CodeCancelRefused)
			}
			if st, err := c.Get(ctx, call.Task.ID); err != nil || st.Terminal() {
				t.Fatalf("after the refused cancel: %+v, %v; want the task still running", st, err)
			}
			up2.Release()
			if res, err := c.Wait(ctx, call.Task.ID, nil); err != nil || text(res) != "v2 deployed" {
				t.Fatalf("deploy after the refused cancel: %q, %v", text(res), err)
			}
		})
	}
}

// operationOf reads a task's latest operation from the gateway's ledger
// (another connection on its SQLite file), nil if none.
func operationOf(t *testing.T, db, id string) *task.Operation {
	t.Helper()
	st, err := sqlite.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ops, _, err := st.Operations(t.Context(), store.OperationQuery{TaskID: task.ID(id)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) == 0 {
		return nil
	}
	return ops[0]
}

// externalRefOf reads a task's external reference from the gateway's
// SQLite file (another connection: the file is shared in WAL mode).
func externalRefOf(t *testing.T, db, id string) string {
	t.Helper()
	st, err := sqlite.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tk, err := st.Get(t.Context(), task.ID(id))
	if err != nil {
		t.Fatal(err)
	}
	return tk.ExternalRef
}

// TestReattach: the gateway stops (its running work cut short, as a
// restart does) while an upstream task runs; the next gateway on the same
// task file re-attaches to the upstream task instead of calling the tool
// again: the tool ran once, and our task ends with its result. An
// upstream that forgot the task (it restarted on an empty store) fails
// ours, saying so.
func TestReattach(t *testing.T) {
	up := upstreamtest.New(t)
	db := filepath.Join(t.TempDir(), "gw.db")
	ups := gateway.Upstream{Name: "up", URL: up.URL}
	url, stop := gatewayOn(t, db, ups)
	ctx := t.Context()
	c, err := client.Dial(ctx, url, &client.Options{ProtocolVersion: client.Wire20251125})
	if err != nil {
		t.Fatal(err)
	}
	call, err := c.CallTool(ctx, "work", map[string]any{"label": "build"})
	if err != nil || call.Task == nil {
		t.Fatalf("work: %+v, %v; want a task", call, err)
	}
	id := call.Task.ID
	waitStatus(t, c, id, "relaying the upstream's status", func(st *client.TaskStatus) bool {
		return st.StatusMessage == "upstream working on build"
	})
	c.Close()
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	stop(expired) // no grace: the work is stopped, the task handed back

	url, _ = gatewayOn(t, db, ups)
	c, err = client.Dial(ctx, url, &client.Options{ProtocolVersion: client.Wire20251125})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The status message says the task was re-attached, and keeps saying
	// so while it relays the upstream's.
	waitStatus(t, c, id, "re-attached", func(st *client.TaskStatus) bool {
		return strings.HasPrefix(st.StatusMessage, "re-attached to the task") && strings.HasSuffix(st.StatusMessage, " of upstream up: upstream working on build")
	})
	up.Release()
	res, err := c.Wait(ctx, id, nil)
	if err != nil || text(res) != "build done, run 1" {
		t.Fatalf("after re-attaching: %q, %v; want the first run's result", text(res), err)
	}
	if n := up.Runs.Load(); n != 1 {
		t.Errorf("the upstream tool ran %d times, want once", n)
	}

	// The upstream forgets its tasks: a task re-attached to it fails.
	call, err = c.CallTool(ctx, "block", map[string]any{})
	if err != nil || call.Task == nil {
		t.Fatalf("block: %+v, %v; want a task", call, err)
	}
	up.Restart(t)
	_, err = c.Wait(ctx, call.Task.ID, nil)
	var te *client.TaskError
	// The gateway asked in the session that created the task: the
	// restarted upstream no longer knows that session (404).
	if !errors.As(err, &te) || !strings.Contains(te.Message, "upstream up no longer knows its task") ||
		!strings.Contains(te.Message, "the session that created the task is gone: the upstream restarted") || !strings.Contains(te.Message, "the outcome of block is unknown") {
		t.Errorf("a task the upstream forgot: %v; want a failure saying the upstream no longer knows it (it restarted), and that the outcome is unknown", err)
	}
}

// TestLostUpstreamTaskRerunnable: when the upstream forgets the task of a
// tool declared rerunnable (it restarted on an empty store), the tool is
// called again instead of the task failing.
func TestLostUpstreamTaskRerunnable(t *testing.T) {
	up := upstreamtest.New(t)
	url, _ := gatewayOn(t, filepath.Join(t.TempDir(), "gw.db"), gateway.Upstream{Name: "up", URL: up.URL,
		Policies: map[string]gateway.ToolPolicy{"work": {Support: mcptask.Optional, Rerunnable: true}}})
	ctx := t.Context()
	c, err := client.Dial(ctx, url, &client.Options{ProtocolVersion: client.Wire20260728})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call, err := c.CallTool(ctx, "work", map[string]any{"label": "build"})
	if err != nil || call.Task == nil {
		t.Fatalf("work: %+v, %v; want a task", call, err)
	}
	waitStatus(t, c, call.Task.ID, "relaying the upstream's status", func(st *client.TaskStatus) bool {
		return st.StatusMessage == "upstream working on build"
	})
	up.Restart(t)
	up.Release()
	res, err := c.Wait(ctx, call.Task.ID, nil)
	if err != nil || text(res) != "build done, run 2" {
		t.Errorf("a rerunnable tool whose upstream task was lost: %q, %v; want it called again (run 2)", text(res), err)
	}
}
