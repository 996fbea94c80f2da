package client

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestLiftTaskRequest(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"name":"x","_meta":{"` + metaTaskRequest + `":{"ttl":60000}}}`, `{"name":"x","task":{"ttl":60000}}`},
		{`{"name":"x","_meta":{"keep":1,"` + metaTaskRequest + `":{}}}`, `{"_meta":{"keep":1},"name":"x","task":{}}`},
	} {
		got, ok := liftTaskRequest(json.RawMessage(tc.in))
		if !ok || !sameJSON(t, got, tc.want) {
			t.Errorf("liftTaskRequest(%s) = %s, %v; want %s", tc.in, got, ok, tc.want)
		}
	}
	if _, ok := liftTaskRequest(json.RawMessage(`{"name":"x","_meta":{"other":1}}`)); ok {
		t.Error("lifted without a task request")
	}
}

func sameJSON(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func TestEdgeRewritesOnlyTrackedTaskHandles(t *testing.T) {
	e := newEdge()
	id, _ := jsonrpc.MakeID(float64(7))
	other, _ := jsonrpc.MakeID(float64(8))
	handle := `{"resultType":"task","taskId":"t1","status":"working","createdAt":"","lastUpdatedAt":"","ttlMs":1000}`
	// Not tracked: left alone.
	if _, changed := e.incoming(&jsonrpc.Response{ID: other, Result: json.RawMessage(handle)}); changed {
		t.Fatal("rewrote the answer to an untracked call")
	}
	e.outgoing(&jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"x"}`)})
	if !e.expecting() {
		t.Fatal("not expecting the tracked answer")
	}
	out, changed := e.incoming(&jsonrpc.Response{ID: id, Result: json.RawMessage(handle)})
	if !changed {
		t.Fatal("the task handle was not rewritten")
	}
	var r struct {
		Content []any                      `json:"content"`
		Meta    map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(out.Result, &r); err != nil || r.Content == nil || string(r.Meta[metaTaskHandle]) != handle {
		t.Fatalf("rewritten %s: %v", out.Result, err)
	}
	if e.expecting() {
		t.Fatal("still expecting an answered call")
	}
	// 2025-11-25 handles; plain results stay as they are.
	for _, tc := range []struct {
		result string
		handle bool
	}{
		{`{"task":{"taskId":"t","status":"working"}}`, true},
		{`{"content":[{"type":"text","text":"a task"}]}`, false},
		{`{"content":[],"structuredContent":{"task":{"x":1}}}`, false},
		{`{"resultType":"complete","content":[]}`, false},
	} {
		if _, ok := wrapTaskHandle(json.RawMessage(tc.result)); ok != tc.handle {
			t.Errorf("wrapTaskHandle(%s) = %v", tc.result, ok)
		}
	}
}

func TestSSERewriter(t *testing.T) {
	in := "event: message\r\nid: 1\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n" +
		": comment\n\n" +
		"data: keep\n\n" +
		"data: unfinished"
	rewrite := func(b []byte) []byte {
		if string(b) == "{\"a\":\n1}" {
			return []byte(`{"a":2}`)
		}
		return b
	}
	r := &sseRewriter{src: newBufReader(in), closer: io.NopCloser(nil), rewrite: rewrite}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	want := "event: message\r\nid: 1\r\ndata: {\"a\":2}\n\r\n" +
		": comment\n\n" +
		"data: keep\n\n" +
		"data: unfinished"
	if string(got) != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// TestSSERewriterTakesStatusNotes: the edge's rewriter takes a
// notifications/tasks/status out of an event stream (the go-sdk never sees
// it) and hands it to the waits of its task; the other events pass.
func TestSSERewriterTakesStatusNotes(t *testing.T) {
	e := newEdge()
	slot := e.hub.subscribe("t1")
	note := `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t1","status":"working"}}`
	in := "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n" +
		"id: 7\ndata: " + note + "\n\n" +
		"data: keep\n\n"
	r := &sseRewriter{src: newBufReader(in), closer: io.NopCloser(nil), rewrite: e.streamRewrite(false)}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	want := "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n" + "data: keep\n\n"
	if string(got) != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if raw := slot.take(); !strings.Contains(string(raw), `"status":"working"`) {
		t.Fatalf("the wait got %s", raw)
	}
}

func TestPollDelay(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond, 100 * time.Millisecond, time.Hour} {
		base := d
		if base == 0 {
			base = defaultPoll
		}
		for range 1000 {
			got := pollDelay(d)
			lo := max(time.Duration(float64(base)*(1-jitter)), minPoll)
			hi := max(time.Duration(float64(base)*(1+jitter)), minPoll)
			if got < lo || got > hi {
				t.Fatalf("pollDelay(%v) = %v, want within [%v, %v]", d, got, lo, hi)
			}
		}
	}
}

func TestJournalConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "journal.json")
	// Two journals on one file stand for two processes.
	var js [2]*journal
	for i := range js {
		j, err := openJournal(path)
		if err != nil {
			t.Fatal(err)
		}
		js[i] = j
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			j := js[i%2]
			e := JournalEntry{TaskID: fmt.Sprintf("t%d", i), Target: "srv", Wire: Wire20260728, Tool: "x", CreatedAt: time.Now().UTC()}
			if err := j.add(e); err != nil {
				t.Error(err)
				return
			}
			if i%4 == 0 {
				if err := j.remove("srv", e.TaskID); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	es, err := js[0].pending("srv")
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 30 {
		t.Fatalf("%d entries, want 30: %+v", len(es), es)
	}
	for _, e := range es {
		var n int
		fmt.Sscanf(e.TaskID, "t%d", &n)
		if n%4 == 0 {
			t.Errorf("removed entry %s is back", e.TaskID)
		}
	}
	if other, _ := js[1].pending("elsewhere"); len(other) != 0 {
		t.Errorf("entries of another target: %+v", other)
	}
	// No temporary files are left behind.
	files, _ := os.ReadDir(filepath.Dir(path))
	for _, f := range files {
		if strings.Contains(f.Name(), ".tmp-") {
			t.Errorf("left behind %s", f.Name())
		}
	}
}

func TestJournalEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.json")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := openJournal(path)
	if err != nil {
		t.Fatalf("an empty file is an empty journal: %v", err)
	}
	if err := j.add(JournalEntry{TaskID: "a", Target: "b"}); err != nil {
		t.Fatal(err)
	}
	es, err := j.pending("b")
	if err != nil || len(es) != 1 {
		t.Fatalf("%+v %v", es, err)
	}
}

func newBufReader(s string) *bufio.Reader { return bufio.NewReader(strings.NewReader(s)) }

// TestNotFoundOnlyWhenSaid: a -32602 answer is "no such task" only when
// its message says so; the server's other -32602 answers (an answer that
// does not fit its question) keep their words.
func TestNotFoundOnlyWhenSaid(t *testing.T) {
	for msg, want := range map[string]bool{
		`task "abc" not found: it does not exist or has expired`: true,
		"Task not found":    true,
		"Unknown task: abc": true,
		`inputResponses["input-1"]: the content does not match the requested schema: want boolean; nothing was stored, and the task still waits for an answer`: false,
		"invalid cursor: pass the nextCursor of a previous tasks/list unchanged":                                                                               false,
	} {
		err := fmt.Errorf("tasks/update: %w", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg})
		if got := isNotFound(err); got != want {
			t.Errorf("isNotFound(%q) = %v, want %v", msg, got, want)
		}
	}
	if isNotFound(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "task not found"}) {
		t.Error("a -32603 is taken for not found")
	}
}
