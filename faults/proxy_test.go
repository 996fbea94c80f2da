package faults_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/faultproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The network faults: a fault proxy between the client (the mcptask
// binary or the Go client) and one real mcptaskd loses a request or its
// reply, or cuts every connection, at each moment the seed names, on both
// wires. After each, the call is finished the way a user finishes it
// ('mcptask resume', or the client's own re-sends), and the invariants are
// checked on the database and the audit trail.

// seq makes the unique values of the proxy tests' calls.
var seq atomic.Int64

func uniqueName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }
func uniqueN() int                    { return 100000 + int(seq.Add(1)) }

// proxied returns a fault proxy of its own in front of d.
func proxied(t *testing.T, d *daemon) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// outage takes the proxy down (cutting the open connections too) until
// it has cut at least n requests, then brings it back, and counts one
// fault.
func outage(t *testing.T, p *faultproxy.Proxy, n int64) {
	t.Helper()
	before := p.Cut()
	p.SetDown(true)
	p.CutConnections()
	waitFor(t, fmt.Sprintf("%d requests cut by the outage", n), 60*time.Second, func() bool { return p.Cut()-before >= n })
	p.SetDown(false)
	counts.faults.Add(1)
}

// resultMethod is the request that carries a finished task's result on
// wire: tasks/result on 2025-11-25, tasks/get on 2026-07-28.
func resultMethod(wire string) string {
	if wire == "2025-11-25" {
		return "tasks/result"
	}
	return "tasks/get"
}

// TestNetworkFaults runs every network fault on both wires against one
// mcptaskd on SQLite.
func TestNetworkFaults(t *testing.T) {
	d := sqliteDaemon(t, "")
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Run("create request lost", func(t *testing.T) { lostCreateRequest(t, d, wire) })
			t.Run("create reply lost", func(t *testing.T) { lostCreateReply(t, d, wire) })
			t.Run("create reply lost once, Go client", func(t *testing.T) { lostCreateReplyClient(t, d, wire) })
			t.Run("cut after the create", func(t *testing.T) { cutAfterCreate(t, d, wire) })
			t.Run("result lost after completed", func(t *testing.T) { lostResult(t, d, wire) })
			t.Run("cut during input_required", func(t *testing.T) { cutDuringInput(t, d, wire) })
			t.Run("answer's reply lost, Go client", func(t *testing.T) { lostAnswer(t, d, wire) })
			t.Run("cancel reply lost", func(t *testing.T) { lostCancel(t, d, wire) })
		})
	}
}

// lostCreateRequest: the tools/call never reaches the server, every time
// mcptask sends it. mcptask says the outcome is unknown (exit 4), and
// 'mcptask resume', once the network is back, creates the task: one task,
// one deploy.
func lostCreateRequest(t *testing.T, d *daemon, wire string) {
	p := proxied(t, d)
	c := newCLI(t, p.URL)
	dep := deploy(uniqueName("lost-request"), 1, 10)
	p.LoseRequests("tools/call", -1)
	r := c.run(append([]string{"--wire", wire, "call", dep.tool, "--answer", "confirm=true"}, dep.cliArgs()...)...)
	expect(t, r, 4, nil, []string{"outcome unknown", "resume"})
	counts.faults.Add(p.Lost())
	if p.Seen() != 0 {
		t.Fatalf("%d creates reached the server through a proxy losing them all", p.Seen())
	}
	p.LoseRequests("tools/call", 0)
	expect(t, c.run("--wire", wire, "resume", "--answer", "confirm=true"), 0, []string{"Deployed " + dep.id}, nil)
	dep.want = []string{"completed"}
	d.check(t, dep)
}

