package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// ciConfig is the configuration of docs/adapters.md's worked example of a
// CI server (a JSON-RPC start, a numeric result, the build found by a
// lookup, a plain-text log with progress lines, the failure's reason in
// the build, a JSON-RPC cancel), against the job service's CI API.
func ciConfig(t *testing.T, js *jobSvc) string {
	return writeConfig(t, fmt.Sprintf(`demo: false
httpJobs:
  bb_build:
    description: Builds a branch on the CI
    inputSchema: {type: object, properties: {branch: {type: string, default: main}}}
    start:
      url: %[1]s/ci/forceschedulers/build
      headers: %[2]s
      body: {jsonrpc: "2.0", id: 1, method: force, params: {branch: "{branch}"}}
      jobId: /result/0
    status:
      url: "%[1]s/ci/buildrequests/{jobId}"
      headers: %[2]s
      state: /buildrequests/0/results
      working: [null]
      completed: [0]
      failed: [2]
      cancelled: [6]
    result: {pointer: /buildrequests/0}
    lookups:
      build:
        url: "%[1]s/ci/buildrequests/{jobId}/builds"
        headers: %[2]s
        capture: {buildId: /builds/0/buildid, buildNumber: /builds/0/number}
    log:
      url: "%[1]s/ci/builds/{buildId}/steps/work/logs/stdio/raw"
      headers: %[2]s
      progress: '^progress (\d+/\d+)'
    failure:
      url: "%[1]s/ci/builds/{buildId}"
      headers: %[2]s
      pointer: /builds/0/state_string
    cancel:
      url: "%[1]s/ci/buildrequests/{jobId}"
      headers: %[2]s
      body: {jsonrpc: "2.0", id: 1, method: cancel}
      ok: /result
    pollInterval: 20ms
`, js.URL, `{Authorization: "Bearer `+jobToken+`"}`))
}

// TestHTTPJobCIKillReattach: a build on the CI API survives kill -9 of
// mcptaskd: the restarted one re-attaches with the build it captured
// (not looked up again), reads the log on from where it was recorded
// (no line of the log lost, none repeated but those of the last
// LogRecordEvery), shows its progress, and the build ends once with its
// real outcome; the start was sent once. On both wires.
func TestHTTPJobCIKillReattach(t *testing.T) {
	js := startJobService(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	args := []string{"-config", ciConfig(t, js), "-poll-interval", "20ms"}
	d := startDaemon(t, "mcptaskd#1", db, args...)
	if out, err := exec.Command(daemonBin, "-check-config", ciConfig(t, js)).CombinedOutput(); err != nil {
		t.Fatalf("-check-config of the CI example: %v\n%s", err, out)
	}
	appendLog := func(job, text string) {
		t.Helper()
		resp, err := http.Post(js.URL+"/test/jobs/"+job+"/log", "text/plain", bytes.NewReader([]byte(text)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for i, w := range []string{client.Wire20260728, client.Wire20251125} {
		c, err := client.Dial(t.Context(), d.URL, &client.Options{ProtocolVersion: w})
		if err != nil {
			t.Fatal(err)
		}
		call, err := c.CallTool(t.Context(), "bb_build", map[string]any{})
		if err != nil || call.Task == nil {
			t.Fatalf("%s: bb_build: %+v, %v", w, call, err)
		}
		id, job := call.Task.ID, fmt.Sprintf("job-%d", i+1)
		appendLog(job, "compiling\nprogress 1/3\n")
		wc := d.client(true)
		waitTask(t, wc, id, 30*time.Second, "the log's progress", func(tk *wiretest.Task) bool { return tk.StatusMessage == "1/3" })
		c.Close()

		d.kill9()
		d = startDaemon(t, fmt.Sprintf("mcptaskd#%d", i+2), db, args...)
		c, err = client.Dial(t.Context(), d.URL, &client.Options{ProtocolVersion: w})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		appendLog(job, "linking\nprogress 3/3\n")
		wc = d.client(true)
		waitTask(t, wc, id, 30*time.Second, "the log's progress after the restart", func(tk *wiretest.Task) bool { return tk.StatusMessage == "3/3" })
		js.hook("/test/jobs/"+job+"/finish", map[string]any{})
		res, err := c.Wait(t.Context(), id, nil)
		if err != nil || res.IsError {
			t.Fatalf("%s: the build after the restart: %+v, %v", w, res, err)
		}
		page, err := c.ReadLog(t.Context(), id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var log strings.Builder
		for _, l := range page.Lines {
			log.WriteString(l.Text + "\n")
		}
		for _, want := range []string{"compiling\n", "progress 1/3\n", "linking\n", "progress 3/3\n", "re-attached to job"} {
			if !strings.Contains(log.String(), want) {
				t.Errorf("%s: the task's log lacks %q:\n%s", w, want, log.String())
			}
		}
		if n := strings.Count(log.String(), "captured buildId"); n != 1 {
			t.Errorf("%s: the build was captured %d times, want once (kept across the restart):\n%s", w, n, log.String())
		}
		if n := strings.Count(log.String(), "linking\n"); n != 1 {
			t.Errorf("%s: a line read after the restart shows %d times:\n%s", w, n, log.String())
		}
		if st := js.stats(); st.StartRequests != i+1 || st.Created != i+1 {
			t.Errorf("%s: %d force requests, %d builds; want %d each", w, st.StartRequests, st.Created, i+1)
		}
	}
}
