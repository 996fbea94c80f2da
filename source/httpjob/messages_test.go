package httpjob_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/jobservice"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/wire"
)

// operationOf reads the operation tasks/get shows for task id.
func operationOf(t *testing.T, url, id string) wire.Operation {
	t.Helper()
	var r struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	c := &wiretest.Client{URL: url + "/mcp", Tasks: true}
	if err := c.Result(t.Context(), "tasks/get", map[string]any{"taskId": id}, &r); err != nil {
		t.Fatal(err)
	}
	var op wire.Operation
	if err := json.Unmarshal(r.Meta[wire.MetaOperation], &op); err != nil {
		t.Fatalf("tasks/get _meta %v: %v", r.Meta, err)
	}
	return op
}

// logText is the whole log of task id.
func logText(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	page, err := c.ReadLog(t.Context(), id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range page.Lines {
		b.WriteString(l.Text + "\n")
	}
	return b.String()
}

// TestMessagesLogsLedger: what a user sees of an HTTP job besides its
// result. An outage of the job API is written to the task's log and its
// text leaves the status message once the API answers again; the final
// status message says how the job ended; a start refused with 4xx leaves
// the operation rejected (nothing started), a job that completed leaves
// it confirmed.
func TestMessagesLogsLedger(t *testing.T) {
	svc, err := jobservice.Open(filepath.Join(t.TempDir(), "jobs.json"), token)
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() && !strings.HasPrefix(r.URL.Path, "/test/") {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		svc.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	js := &jobs{svc: svc, URL: hs.URL}
	tool := buildTool(js.URL, false)
	tool.Status.Message = "" // no progress from the job: the messages are mcptask's
	s := serve(t, "", &proctest.Buffer{}, tool)

	for _, w := range []string{client.Wire20260728, client.Wire20251125} {
		t.Run(w, func(t *testing.T) {
			c := dial(t, s.URL, w)
			id := start(t, c, map[string]any{"ref": "main"})
			job := js.jobOf(t, id)
			waitStatus(t, c, id, "started", func(st *client.TaskStatus) bool { return st.StatusMessage == "job "+job+" started" })

			down.Store(true)
			waitStatus(t, c, id, "in an outage", func(st *client.TaskStatus) bool {
				return strings.HasPrefix(st.StatusMessage, "the job API failed")
			})
			down.Store(false)
			waitStatus(t, c, id, "back from the outage", func(st *client.TaskStatus) bool { return st.StatusMessage == "job "+job+" started" })

			js.hook(t, "/test/jobs/"+job+"/finish", map[string]any{"ok": true})
			if _, err := c.Wait(t.Context(), id, nil); err != nil {
				t.Fatal(err)
			}
			st, err := c.Get(t.Context(), id)
			if err != nil || st.StatusMessage != "job "+job+" completed" {
				t.Errorf("the completed task's status message: %+v, %v; want %q", st, err, "job "+job+" completed")
			}
			log := logText(t, c, id)
			for _, want := range []string{"job " + job + " started", "the job API failed reading the job's status (attempt 1): HTTP 503",
				"the job API answers again reading the job's status", "job " + job + " completed"} {
				if !strings.Contains(log, want) {
					t.Errorf("the task's log lacks %q:\n%s", want, log)
				}
			}
			if op := operationOf(t, s.URL, id); op.State != "confirmed" || op.Receipt != job {
				t.Errorf("operation of the completed job: %+v", op)
			}

			// Refused at start: nothing started, the operation rejected.
			id = start(t, c, map[string]any{"ref": "x", "reject": "no runner for x"})
			if _, err := c.Wait(t.Context(), id, nil); err == nil {
				t.Fatal("a refused start succeeded")
			}
			if op := operationOf(t, s.URL, id); op.State != "rejected" || op.Receipt != "" {
				t.Errorf("operation of a refused start: %+v; want rejected, no receipt", op)
			}
			if log := logText(t, c, id); !strings.Contains(log, "the job API refused to start the job: HTTP 422: no runner for x") {
				t.Errorf("the refused start's log:\n%s", log)
			}
		})
	}
}
