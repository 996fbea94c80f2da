package client_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// leaveUnknown runs the rollout tool once through c and sets the
// operation it recorded to unknown, as a reconciliation that could not
// tell would.
func leaveUnknown(t *testing.T, s *testServer, c *client.Client) string {
	t.Helper()
	ctx := testCtx(t)
	call, err := c.CallTool(ctx, "rollout", nil)
	if err != nil || call.Task == nil {
		t.Fatalf("rollout: %+v %v", call, err)
	}
	if _, err := c.Wait(ctx, call.Task.ID, nil); err != nil {
		t.Fatal(err)
	}
	ops, _, err := s.St.Operations(ctx, store.OperationQuery{TaskID: task.ID(call.Task.ID)})
	if err != nil || len(ops) != 1 {
		t.Fatalf("the rollout's operations: %v %v", ops, err)
	}
	if _, err := s.St.UpdateOperation(ctx, ops[0].Key, func(o *task.Operation) error {
		return o.Move(task.OpUnknown, "no answer", time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	return call.Task.ID
}

// TestUnknownEffectFailsClosed: of a server that does not check calls
// itself (listingOnly: an older mcptask), while the requester's
// operations cannot be listed (here: its tasks/* requests are
// rate-limited), CallTool does
// not call the tool: it returns an *UnknownEffectError saying the check
// could not be made and how to call anyway (AllowUnknownEffects), and the
// server runs nothing; with AllowUnknownEffects the call goes through. On
// both wires.
func TestUnknownEffectFailsClosed(t *testing.T) {
	t.Parallel()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			// One tasks/* request per requester (operations/list is one),
			// then none for a very long time.
			s := newServer(t, serverOpts{limits: mcptask.Limits{RequestRate: 1e-6, RequestBurst: 1}, wrap: listingOnly})
			c := dial(t, s.URL, &client.Options{ProtocolVersion: wire})
			ctx := testCtx(t)
			// The first check spends the bucket: nothing unknown, the call runs.
			call, err := c.CallTool(ctx, "counted", nil)
			if err != nil || call.Task == nil {
				t.Fatalf("first call: %+v %v", call, err)
			}
			for range 4 {
				call, err = c.CallTool(ctx, "counted", nil)
				var ue *client.UnknownEffectError
				if !errors.As(err, &ue) || ue.Err == nil || len(ue.Operations) != 0 || ue.Tool != "counted" {
					t.Fatalf("a call whose check was rate-limited: %+v, %v; want an UnknownEffectError with Err", call, err)
				}
				for _, want := range []string{"could not check", "counted", "rate", "AllowUnknownEffects"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("the refusal %q does not say %q", err, want)
					}
				}
			}
			if n := s.count("tools/call"); n != 1 {
				t.Errorf("the server received %d tools/call, want the first only", n)
			}
			allowed := dial(t, s.URL, &client.Options{ProtocolVersion: wire, AllowUnknownEffects: true})
			if call, err := allowed.CallTool(ctx, "counted", nil); err != nil || call.Task == nil {
				t.Errorf("with AllowUnknownEffects: %+v %v", call, err)
			}
		})
	}
}

// TestUnknownEffectCoversJobTools: of a server that does not check calls
// itself (listingOnly), an operation of a tool left unknown
// refuses the job tool call that would start that tool as a job
// (job_start {"tool": ...}), as it refuses the tool's own call, with the
// tool named; a job of another tool is not refused. On both wires.
func TestUnknownEffectCoversJobTools(t *testing.T) {
	t.Parallel()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, serverOpts{jobTools: true, wrap: listingOnly})
			s.Release()
			c := dial(t, s.URL, &client.Options{ProtocolVersion: wire})
			id := leaveUnknown(t, s, c)
			ctx := testCtx(t)
			before := s.count("tools/call")
			for _, call := range []struct {
				name string
				args any
			}{
				{"rollout", nil},
				{"job_start", map[string]any{"tool": "rollout"}},
				{"job_start", map[string]any{"tool": "rollout", "arguments": map[string]any{}}},
			} {
				_, err := c.CallTool(ctx, call.name, call.args)
				var ue *client.UnknownEffectError
				if !errors.As(err, &ue) || ue.Tool != "rollout" || len(ue.Operations) != 1 || ue.Operations[0].TaskID != id {
					t.Errorf("%s %v: %v, want an UnknownEffectError of rollout's operation", call.name, call.args, err)
				}
			}
			if n := s.count("tools/call"); n != before {
				t.Errorf("the refused calls sent %d tools/call", n-before)
			}
			res, err := c.CallTool(ctx, "job_start", map[string]any{"tool": "counted"})
			if err != nil || res.Result == nil || res.Result.IsError {
				t.Errorf("job_start of another tool: %+v %v", res, err)
			}
		})
	}
}