// lostCreateReply: the server creates the task, and every answer saying
// so is lost. mcptask re-sends the create with its idempotency key, then
// says the outcome is unknown; 'mcptask resume' finishes the call on the
// task the first delivery created.
func lostCreateReply(t *testing.T, d *daemon, wire string) {
	p := proxied(t, d)
	c := newCLI(t, p.URL)
	dep := deploy(uniqueName("lost-reply"), 1, 10)
	p.LoseReplies("tools/call", -1)
	r := c.run(append([]string{"--wire", wire, "call", dep.tool, "--answer", "confirm=true"}, dep.cliArgs()...)...)
	expect(t, r, 4, nil, []string{"outcome unknown", "resume"})
	if strings.Contains(r.Stderr, "refused") {
		t.Errorf("a lost answer reported as a refusal:\n%s", r)
	}
	counts.faults.Add(p.Lost())
	if p.Seen() < 2 {
		t.Errorf("the create was delivered %d times; want it re-sent with its key", p.Seen())
	}
	p.LoseReplies("tools/call", 0)
	expect(t, c.run("--wire", wire, "resume", "--answer", "confirm=true"), 0, []string{"Deployed " + dep.id}, nil)
	expect(t, c.run("list"), 0, nil, []string{"no tasks in flight"})
	dep.want = []string{"completed"}
	d.check(t, dep)
}

// lostCreateReplyClient: the Go client's create loses its first answer;
// the client re-sends it with the same key at once and gets the task the
// first delivery created.
func lostCreateReplyClient(t *testing.T, d *daemon, wire string) {
	p := proxied(t, d)
	c := dial(t, p.URL, wire, confirm)
	comp := compute(uniqueN(), 2, 20)
	p.LoseReplies("tools/call", 1)
	ctx := t.Context()
	call, err := c.CallTool(ctx, comp.tool, comp.args)
	if err != nil {
		t.Fatalf("CallTool with one lost answer: %v", err)
	}
	counts.faults.Add(p.Lost())
	if p.Lost() != 1 || p.Seen() != 2 {
		t.Fatalf("the proxy lost %d answers of %d deliveries; want 1 of 2", p.Lost(), p.Seen())
	}
	res, err := c.Wait(ctx, call.Task.ID, nil)
	if err != nil || res == nil {
		t.Fatalf("Wait: %v", err)
	}
	comp.want = []string{"completed"}
	d.check(t, comp)
}

