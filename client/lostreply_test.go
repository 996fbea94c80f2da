package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/faultproxy"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newDropProxy starts a faultproxy in front of target for the test.
func newDropProxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestLostCreateReplyIsResent: the reply carrying the task handle is lost;
// the client sends the call again with the same idempotency key and gets
// the task the first one created: one task, one run, on both wires.
func TestLostCreateReplyIsResent(t *testing.T) {
	t.Parallel()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, serverOpts{})
			s.Release() // the counted tool finishes at once
			p := newDropProxy(t, s.URL)
			p.LoseReplies("tools/call", 1)
			journal := filepath.Join(t.TempDir(), "journal.json")
			c := dial(t, p.URL, &client.Options{ProtocolVersion: wire, Journal: journal})
			ctx := testCtx(t)
			call, err := c.CallTool(ctx, "counted", nil)
			if err != nil {
				t.Fatalf("CallTool through a lost reply: %v", err)
			}
			if call.Task == nil {
				t.Fatalf("CallTool: no task (%+v)", call)
			}
			if p.Lost() != 1 || p.Seen() != 2 {
				t.Fatalf("proxy: %d replies lost of %d calls, want 1 of 2 (the call re-sent once)", p.Lost(), p.Seen())
			}
			res, err := c.Wait(ctx, call.Task.ID, nil)
			if err != nil || text(res) != "counted run 1" {
				t.Fatalf("Wait: %q, %v; want the first and only run's result", text(res), err)
			}
			if n := s.runs.Load(); n != 1 {
				t.Fatalf("the tool ran %d times, want once", n)
			}
			if pending, _ := c.Pending(); len(pending) != 0 {
				t.Errorf("journal after the wait: %+v, want empty", pending)
			}
		})
	}
}

// TestUnansweredCreateResumed: every reply to the call is lost. CallTool
// says the outcome is unknown (not that the server refused), the journal
// keeps the call, and Resume finishes it once the server is reachable:
// still one task, one run.
func TestUnansweredCreateResumed(t *testing.T) {
	t.Parallel()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, serverOpts{})
			s.Release()
			p := newDropProxy(t, s.URL)
			p.LoseReplies("tools/call", -1)
			journal := filepath.Join(t.TempDir(), "journal.json")
			c := dial(t, p.URL, &client.Options{ProtocolVersion: wire, Journal: journal})
			ctx := testCtx(t)
			_, err := c.CallTool(ctx, "counted", nil)
			var ou *client.OutcomeUnknownError
			if !errors.As(err, &ou) || !errors.Is(err, client.ErrOutcomeUnknown) || ou.Key == "" || !ou.Journaled {
				t.Fatalf("CallTool with every reply lost: %v; want an OutcomeUnknownError with a journaled key", err)
			}
			if p.Seen() < 2 {
				t.Errorf("the call was sent %d times; want it re-sent before giving up", p.Seen())
			}
			pending, err := c.Pending()
			if err != nil || len(pending) != 1 || !pending[0].Unsent() || pending[0].IdempotencyKey != ou.Key {
				t.Fatalf("journal: %+v, %v; want the unsent call with key %s", pending, err, ou.Key)
			}
			p.LoseReplies("tools/call", 0) // the network is back
			outs, err := c.Resume(ctx, nil)
			if err != nil || len(outs) != 1 || outs[0].Err != nil || text(outs[0].Result) != "counted run 1" {
				t.Fatalf("Resume: %+v, %v; want the first and only run's result", outs, err)
			}
			if n := s.runs.Load(); n != 1 {
				t.Fatalf("the tool ran %d times over %d deliveries, want once", n, p.Seen())
			}
			if pending, _ := c.Pending(); len(pending) != 0 {
				t.Errorf("journal after Resume: %+v, want empty", pending)
			}
		})
	}
}

