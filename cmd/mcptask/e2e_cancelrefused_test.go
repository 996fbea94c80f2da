package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/internal/testkit/jobservice"
)

// TestCancelRefusedCLI: 'mcptask cancel' of a task whose job API refuses
// the cancel (a CI server wants a JSON-RPC body; this tool sends none)
// prints the job API's reason and exits 2; the task goes on, 'mcptask
// status' shows why, and the job's real outcome ends it.
func TestCancelRefusedCLI(t *testing.T) {
	svc, err := jobservice.Open(filepath.Join(t.TempDir(), "jobs.json"), "")
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(svc.Handler())
	t.Cleanup(hs.Close)
	cfg := filepath.Join(t.TempDir(), "mcptaskd.yaml")
	if err := os.WriteFile(cfg, []byte(`demo: false
httpJobs:
  build:
    inputSchema: {type: object, properties: {ref: {type: string}}}
    start: {url: "`+hs.URL+`/jobs", body: {ref: "{ref}"}, jobId: /id}
    status:
      url: "`+hs.URL+`/jobs/{jobId}"
      state: /state
      working: [running]
      completed: [succeeded]
      cancelled: [cancelled]
    result: {pointer: /output}
    cancel: {url: "`+hs.URL+`/rpc"}
    links: {job: "`+hs.URL+`/jobs/{jobId}"}
    pollInterval: 20ms
`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "-config", cfg)
	c := newCLI(t, d.URL)
	r := c.run("call", "--detach", "build", "ref=main")
	expect(t, r, exitOK, nil, nil)
	id := strings.TrimSpace(r.Stdout)
	if fields := strings.Fields(id); len(fields) > 0 {
		id = fields[len(fields)-1]
	}
	job := svc.Stats().JobOf("mcptask-" + id)
	if job == "" {
		t.Fatalf("no job for task %q (stdout %q)", id, r.Stdout)
	}

	r = c.run("cancel", id)
	expect(t, r, exitFailed, nil, []string{"task " + id + " was not cancelled: the job API refused the cancel of job " + job + ": HTTP 400: not a JSON-RPC 2.0 request; it goes on"})
	if strings.Contains(r.Stderr, "refused the call of") {
		t.Errorf("a refused cancel is told as a refused call:\n%s", r)
	}
	r = c.run("status", id)
	expect(t, r, exitOK, []string{"working", "cancel refused: the job API refused the cancel", "link:     job " + hs.URL + "/jobs/" + job}, nil)

	body, _ := json.Marshal(map[string]any{"artifact": "main.tgz"})
	resp, err := http.Post(hs.URL+"/test/jobs/"+job+"/finish", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r = c.run("wait", id)
	expect(t, r, exitOK, []string{"main.tgz"}, nil)
}
