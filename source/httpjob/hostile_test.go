package httpjob_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/mcptask/mcptask/source/httpjob"
)

const apiKey = "key-0a1b2c3d4e5f-secret"

// seen is a request a fake job API received.
type seen struct {
	Method, URI    string
	Auth, APIKey   string
	IdempotencyKey string
}

// fakeAPI is a job API on loopback HTTP that records what it receives
// (the raw request URI: nothing normalised) and answers with answer.
type fakeAPI struct {
	URL string
	mu  sync.Mutex
	got []seen
}

func newFakeAPI(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *fakeAPI {
	t.Helper()
	f := &fakeAPI{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		f.mu.Lock()
		f.got = append(f.got, seen{r.Method, r.RequestURI, r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), r.Header.Get("Idempotency-Key")})
		f.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(hs.Close)
	f.URL = hs.URL
	return f
}

func (f *fakeAPI) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.got...)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// secretTool is a tool of the API at base whose every request carries
// the secret headers Authorization and X-Api-Key.
func secretTool(base string) httpjob.Tool {
	h := map[string]string{"Authorization": "Bearer " + token, "X-Api-Key": apiKey}
	return httpjob.Tool{
		Name: "build",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"name": map[string]any{"type": "string"}, "id": map[string]any{"type": "string"}}},
		Start:        httpjob.Start{Request: httpjob.Request{URL: base + "/m/{name}/jobs", Headers: h, Body: map[string]any{"id": "{id}"}}, JobID: "/id"},
		Status:       httpjob.Status{Request: httpjob.Request{URL: base + "/jobs/{jobId}", Headers: h}, State: "/state", Message: "/progress", Error: "/error", Working: []string{"running"}, Completed: []string{"succeeded"}, Failed: []string{"failed"}},
		Result:       httpjob.Result{Pointer: "/output"},
		PollInterval: 20 * time.Millisecond,
		Support:      mcptask.Optional,
	}
}

// taskError runs the tool build with args as a task and returns the
// message it failed with (the test fails if it did not).
func taskError(t *testing.T, c *client.Client, args map[string]any) string {
	t.Helper()
	id := start(t, c, args)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := c.Wait(ctx, id, nil)
	var te *client.TaskError
	if !errors.As(err, &te) {
		t.Fatalf("task %s with %v: %q (isError %v), %v; want it failed", id, args, text(res), res != nil && res.IsError, err)
	}
	return te.Message
}

func noSecrets(t *testing.T, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(s, token) || strings.Contains(s, apiKey) {
			t.Errorf("a secret shows: %s", s)
		}
	}
}

// TestRedirectToAnotherOrigin: a job API that redirects a request (the
// start with 307, the status with 302) to another origin (another port on
// the same loopback host) gets the task failed saying so; the other
// origin receives nothing, so neither the configured headers nor the
// request reach it, and its answer never becomes the job's. A redirect
// within the job API's origin is followed.
func TestRedirectToAnotherOrigin(t *testing.T) {
	other := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"id": "stolen", "state": "succeeded", "output": "the other origin's answer"})
	})
	var api *fakeAPI
	api = newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/m/away/jobs":
			http.Redirect(w, r, other.URL+"/jobs", http.StatusTemporaryRedirect)
		case r.Method == http.MethodPost && r.URL.Path == "/m/moved/jobs":
			http.Redirect(w, r, api.URL+"/m/here/jobs", http.StatusTemporaryRedirect) // same origin
		case r.Method == http.MethodPost:
			writeJSON(w, map[string]any{"id": r.URL.Path[len("/m/") : len(r.URL.Path)-len("/jobs")]})
		case r.URL.Path == "/jobs/here":
			writeJSON(w, map[string]any{"state": "succeeded", "output": "done here"})
		default:
			http.Redirect(w, r, other.URL+"/status", http.StatusFound)
		}
	})
	logs := &proctest.Buffer{}
	s := serve(t, "", logs, secretTool(api.URL))
	c := dial(t, s.URL, client.Wire20260728)

	startErr := taskError(t, c, map[string]any{"name": "away"})
	statusErr := taskError(t, c, map[string]any{"name": "status-elsewhere"})
	for _, msg := range []string{startErr, statusErr} {
		if !strings.Contains(msg, "redirected") || !strings.Contains(msg, "another origin ("+other.URL+")") {
			t.Errorf("task error %q; want it to say the job API redirected to another origin (%s)", msg, other.URL)
		}
	}
	if !strings.Contains(startErr, "starting the job") || !strings.Contains(statusErr, "reading the job's status") {
		t.Errorf("errors %q and %q: want them to say which request was redirected", startErr, statusErr)
	}
	if got := other.requests(); len(got) != 0 {
		t.Errorf("the other origin received %+v; want nothing", got)
	}
	noSecrets(t, startErr, statusErr, logs.String())

	id := start(t, c, map[string]any{"name": "moved"})
	if res, err := c.Wait(t.Context(), id, nil); err != nil || text(res) != "done here" {
		t.Fatalf("a redirect within the origin: %q, %v; want it followed", text(res), err)
	}
}