// TestRefusedCallIsNotUnknown: a call the server refuses is refused, not
// of unknown outcome, and leaves nothing in the journal: a plain call of an
// unknown tool, and a task call sent with a key and refused by a limit.
func TestRefusedCallIsNotUnknown(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{limits: mcptask.Limits{CreateRate: 0.001, CreateBurst: 1}})
	s.Release()
	for _, wire := range wires {
		c := dial(t, s.URL, &client.Options{ProtocolVersion: wire, Journal: filepath.Join(t.TempDir(), "journal.json")})
		ctx := testCtx(t)
		refusedTasks := 0
		for _, tool := range []string{"no_such_tool", "counted", "counted"} {
			call, err := c.CallTool(ctx, tool, nil)
			if call != nil && call.Task != nil {
				if _, err := c.Wait(ctx, call.Task.ID, nil); err != nil {
					t.Fatal(err)
				}
				continue // the one creation the limit lets through
			}
			if err == nil || errors.Is(err, client.ErrOutcomeUnknown) {
				t.Errorf("%s: a refused call of %s: %v, want the server's refusal", wire, tool, err)
			}
			if tool == "counted" {
				refusedTasks++
			}
		}
		if refusedTasks == 0 {
			t.Errorf("%s: the limit refused no task call: the keyed refusal went untested", wire)
		}
		if pending, _ := c.Pending(); len(pending) != 0 {
			t.Errorf("%s: journal after refused calls: %+v", wire, pending)
		}
	}
}

// TestWaitRidesOutAnOutage: while the server is unreachable, Wait keeps
// polling with backoff instead of giving up at the first failed poll, and
// delivers the result once the server answers again; on both wires.
func TestWaitRidesOutAnOutage(t *testing.T) {
	t.Parallel()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, serverOpts{})
			p := newDropProxy(t, s.URL)
			c := dial(t, p.URL, &client.Options{ProtocolVersion: wire})
			ctx := testCtx(t)
			call, err := c.CallTool(ctx, "counted", nil)
			if err != nil || call.Task == nil {
				t.Fatalf("CallTool: %+v, %v", call, err)
			}
			p.SetDown(true)
			done := make(chan error, 1)
			go func() {
				res, err := c.Wait(ctx, call.Task.ID, &client.WaitOptions{Unreachable: time.Minute})
				if err == nil && text(res) != "counted run 1" {
					err = fmt.Errorf("result %q", text(res))
				}
				done <- err
			}()
			waitFor(t, 30*time.Second, "polls cut by the outage", func() bool { return p.Cut() >= 3 })
			p.SetDown(false)
			s.Release()
			if err := <-done; err != nil {
				t.Fatalf("Wait across an outage: %v", err)
			}
		})
	}
}

// TestWaitGivesUpOnASilentServer: a server silent for longer than
// WaitOptions.Unreachable ends the wait with an *UnreachableError; the
// task stays in the journal for a later Resume.
func TestWaitGivesUpOnASilentServer(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	p := newDropProxy(t, s.URL)
	c := dial(t, p.URL, &client.Options{Journal: filepath.Join(t.TempDir(), "journal.json")})
	ctx := testCtx(t)
	call, err := c.CallTool(ctx, "counted", nil)
	if err != nil || call.Task == nil {
		t.Fatalf("CallTool: %+v, %v", call, err)
	}
	p.SetDown(true)
	_, err = c.Wait(ctx, call.Task.ID, &client.WaitOptions{Unreachable: 700 * time.Millisecond})
	var ue *client.UnreachableError
	if !errors.As(err, &ue) || ue.TaskID != call.Task.ID {
		t.Fatalf("Wait on a silent server: %v, want an UnreachableError", err)
	}
	if p.Cut() < 2 {
		t.Errorf("Wait gave up after %d polls; want it to try again first", p.Cut())
	}
	if pending, _ := c.Pending(); len(pending) != 1 || pending[0].TaskID != call.Task.ID {
		t.Errorf("journal after giving up: %+v, want the task", pending)
	}
}

