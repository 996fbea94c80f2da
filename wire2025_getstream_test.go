package mcptask_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// Test2025InputOnStandaloneStream: a 2025-11-25 client that only polls
// tasks/get (as the TypeScript SDK v2 with ext-tasks does: it calls
// tasks/result once the task is terminal) gets the task's questions on
// its session's standalone GET stream, with the related-task _meta; its
// answers reach the task. A question asked on a stream that closes before
// the answer is asked again on the next stream, once; a question is never
// asked twice while unanswered; a tasks/result opened meanwhile does not
// ask it again.
func Test2025InputOnStandaloneStream(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), &gates{})
	ctx := ctxT(t)
	sess := &wiretest.Session{URL: s.url}
	if _, err := sess.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	question := func(msgs <-chan wiretest.Message) wiretest.Message {
		t.Helper()
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					t.Fatal("the GET stream ended before a question")
				}
				if m.Method == "elicitation/create" {
					return m
				}
			case <-ctx.Done():
				t.Fatal("no question on the GET stream")
			}
		}
	}
	message := func(m wiretest.Message) string {
		t.Helper()
		var p struct {
			Message string                       `json:"message"`
			Meta    map[string]map[string]string `json:"_meta"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			t.Fatal(err)
		}
		return p.Message + "|" + p.Meta["io.modelcontextprotocol/related-task"]["taskId"]
	}

	// The first stream: the question arrives, and the stream is closed
	// before it is answered.
	ctx1, close1 := context.WithCancel(ctx)
	if st, msgs, err := sess.Stream(ctx1); err != nil || st != 200 {
		t.Fatalf("GET stream: HTTP %d, %v", st, err)
	} else {
		id := startTask25(t, ctx, sess, "ask", nil)
		if got := message(question(msgs)); got != "question 0|"+id {
			t.Fatalf("first question = %q", got)
		}
		close1()
		for range msgs {
		}

		// The second stream gets it again; it is answered there, then
		// the next question comes.
		ctx2, close2 := context.WithCancel(ctx)
		defer close2()
		// The go-sdk answers 409 until it has seen the first stream
		// close: a client reconnects until it is let in.
		var msgs2 <-chan wiretest.Message
		for {
			st, m, err := sess.Stream(ctx2)
			if err != nil {
				t.Fatal(err)
			}
			if st == 200 {
				msgs2 = m
				break
			}
			for range m {
			}
			if st != 409 || ctx.Err() != nil {
				t.Fatalf("second GET stream: HTTP %d", st)
			}
		}
		q := question(msgs2)
		if got := message(q); got != "question 0|"+id {
			t.Fatalf("question on the second stream = %q", got)
		}
		// A tasks/result opened while the question is asked on the GET
		// stream does not ask it again.
		rctx, rcancel := context.WithCancel(ctx)
		defer rcancel()
		results, err := sess.CallStream(rctx, "tasks/result", map[string]any{"taskId": id})
		if err != nil {
			t.Fatal(err)
		}
		if err := sess.Respond(ctx, q.ID, map[string]any{"action": "accept", "content": map[string]any{"ok": true}}); err != nil {
			t.Fatal(err)
		}
		// The second question goes to one stream only: the tasks/result
		// stream now waits on the task, and asks it there.
		var q1 wiretest.Message
		for q1.Method != "elicitation/create" {
			select {
			case m := <-results:
				if m.Method != "elicitation/create" && m.Method != "notifications/tasks/status" {
					t.Fatalf("tasks/result stream: %s %s, want the second question", m.Method, m.Params)
				}
				q1 = m
			case m := <-msgs2:
				if m.Method == "elicitation/create" {
					t.Fatalf("GET stream while a tasks/result waits: %s", m.Params)
				}
			case <-ctx.Done():
				t.Fatal("no second question")
			}
		}
		if got := message(q1); got != "question 1|"+id {
			t.Fatalf("second question = %q", got)
		}
		if err := sess.Respond(ctx, q1.ID, map[string]any{"action": "accept", "content": map[string]any{"ok": false}}); err != nil {
			t.Fatal(err)
		}
		var final wiretest.Message
		for m := range results {
			if m.Method == "elicitation/create" {
				t.Fatalf("asked again on tasks/result: %s", m.Params)
			}
			if m.Result != nil || m.Error != nil {
				final = m
			}
		}
		if final.Result == nil || !strings.Contains(string(final.Result), "accept:true,accept:false") {
			t.Fatalf("tasks/result = %s %+v", final.Result, final.Error)
		}
		// Nothing more came on the GET stream: each question once.
		close2()
		for m := range msgs2 {
			if m.Method == "elicitation/create" {
				t.Fatalf("asked twice: %s", m.Params)
			}
		}
	}
}

// streamSession starts a server, a 2025-11-25 session of it and the
// session's standalone GET stream, and returns the test's context, the
// session and the stream's messages.
func streamSession(t *testing.T) (context.Context, *wiretest.Session, <-chan wiretest.Message) {
	t.Helper()
	s := startServer(t, filepath.Join(t.TempDir(), "tasks.db"), &gates{})
	ctx := ctxT(t)
	sess := &wiretest.Session{URL: s.url}
	if _, err := sess.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	st, msgs, err := sess.Stream(sctx)
	if err != nil || st != 200 {
		t.Fatalf("GET stream: HTTP %d, %v", st, err)
	}
	return ctx, sess, msgs
}

// Test2025InputOnStandaloneStreamPollOnly: with no tasks/result at all,
// both questions are asked on the GET stream and answered there, and the
// task completes.
func Test2025InputOnStandaloneStreamPollOnly(t *testing.T) {
	ctx, sess, msgs := streamSession(t)
	id := startTask25(t, ctx, sess, "ask", nil)
	for i, ok := range []bool{true, true} {
		var q wiretest.Message
		for q.Method != "elicitation/create" {
			select {
			case q = <-msgs:
			case <-ctx.Done():
				t.Fatalf("question %d never asked", i)
			}
		}
		if err := sess.Respond(ctx, q.ID, map[string]any{"action": "accept", "content": map[string]any{"ok": ok}}); err != nil {
			t.Fatal(err)
		}
	}
	waitAnswer25(t, ctx, sess, id, `"completed"`)
	raw, err := sess.Call(ctx, "tasks/result", map[string]any{"taskId": id})
	if err != nil || !strings.Contains(string(raw), "accept:true,accept:true") {
		t.Fatalf("tasks/result = %s, %v", raw, err)
	}
}

// Test2025InputOnConnectionPollOnly: on a connection of Serve (stdio), a
// client that only polls tasks/get is asked the task's questions on the
// connection, each once, with the related-task _meta.
func Test2025InputOnConnectionPollOnly(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	s := startRaw2025(t, func(r *jsonrpc.Request) (any, error) {
		var p struct {
			Message string                       `json:"message"`
			Meta    map[string]map[string]string `json:"_meta"`
		}
		_ = json.Unmarshal(r.Params, &p)
		mu.Lock()
		asked = append(asked, p.Message+"|"+p.Meta["io.modelcontextprotocol/related-task"]["taskId"])
		mu.Unlock()
		return map[string]any{"action": "decline"}, nil
	})
	tk := s.callTask(t, "ask", nil, nil)
	s.waitStatus(t, tk.TaskID, "completed")
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := s.call("tasks/result", map[string]any{"taskId": tk.TaskID}, &res); err != nil || len(res.Content) != 1 || res.Content[0].Text != "decline:<nil>,decline:<nil>" {
		t.Fatalf("tasks/result = %+v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"question 0|" + tk.TaskID, "question 1|" + tk.TaskID}; fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Fatalf("asked %v, want %v", asked, want)
	}
}

// Test2025InputWaitsUntilTheTaskIsKnown: a question asked at once (the
// "ask" tool asks before anything else) does not go on the session's GET
// stream before the client can know the task: the TypeScript SDK v2 with
// ext-tasks 0.2.2, reading the GET stream and the tools/call answer at
// once, answered such a question "cancel" for the user when it came
// first (seen in CI, about 1 run in 15 locally), and dropped a status
// notification that came first. Both wait for a tasks/get naming the
// task, or 100 ms after the creation; then the client is told the state
// and asked, once.
func Test2025InputWaitsUntilTheTaskIsKnown(t *testing.T) {
	ctx, sess, msgs := streamSession(t)
	// statuses records the status notifications before each question.
	var statuses []string
	question := func(id string) wiretest.Message {
		t.Helper()
		for {
			select {
			case m := <-msgs:
				if m.Method == "notifications/tasks/status" {
					var st struct{ TaskID, Status string }
					if err := json.Unmarshal(m.Params, &st); err != nil {
						t.Fatalf("status notification %s: %v", m.Params, err)
					}
					if st.TaskID == id {
						statuses = append(statuses, st.Status)
					}
				}
				if m.Method != "elicitation/create" {
					continue
				}
				if !strings.Contains(string(m.Params), id) {
					t.Fatalf("a question of another task: %s", m.Params)
				}
				return m
			case <-ctx.Done():
				t.Fatalf("task %s: no question on the GET stream", id)
			}
		}
	}
	answer := func(q wiretest.Message) {
		t.Helper()
		if err := sess.Respond(ctx, q.ID, map[string]any{"action": "accept", "content": map[string]any{"ok": true}}); err != nil {
			t.Fatal(err)
		}
	}

	// A client that never reads the task: told and asked after the grace
	// (a lower bound, measured from before the call was sent), the
	// input_required first.
	sent := time.Now()
	id := startTask25(t, ctx, sess, "ask", nil)
	q := question(id)
	if waited := time.Since(sent); waited < 100*time.Millisecond {
		t.Fatalf("the question came %v after the call was sent, before the client could be known to have the task", waited)
	}
	if fmt.Sprint(statuses) != "[input_required]" {
		t.Fatalf("status notifications before the question: %v, want [input_required] after the grace", statuses)
	}
	answer(q)
	answer(question(id)) // the second question: the task is known by now
	waitAnswer25(t, ctx, sess, id, `"completed"`)

	// A client that reads the task: its tasks/get lets the question go.
	id = startTask25(t, ctx, sess, "ask", nil)
	if _, err := sess.Call(ctx, "tasks/get", map[string]any{"taskId": id}); err != nil {
		t.Fatal(err)
	}
	answer(question(id))
	answer(question(id))
	waitAnswer25(t, ctx, sess, id, `"completed"`)
}
