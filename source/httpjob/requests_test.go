package httpjob_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/mcptask/mcptask/source/httpjob"
)

// TestFullRequests: a cancel that is a JSON-RPC POST with a body (JSON,
// or text), as CI servers want it, and a start whose omitted arguments
// take their schema defaults (an argument with no default is left out,
// not sent as null).
func TestFullRequests(t *testing.T) {
	js := newJobs(t)
	auth := map[string]string{"Authorization": "Bearer " + token}
	rpc := func(name string, cancel httpjob.Request) httpjob.Tool {
		tool := buildTool(js.URL, false)
		tool.Name = name
		tool.InputSchema = map[string]any{"type": "object", "properties": map[string]any{
			"ref":  map[string]any{"type": "string"},
			"mode": map[string]any{"type": "string", "default": "fast"},
			"jobs": map[string]any{"type": "integer", "default": 4},
			"opt":  map[string]any{"type": "string"}}}
		tool.Start.Body = map[string]any{"ref": "{ref}", "mode": "{mode}", "jobs": "{jobs}", "opt": "{opt}", "list": []any{"{opt}"}}
		cancel.URL, cancel.Headers = js.URL+"/rpc", auth
		tool.Cancel = httpjob.Cancel{Request: cancel}
		return tool
	}
	jsonCancel := rpc("build_rpc", httpjob.Request{
		Body: map[string]any{"jsonrpc": "2.0", "id": 1, "method": "cancel", "params": map[string]any{"id": "{jobId}"}}})
	textCancel := rpc("build_rpc_text", httpjob.Request{
		BodyText: `{"jsonrpc":"2.0","id":"c-{jobId}","method":"cancel","params":{"id":"{jobId}"}}`})
	s := serve(t, "", &proctest.Buffer{}, jsonCancel, textCancel)
	c := dial(t, s.URL, client.Wire20260728)

	for _, tc := range []struct{ tool, contentType string }{
		{"build_rpc", "application/json"}, {"build_rpc_text", "text/plain; charset=utf-8"},
	} {
		call, err := c.CallTool(t.Context(), tc.tool, map[string]any{"ref": "main", "jobs": 2})
		if err != nil || call.Task == nil {
			t.Fatalf("%s: %+v, %v", tc.tool, call, err)
		}
		job := js.jobOf(t, call.Task.ID)
		var params map[string]any
		_ = json.Unmarshal(js.svc.Stats().Jobs[job].Params, &params)
		if params["ref"] != "main" || params["mode"] != "fast" || params["jobs"] != float64(2) {
			t.Errorf("%s: the start's body %v: want ref main, mode fast (the default), jobs 2 (given)", tc.tool, params)
		}
		if _, sent := params["opt"]; sent {
			t.Errorf("%s: the omitted argument opt (no default) was sent: %v", tc.tool, params)
		}
		if l, _ := params["list"].([]any); len(l) != 1 || l[0] != nil {
			t.Errorf("%s: in a list an omitted argument is null; got %v", tc.tool, params["list"])
		}
		if _, err := c.Cancel(t.Context(), call.Task.ID); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for js.svc.Stats().Jobs[job].State != "cancelled" {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the JSON-RPC cancel did not cancel the job: %+v", tc.tool, js.svc.Stats().Jobs[job])
			}
			time.Sleep(5 * time.Millisecond) // polling the service, not timing the test
		}
		if got := js.svc.Stats().RPCContentType; got != tc.contentType {
			t.Errorf("%s: the cancel's Content-Type %q, want %q", tc.tool, got, tc.contentType)
		}
	}
}

// TestRequestChecks: a body and a text body at once, and a placeholder
// of a body naming no argument, are problems of the tool.
func TestRequestChecks(t *testing.T) {
	tool := buildTool("http://127.0.0.1:1", false)
	tool.Cancel.Body = map[string]any{"id": "{jobId}"}
	tool.Cancel.BodyText = "{jobId}"
	tool.Status.BodyText = "{nope}"
	want := map[string]bool{"cancel.bodyText": false, "status.bodyText": false}
	for _, p := range tool.Check() {
		if _, ok := want[p.Field]; ok {
			want[p.Field] = true
		}
	}
	for f, seen := range want {
		if !seen {
			t.Errorf("Check named no problem of %s: %v", f, tool.Check())
		}
	}
}