// TestLostAnswerReplyIsResent: the answer to a task's question reaches
// the server and the reply saying so is lost (2026-07-28: tasks/update;
// 2025-11-25: the client's response to the elicitation request). The
// client sends the same answer again, without asking the user twice, and
// the task deploys once (the wait failed with "sending the answers to its
// input requests: ... EOF").
func TestLostAnswerReplyIsResent(t *testing.T) {
	t.Parallel()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, serverOpts{})
			p := newDropProxy(t, s.URL)
			method := "tasks/update"
			if wire == "2025-11-25" {
				method = faultproxy.Response
			}
			p.LoseReplies(method, 1)
			var asked atomic.Int64
			c := dial(t, p.URL, &client.Options{ProtocolVersion: wire, Journal: "",
				Elicit: func(context.Context, string, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
					asked.Add(1)
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
				}})
			ctx := testCtx(t)
			call, err := c.CallTool(ctx, "deploy_with_confirmation", map[string]any{"service": "api", "build_steps": 1, "step_delay_ms": 0})
			if err != nil || call.Task == nil {
				t.Fatalf("CallTool: %+v, %v", call, err)
			}
			res, err := c.Wait(ctx, call.Task.ID, nil)
			if err != nil || !strings.Contains(text(res), "Deployed api@latest") {
				t.Fatalf("Wait with the answer's reply lost: %q, %v", text(res), err)
			}
			if p.Lost() != 1 {
				t.Fatalf("the proxy lost %d replies of %s, want 1", p.Lost(), method)
			}
			if n := asked.Load(); n != 1 {
				t.Errorf("the user was asked %d times, want once", n)
			}
		})
	}
}

// TestResultStreamCutIsResumed: on 2025-11-25, the connection carrying
// the open tasks/result call (its event stream) is cut while the task
// waits for input. The client calls tasks/result again and the task
// completes (the wait ended with "request terminated without response").
func TestResultStreamCutIsResumed(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	p := newDropProxy(t, s.URL)
	asked, cut := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c := dial(t, p.URL, &client.Options{ProtocolVersion: "2025-11-25", Journal: "",
		Elicit: func(ctx context.Context, _ string, _ *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			once.Do(func() {
				close(asked)
				<-cut // the user answers after the stream was cut
			})
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}})
	ctx := testCtx(t)
	call, err := c.CallTool(ctx, "deploy_with_confirmation", map[string]any{"service": "api", "build_steps": 1, "step_delay_ms": 0})
	if err != nil || call.Task == nil {
		t.Fatalf("CallTool: %+v, %v", call, err)
	}
	done := make(chan error, 1)
	go func() {
		res, err := c.Wait(ctx, call.Task.ID, nil)
		if err == nil && !strings.Contains(text(res), "Deployed api@latest") {
			err = fmt.Errorf("result %q", text(res))
		}
		done <- err
	}()
	<-asked
	p.CutConnections()
	close(cut)
	if err := <-done; err != nil {
		t.Fatalf("Wait across a cut tasks/result stream: %v", err)
	}
}

// TestWaitOutlivesTheSession: mcptaskd is killed and restarted on the
// same address while a 2025-11-25 client waits for its task; the new
// process does not know the client's session (404). The client opens a
// new session and the wait ends with the re-run task's result (it polled
// the closed session until it gave up, saying the server did not
// answer).
func TestWaitOutlivesTheSession(t *testing.T) {
	t.Parallel()
	bin := mcptaskdBin(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	db := filepath.Join(t.TempDir(), "tasks.db")
	start := func() *proctest.Process {
		p, err := proctest.Start(proctest.Config{Path: bin, Args: []string{"-addr", addr, "-db", db, "-poll-interval", "50ms"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		if _, err := p.WaitListening(t.Context(), time.Minute); err != nil {
			t.Fatalf("mcptaskd: %v\n%s", err, p.Logs())
		}
		return p
	}
	d := start()
	c := dial(t, "http://"+addr+"/mcp", &client.Options{ProtocolVersion: "2025-11-25"})
	ctx := testCtx(t)
	call, err := c.CallTool(ctx, "long_computation", map[string]any{"n": 1000, "steps": 20, "step_delay_ms": 50})
	if err != nil || call.Task == nil {
		t.Fatalf("CallTool: %+v, %v", call, err)
	}
	d.Kill()
	start()
	res, err := c.Wait(ctx, call.Task.ID, &client.WaitOptions{Unreachable: 30 * time.Second})
	if err != nil || !strings.Contains(text(res), "There are 168 primes up to 1000") {
		t.Fatalf("Wait across a restart that forgot the session: %q, %v", text(res), err)
	}
}