// cutAfterCreate: the client has its task; then the network goes down
// while it polls. The client keeps polling and gets the result once the
// network is back (the Go client and mcptask call).
func cutAfterCreate(t *testing.T, d *daemon, wire string) {
	p := proxied(t, d)
	ctx := t.Context()

	gc := dial(t, p.URL, wire, confirm)
	comp := compute(uniqueN(), 10, 50)
	call, err := gc.CallTool(ctx, comp.tool, comp.args)
	if err != nil || call.Task == nil {
		t.Fatalf("CallTool: %+v, %v", call, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := gc.Wait(ctx, call.Task.ID, &client.WaitOptions{Unreachable: 2 * time.Minute})
		done <- err
	}()
	outage(t, p, 3)
	if err := <-done; err != nil {
		t.Fatalf("Go client's Wait across the outage: %v", err)
	}

	c := newCLI(t, p.URL)
	comp2 := compute(uniqueN(), 10, 50)
	run := c.start(append([]string{"--wire", wire, "call", comp2.tool}, comp2.cliArgs()...)...)
	tk := d.waitStatus(t, comp2, time.Minute, "working", "completed")
	// The task is in the store before the create's answer is on its way
	// back: the cut is after the create once the CLI has that answer,
	// which its journal then names (or once the CLI is done).
	ended := false
	waitFor(t, "the CLI to have the create's answer", time.Minute, func() bool {
		b, _ := os.ReadFile(c.journal)
		select {
		case <-run.done:
			ended = true
			return true
		default:
			return bytes.Contains(b, []byte(tk.ID))
		}
	})
	if ended {
		t.Log("the CLI's call ended before the outage could cut it")
	} else {
		outage(t, p, 3)
	}
	expect(t, run.wait(), 0, []string{"There are "}, nil)

	comp.want, comp2.want = []string{"completed"}, []string{"completed"}
	d.check(t, comp, comp2)
}

// lostResult: the task completed; the answers that carry its result are
// lost twice. The client asks again and gets the result; the tool is not
// called again.
func lostResult(t *testing.T, d *daemon, wire string) {
	p := proxied(t, d)
	ctx := t.Context()
	method := resultMethod(wire)

	// Polling: the answers that carry the result are what is lost. (A
	// pushed 2026-07-28 wait reads the result from its listen stream,
	// whose loss is the second half.)
	gc := dialWith(t, p.URL, wire, &client.Options{DisablePush: true})
	comp := compute(uniqueN(), 1, 0)
	created, err := gc.CallTool(ctx, comp.tool, comp.args)
	if err != nil {
		t.Fatal(err)
	}
	if created.Task != nil {
		d.waitStatus(t, comp, time.Minute, "completed")
		p.LoseReplies(method, 2)
		res, err := gc.Wait(ctx, created.Task.ID, &client.WaitOptions{Unreachable: 2 * time.Minute})
		if err != nil || res == nil || res.IsError {
			t.Fatalf("Wait with two lost result answers: %+v, %v", res, err)
		}
		if p.Lost() != 2 {
			t.Fatalf("the proxy lost %d answers of %s, want 2", p.Lost(), method)
		}
		counts.faults.Add(p.Lost())
	}

	c := newCLI(t, p.URL)
	comp2 := compute(uniqueN(), 1, 0)
	r := c.run(append([]string{"--wire", wire, "call", "--detach", comp2.tool}, comp2.cliArgs()...)...)
	expect(t, r, 0, nil, nil)
	id := strings.TrimSpace(r.Stdout)
	d.waitStatus(t, comp2, time.Minute, "completed")
	lost := p.Lost()
	p.LoseReplies(method, 2)
	expect(t, c.run("--wire", wire, "wait", "--no-push", id), 0, []string{"There are "}, nil)
	if p.Lost()-lost != 2 {
		t.Fatalf("the proxy lost %d answers of %s to mcptask wait, want 2", p.Lost()-lost, method)
	}
	counts.faults.Add(p.Lost() - lost)
	comp.want, comp2.want = []string{"completed"}, []string{"completed"}
	comps := []call{comp, comp2}

	if wire != "2025-11-25" {
		// Pushed: the listen stream that would carry the result is lost;
		// the wait falls back to polling and gets it.
		for _, how := range []string{"go client", "cli"} {
			comp3 := compute(uniqueN(), 1, 0)
			r := c.run(append([]string{"--wire", wire, "call", "--detach", comp3.tool}, comp3.cliArgs()...)...)
			expect(t, r, 0, nil, nil)
			id := strings.TrimSpace(r.Stdout)
			d.waitStatus(t, comp3, time.Minute, "completed")
			var gc *client.Client
			if how == "go client" {
				gc = dialWith(t, p.URL, wire, nil)
			}
			lost := p.Lost()
			// Not the go-sdk client's own (long-lived) listen stream.
			p.LoseRepliesWith(wire2026Listen, `"taskIds"`, 1)
			if how == "cli" {
				expect(t, c.run("--wire", wire, "wait", id), 0, []string{"There are "}, nil)
			} else {
				if res, err := gc.Wait(ctx, id, &client.WaitOptions{Unreachable: 2 * time.Minute}); err != nil || res == nil || res.IsError {
					t.Fatalf("pushed Wait with the listen stream lost: %+v, %v", res, err)
				}
			}
			if p.Lost()-lost != 1 {
				t.Fatalf("%s: the proxy lost %d listen streams, want 1", how, p.Lost()-lost)
			}
			counts.faults.Add(p.Lost() - lost)
			comp3.want = []string{"completed"}
			comps = append(comps, comp3)
		}
	}

	d.check(t, comps...)
}

// wire2026Listen is the method of the 2026-07-28 notification stream.
const wire2026Listen = "subscriptions/listen"

// cutDuringInput: the task waits for the user's confirmation, and the
// network goes down (every connection cut, the event streams included)
// while the client asks the user. Once it is back, the answer reaches the
// task, which deploys once.
func cutDuringInput(t *testing.T, d *daemon, wire string) {
	p := proxied(t, d)
	ctx := t.Context()

	asked := make(chan struct{}, 1)
	release := make(chan struct{})
	gc := dial(t, p.URL, wire, func(ctx context.Context, id string, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		select {
		case asked <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return confirm(ctx, id, params)
	})
	dep := deploy(uniqueName("input-cut"), 1, 10)
	call, err := gc.CallTool(ctx, dep.tool, dep.args)
	if err != nil || call.Task == nil {
		t.Fatalf("CallTool: %+v, %v", call, err)
	}
	done := make(chan error, 1)
	go func() {
		res, err := gc.Wait(ctx, call.Task.ID, &client.WaitOptions{Unreachable: 2 * time.Minute})
		if err == nil && (res == nil || !strings.Contains(fmt.Sprint(res.StructuredContent), "true")) {
			err = fmt.Errorf("result %+v, want a deployment", res)
		}
		done <- err
	}()
	select {
	case <-asked:
	case <-time.After(time.Minute):
		t.Fatal("the client was never asked for the confirmation")
	}
	d.waitStatus(t, dep, time.Minute, "input_required")
	// The network goes down while the user answers (every connection cut,
	// the event stream of 2025-11-25's tasks/result included), so the
	// answer goes out into the outage.
	before := p.Cut()
	p.SetDown(true)
	p.CutConnections()
	close(release)
	waitFor(t, "the client's requests cut by the outage", time.Minute, func() bool { return p.Cut()-before >= 2 })
	p.SetDown(false)
	counts.faults.Add(1)
	if err := <-done; err != nil {
		t.Fatalf("Go client across an outage during input_required: %v", err)
	}

	// mcptask: the task waits for input and the network goes down; a
	// 'mcptask resume --answer' then cannot reach the server and says so
	// (exit 4); once it is back, 'mcptask resume --answer' finishes the
	// call: one deployment.
	c := newCLI(t, p.URL)
	dep2 := deploy(uniqueName("input-cut-cli"), 1, 10)
	expect(t, c.run(append([]string{"--wire", wire, "call", "--detach", dep2.tool}, dep2.cliArgs()...)...), 0, nil, nil)
	d.waitStatus(t, dep2, time.Minute, "input_required")
	before = p.Cut()
	p.SetDown(true)
	expect(t, c.run("--wire", wire, "resume", "--answer", "confirm=true"), 4, nil, nil)
	if p.Cut() == before {
		t.Fatal("resume reached the server through the outage")
	}
	p.SetDown(false)
	counts.faults.Add(1)
	if tk, _ := d.task(d.waitStatus(t, dep2, time.Minute, "input_required").ID); tk.Status != "input_required" {
		t.Fatalf("the task after a resume that could not connect: %s", tk.Status)
	}
	expect(t, c.run("--wire", wire, "resume", "--answer", "confirm=true"), 0, []string{"Deployed " + dep2.id}, nil)

	dep.want, dep2.want = []string{"completed"}, []string{"completed"}
	d.check(t, dep, dep2)
}

// lostAnswer: the client's answer to the task's question reaches the
// server, and the reply saying so is lost. The client sends it again;
// the task takes it once and deploys once.
func lostAnswer(t *testing.T, d *daemon, wire string) {
	p := proxied(t, d)
	ctx := t.Context()
	method := "tasks/update"
	if wire == "2025-11-25" {
		method = faultproxy.Response // the answer to the elicitation request
	}
	p.LoseReplies(method, 1)
	gc := dial(t, p.URL, wire, confirm)
	dep := deploy(uniqueName("answer-lost"), 1, 10)
	call, err := gc.CallTool(ctx, dep.tool, dep.args)
	if err != nil || call.Task == nil {
		t.Fatalf("CallTool: %+v, %v", call, err)
	}
	res, err := gc.Wait(ctx, call.Task.ID, &client.WaitOptions{Unreachable: 2 * time.Minute})
	if err != nil || res == nil || !strings.Contains(fmt.Sprint(res.StructuredContent), "true") {
		t.Fatalf("Wait with the answer's reply lost: %+v, %v", res, err)
	}
	if p.Lost() != 1 {
		t.Fatalf("the proxy lost %d replies of %s, want 1", p.Lost(), method)
	}
	counts.faults.Add(p.Lost())
	dep.want = []string{"completed"}
	d.check(t, dep)
}

// lostCancel: tasks/cancel reaches the server, which cancels the task,
// and its reply is lost. The task stays cancelled (the tool's work,
// stopped, never overwrites it), asking again says so, and 'mcptask
// resume' finishes the call as cancelled.
func lostCancel(t *testing.T, d *daemon, wire string) {
	p := proxied(t, d)
	ctx := t.Context()

	c := newCLI(t, p.URL)
	comp := compute(uniqueN(), 400, 50)
	r := c.run(append([]string{"--wire", wire, "call", "--detach", comp.tool}, comp.cliArgs()...)...)
	expect(t, r, 0, nil, nil)
	id := strings.TrimSpace(r.Stdout)
	p.LoseReplies("tasks/cancel", 1)
	r = c.run("--wire", wire, "cancel", id)
	if r.Code != 0 && r.Code != 4 {
		t.Fatalf("cancel with a lost reply: want exit 0 (re-sent) or 4 (unknown)\n%s", r)
	}
	if p.Lost() != 1 {
		t.Fatalf("the proxy lost %d replies of tasks/cancel, want 1", p.Lost())
	}
	counts.faults.Add(1)
	d.waitStatus(t, comp, time.Minute, "cancelled")
	if r.Code == 4 {
		expect(t, c.run("--wire", wire, "cancel", id), 0, []string{"cancelled"}, nil)
	}
	if r := c.run("--wire", wire, "resume"); r.Code != 0 && r.Code != 3 {
		t.Fatalf("resume after the cancel: want exit 0 (nothing left) or 3 (cancelled)\n%s", r)
	}
	expect(t, c.run("list"), 0, nil, []string{"no tasks in flight"})

	gc := dial(t, p.URL, wire, confirm)
	comp2 := compute(uniqueN(), 400, 50)
	call, err := gc.CallTool(ctx, comp2.tool, comp2.args)
	if err != nil || call.Task == nil {
		t.Fatalf("CallTool: %+v, %v", call, err)
	}
	lost := p.Lost()
	p.LoseReplies("tasks/cancel", 1)
	if _, err := gc.Cancel(ctx, call.Task.ID); err == nil {
		t.Log("the Go client's Cancel rode out the lost reply")
	}
	if p.Lost()-lost != 1 {
		t.Fatalf("the proxy lost %d replies of tasks/cancel, want 1", p.Lost()-lost)
	}
	counts.faults.Add(1)
	if st, err := gc.Cancel(ctx, call.Task.ID); err != nil || st.Status != "cancelled" {
		t.Fatalf("Cancel again: %+v, %v; want cancelled", st, err)
	}
	if _, err := gc.Wait(ctx, call.Task.ID, nil); !errors.Is(err, client.ErrCancelled) {
		t.Fatalf("Wait of the cancelled task: %v, want ErrCancelled", err)
	}
	comp.want, comp2.want = []string{"cancelled"}, []string{"cancelled"}
	d.check(t, comp, comp2)
}