// TestDotSegmentsRefused: an argument or a job ID that would fill a whole
// path segment with ".", ".." or nothing is refused before anything is
// sent (a server resolving /m/../jobs would serve another endpoint); a
// value holding "/" and ".." is one escaped segment, sent as it is (Go's
// client normalises nothing).
func TestDotSegmentsRefused(t *testing.T) {
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			writeJSON(w, map[string]any{"id": "j1"})
			return
		}
		writeJSON(w, map[string]any{"state": "succeeded", "output": "ok"})
	})
	s := serve(t, "", &proctest.Buffer{}, secretTool(api.URL))
	c := dial(t, s.URL, client.Wire20260728)
	for _, name := range []string{"..", ".", ""} {
		msg := taskError(t, c, map[string]any{"name": name})
		if !strings.Contains(msg, `the argument name is "`+name+`"`) || !strings.Contains(msg, "path segment") {
			t.Errorf("name %q: task error %q; want it to refuse the argument as a path segment", name, msg)
		}
	}
	if got := api.requests(); len(got) != 0 {
		t.Fatalf("the job API received %+v; want nothing for dot segments", got)
	}

	id := start(t, c, map[string]any{"name": "a/../b"})
	if res, err := c.Wait(t.Context(), id, nil); err != nil || text(res) != "ok" {
		t.Fatalf("name a/../b: %q, %v; want the job's result", text(res), err)
	}
	got := api.requests()
	if len(got) == 0 || got[0].URI != "/m/a%2F..%2Fb/jobs" {
		t.Fatalf("the job API received %+v; want POST /m/a%%2F..%%2Fb/jobs, unnormalised", got)
	}
}

// TestJobIDDotSegmentRefused: a job ID of ".." (the job API's answer)
// never goes out as a path segment of the status request.
func TestJobIDDotSegmentRefused(t *testing.T) {
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			writeJSON(w, map[string]any{"id": strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/m/"), "/jobs")[len("id-"):]})
			return
		}
		writeJSON(w, map[string]any{"state": "succeeded", "output": "ok"})
	})
	s := serve(t, "", &proctest.Buffer{}, secretTool(api.URL))
	c := dial(t, s.URL, client.Wire20260728)
	for _, id := range []string{"..", "."} {
		msg := taskError(t, c, map[string]any{"name": "id-" + id})
		if !strings.Contains(msg, `the job ID is "`+id+`"`) || !strings.Contains(msg, "path segment") {
			t.Errorf("job ID %q: task error %q; want it to refuse the job ID as a path segment", id, msg)
		}
	}
	for _, r := range api.requests() {
		if r.Method != http.MethodPost {
			t.Errorf("the job API received %s %s; want no status request", r.Method, r.URI)
		}
	}
}

// TestAnswerTooLarge: a status answer over MaxAnswer fails the task at
// once, naming the limit; it is not retried.
func TestAnswerTooLarge(t *testing.T) {
	big := `{"state":"running","pad":"` + strings.Repeat("x", httpjob.MaxAnswer) + `"}`
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			writeJSON(w, map[string]any{"id": "j1"})
			return
		}
		_, _ = io.WriteString(w, big)
	})
	s := serve(t, "", &proctest.Buffer{}, secretTool(api.URL))
	c := dial(t, s.URL, client.Wire20260728)
	msg := taskError(t, c, map[string]any{"name": "x"})
	if !strings.Contains(msg, "larger than the limit of 4 MiB") || !strings.Contains(msg, "reading the job's status") {
		t.Errorf("task error %q; want it to name the limit", msg)
	}
	gets := 0
	for _, r := range api.requests() {
		if r.Method == http.MethodGet {
			gets++
		}
	}
	if gets != 1 {
		t.Errorf("%d status requests; want 1 (not retried)", gets)
	}
}

// TestResultScrubbed: the configured secrets never reach a job's result
// (its text or structured content), its status message or its error,
// even when the job API echoes them.
func TestResultScrubbed(t *testing.T) {
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			writeJSON(w, map[string]any{"id": strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/m/"), "/jobs")})
			return
		}
		if strings.HasSuffix(r.URL.Path, "/fails") {
			writeJSON(w, map[string]any{"state": "failed", "error": "bad key " + apiKey})
			return
		}
		writeJSON(w, map[string]any{"state": "succeeded", "progress": "using " + token,
			"output": map[string]any{"echo": r.Header.Get("Authorization"), "list": []any{"k=" + r.Header.Get("X-Api-Key"), 1},
				apiKey: "as a key"}})
	})
	s := serve(t, "", &proctest.Buffer{}, secretTool(api.URL))
	c := dial(t, s.URL, client.Wire20260728)
	id := start(t, c, map[string]any{"name": "ok"})
	res, err := c.Wait(t.Context(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	st, err := c.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	noSecrets(t, text(res), string(sc), st.StatusMessage)
	if !strings.Contains(text(res), "[redacted]") || !strings.Contains(string(sc), `"echo":"[redacted]"`) {
		t.Errorf("result %q, structured %s; want the secrets replaced by [redacted]", text(res), sc)
	}

	id = start(t, c, map[string]any{"name": "fails"})
	res, err = c.Wait(t.Context(), id, nil)
	if err != nil || !res.IsError {
		t.Fatalf("failed job: %+v, %v", res, err)
	}
	sc, _ = json.Marshal(res.StructuredContent)
	noSecrets(t, text(res), string(sc))
}