// TestAnswerAfterCancel: the user answers a task's question after the
// task was cancelled; the server refuses the late tasks/update (the task
// ended), and Wait ends with the task's end, ErrCancelled, not with an
// error about sending the answer. On the 2026-07-28 wire (2025-11-25 has
// no tasks/update).
func TestAnswerAfterCancel(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	var c *client.Client
	c = dial(t, s.URL, &client.Options{ProtocolVersion: client.Wire20260728,
		Elicit: func(ctx context.Context, taskID string, _ *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			if _, err := c.Cancel(ctx, taskID); err != nil {
				return nil, err
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}})
	ctx := testCtx(t)
	call, err := c.CallTool(ctx, "deploy_with_confirmation", map[string]any{"service": "api", "build_steps": 1, "step_delay_ms": 0})
	if err != nil || call.Task == nil {
		t.Fatalf("CallTool: %+v, %v", call, err)
	}
	if _, err := c.Wait(ctx, call.Task.ID, nil); !errors.Is(err, client.ErrCancelled) {
		t.Fatalf("Wait of a task cancelled while its question was answered: %v, want ErrCancelled", err)
	}
}

// listingOnly makes the server answer as one that does not check a call's
// unknown effects itself (an mcptask before it did): its
// io.mcptask/operations extension loses its effectCheck setting (the
// value turned to 1, padded, so that the body keeps its length).
func listingOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(rewriter{w}, r)
	})
}

type rewriter struct{ http.ResponseWriter }

func (w rewriter) Write(b []byte) (int, error) {
	return w.ResponseWriter.Write(bytes.ReplaceAll(b, []byte(`{"effectCheck":true}`), []byte(`{"effectCheck":1   }`)))
}

// Flush passes the stream's flushes on.
func (w rewriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// TestUnknownEffectCheckedInCall: mcptask checks a call's unknown effects
// itself, in the call: the client sends no listing first (not even one
// the request rate would refuse), a call of the tool, or of a job tool
// starting it, is refused with the operation and runs nothing, and other
// calls go through. On both wires.
func TestUnknownEffectCheckedInCall(t *testing.T) {
	t.Parallel()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, serverOpts{jobTools: true})
			s.Release()
			c := dial(t, s.URL, &client.Options{ProtocolVersion: wire})
			id := leaveUnknown(t, s, c)
			ctx := testCtx(t)
			for _, call := range []struct {
				name string
				args any
			}{
				{"rollout", nil},
				{"job_start", map[string]any{"tool": "rollout"}},
			} {
				_, err := c.CallTool(ctx, call.name, call.args)
				var ue *client.UnknownEffectError
				if !errors.As(err, &ue) || ue.Tool != "rollout" || len(ue.Operations) != 1 || ue.Operations[0].TaskID != id || ue.Operations[0].State != "unknown" {
					t.Errorf("%s %v: %v, want an UnknownEffectError of rollout's operation", call.name, call.args, err)
				}
			}
			if n := s.count("io.mcptask/operations/list"); n != 0 {
				t.Errorf("the client listed the operations %d times, want none (the server checks)", n)
			}
			tasks, _, err := s.St.Browse(ctx, store.BrowseQuery{Tool: "rollout"})
			if err != nil || len(tasks) != 1 {
				t.Errorf("rollout's tasks: %d, %v; want only the first (the refused calls ran nothing)", len(tasks), err)
			}
			if call, err := c.CallTool(ctx, "counted", nil); err != nil || call.Task == nil {
				t.Errorf("a call of another tool: %+v %v", call, err)
			}
		})
	}
}
