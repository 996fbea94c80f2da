package httpjob_test

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/source/httpjob"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestHonestCancel: a task is cancelled only when the job API accepted
// the cancel (and, with cancelled states, its status says so). A cancel
// the job API refuses (HTTP 400 for a bodiless JSON-RPC POST, a JSON-RPC
// error in a 200 answer), or a tool that cannot cancel, leaves the task
// running: the canceller is told why (wire.CodeCancelRefused), the status
// message, the task's log and the audit trail say so, and the job's real
// outcome ends the task. On both wires.
func TestHonestCancel(t *testing.T) {
	js := newJobs(t)
	auth := map[string]string{"Authorization": "Bearer " + token}
	tool := func(name string, cancel httpjob.Cancel) httpjob.Tool {
		tl := buildTool(js.URL, false)
		tl.Name = name
		if cancel.URL != "" {
			cancel.URL, cancel.Headers = js.URL+cancel.URL, auth
		}
		tl.Cancel = cancel
		return tl
	}
	rpcBody := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "cancel", "params": map[string]any{"id": "{jobId}"}}
	tools := []httpjob.Tool{
		tool("bodiless", httpjob.Cancel{Request: httpjob.Request{URL: "/rpc"}}),
		tool("rpc_error", httpjob.Cancel{Request: httpjob.Request{URL: "/rpc",
			Body: map[string]any{"jsonrpc": "2.0", "id": 1, "method": "stop", "params": map[string]any{"id": "{jobId}"}}}, OK: "/result"}),
		tool("no_cancel", httpjob.Cancel{}),
		tool("rpc", httpjob.Cancel{Request: httpjob.Request{URL: "/rpc", Body: rpcBody}, OK: "/result"}),
	}
	logs := &proctest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := servertest.Start(t, servertest.Options{
		Logger: log,
		Engine: engine.Options{Policy: task.Policy{PollInterval: 20 * time.Millisecond}, Audit: audit.New(log)},
		Register: func(ts *mcptask.Server) (func(), error) {
			return nil, httpjob.New(tools, &http.Client{}, log).Register(t.Context(), ts)
		},
	})
	for _, w := range []string{client.Wire20260728, client.Wire20251125} {
		t.Run(w, func(t *testing.T) {
			c := dial(t, s.URL, w)
			for _, refused := range []struct{ tool, reason string }{
				{"bodiless", "the job API refused the cancel of job %s: HTTP 400: not a JSON-RPC 2.0 request"},
				{"rpc_error", "the job API did not accept the cancel of job %s: its answer has no value at /result: unknown method or job"},
				{"no_cancel", "job %s cannot be cancelled: the tool declares no cancel request (cancel.url)"},
			} {
				call, err := c.CallTool(t.Context(), refused.tool, map[string]any{"ref": "main"})
				if err != nil || call.Task == nil {
					t.Fatalf("%s: %+v, %v", refused.tool, call, err)
				}
				id := call.Task.ID
				job := js.jobOf(t, id)
				want := strings.Replace(refused.reason, "%s", job, 1)
				_, err = c.Cancel(t.Context(), id)
				var je *jsonrpc.Error
				if !errors.Is(err, client.ErrCancelRefused) || !errors.As(err, &je) || je.Code != wire.CodeCancelRefused || !strings.Contains(je.Message, want) {
					t.Fatalf("%s: cancel answered %v; want code %d saying %q", refused.tool, err, wire.CodeCancelRefused, want)
				}
				st, err := c.Get(t.Context(), id)
				if err != nil || st.Status != "working" || !strings.Contains(st.StatusMessage, "cancel refused: "+want) {
					t.Fatalf("%s: after the refused cancel: %+v, %v; want working, saying why", refused.tool, st, err)
				}
				if log := logText(t, c, id); !strings.Contains(log, "cancel refused: "+want) {
					t.Errorf("%s: the task's log lacks the refusal:\n%s", refused.tool, log)
				}
				if !strings.Contains(logs.String(), `"event":"task.cancel_refused"`) || !strings.Contains(logs.String(), id) {
					t.Errorf("%s: no audit record of the refused cancel", refused.tool)
				}
				if js.svc.Stats().Jobs[job].State != "running" {
					t.Fatalf("%s: the job is %s", refused.tool, js.svc.Stats().Jobs[job].State)
				}
				// The job's real outcome ends the task.
				js.hook(t, "/test/jobs/"+job+"/finish", map[string]any{"built": refused.tool})
				res, err := c.Wait(t.Context(), id, nil)
				if err != nil || res.IsError || !strings.Contains(text(res), refused.tool) {
					t.Fatalf("%s: after the refused cancel the job succeeded, the task: %q, %v", refused.tool, text(res), err)
				}
			}

			// Accepted: the job says cancelled, then the task is.
			call, err := c.CallTool(t.Context(), "rpc", map[string]any{"ref": "main"})
			if err != nil || call.Task == nil {
				t.Fatalf("rpc: %+v, %v", call, err)
			}
			job := js.jobOf(t, call.Task.ID)
			if _, err := c.Cancel(t.Context(), call.Task.ID); err != nil {
				t.Fatalf("an accepted cancel: %v", err)
			}
			if js.svc.Stats().Jobs[job].State != "cancelled" {
				t.Fatalf("the task's cancel returned before the job was cancelled: %+v", js.svc.Stats().Jobs[job])
			}
			waitStatus(t, c, call.Task.ID, "cancelled", func(st *client.TaskStatus) bool { return st.Status == "cancelled" })
			deadline := time.Now().Add(30 * time.Second)
			for op := operationOf(t, s.URL, call.Task.ID); op.State != "rejected"; op = operationOf(t, s.URL, call.Task.ID) {
				if time.Now().After(deadline) {
					t.Fatalf("the operation of the cancelled job: %+v; want rejected", op)
				}
				time.Sleep(5 * time.Millisecond) // polling the task, not timing the test
			}
		})
	}
}

// TestJobCancelledElsewhere: a job cancelled in the job system (not
// through the task) ends its task cancelled, not failed.
func TestJobCancelledElsewhere(t *testing.T) {
	js := newJobs(t)
	s := serve(t, "", &proctest.Buffer{}, buildTool(js.URL, false))
	c := dial(t, s.URL, client.Wire20260728)
	id := start(t, c, map[string]any{"ref": "main"})
	job := js.jobOf(t, id)
	js.hook(t, "/test/jobs/"+job+"/state", map[string]any{"state": "cancelled"})
	_, err := c.Wait(t.Context(), id, nil)
	st, gerr := c.Get(t.Context(), id)
	if gerr != nil || st.Status != "cancelled" || !strings.Contains(st.StatusMessage, "job "+job+" was cancelled") {
		t.Fatalf("a job cancelled in the job system: %+v, %v (wait: %v); want the task cancelled", st, gerr, err)
	}
}
