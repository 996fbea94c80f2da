package mcptask_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/pgtest"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store/postgres"
	"github.com/mcptask/mcptask/wire/events"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

type stageArgs struct {
	Stages []string `json:"stages"`
	Gate   string   `json:"gate,omitempty"`
}

// registerEventTools adds "ci", which emits one output per stage (its
// OutputSchema: {stage}), logs a published line, and waits at its gate
// (if any) before it completes.
func registerEventTools(ts *mcptask.Server, g *gates) {
	schema := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"stage": {Type: "string"}},
		Required: []string{"stage"}}
	mcptask.AddTool(ts, &mcp.Tool{Name: "ci", Description: "stages"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in stageArgs) (*mcp.CallToolResult, any, error) {
			tk := mcptask.FromContext(ctx)
			for _, s := range in.Stages {
				if err := tk.Emit(ctx, map[string]string{"stage": s}); err != nil {
					return nil, nil, err
				}
			}
			if err := tk.Emit(ctx, map[string]int{"nostage": 1}); err == nil {
				return nil, nil, errorString("Emit accepted a value against the schema")
			}
			if err := tk.Emit(ctx, map[string]string{"stage": strings.Repeat("x", 300<<10)}); err == nil {
				return nil, nil, errorString("Emit accepted 300 KiB")
			}
			tk.LogStream("stdout", "published line")
			tk.LogStream("stderr", "unpublished line")
			tk.FlushLog()
			if in.Gate != "" {
				select {
				case <-g.get(in.Gate):
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
			return text("built " + strings.Join(in.Stages, ",")), nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Optional, OutputSchema: schema, PublishLog: []string{"stdout"}})
}

type errorString string

func (e errorString) Error() string { return string(e) }

func eventsServer(t *testing.T, ev mcptask.Events, g *gates) *testServer {
	t.Helper()
	if eventsOnPostgres(t) {
		dsn := pgtest.DSN(t)
		st, err := postgres.Open(t.Context(), dsn, &postgres.Options{Schema: pgtest.Schema(t, dsn, "events_test_")})
		if err != nil {
			t.Fatal(err)
		}
		ps := servertest.Start(t, servertest.Options{Store: st, Tasks: mcptask.Options{Owner: userOwner, Events: ev},
			Register: func(ts *mcptask.Server) (func(), error) {
				registerEventTools(ts, g)
				registerTestTools(ts, g)
				return nil, nil
			}})
		return &testServer{url: ps.URL, eng: ps.Engine, ts: ps.Tasks}
	}
	s := startServerOpts(t, filepath.Join(t.TempDir(), "tasks.db"), mcptask.Options{Owner: userOwner, Events: ev},
		func(ts *mcptask.Server) { registerEventTools(ts, g); registerTestTools(ts, g) })
	t.Cleanup(s.close)
	return s
}

// eventsOnPostgres reports whether t runs under TestEventsPostgres.
func eventsOnPostgres(t *testing.T) bool {
	return strings.HasPrefix(t.Name(), "TestEventsPostgres/")
}

// TestEventsPostgres runs the end-to-end events tests on PostgreSQL.
func TestEventsPostgres(t *testing.T) {
	pgtest.DSN(t)
	for name, fn := range map[string]func(*testing.T){
		"PollOutputAndStatus": TestEventsPollOutputAndStatus,
		"StreamEndsWithTask":  TestEventsStreamEndsWithTask,
		"WebhookDelivery":     TestEventsWebhookDelivery,
		"DeadLetter":          TestEventsWebhookVerificationAndDeadLetter,
	} {
		t.Run(name, fn)
	}
}

func userClient(s *testServer, user string) *wiretest.Client {
	return &wiretest.Client{URL: s.url, Tasks: true, Events: true, Header: http.Header{"X-User": {user}}}
}

type createWithSource struct {
	TaskID      string                  `json:"taskId"`
	EventSource *events.TaskEventSource `json:"eventSource"`
}

func poll(t *testing.T, ctx context.Context, c *wiretest.Client, name string, args map[string]any, cursor *string) *events.PollResult {
	t.Helper()
	params := map[string]any{"name": name, "arguments": args, "cursor": cursor}
	var res events.PollResult
	if err := c.Result(ctx, events.MethodPoll, params, &res); err != nil {
		t.Fatalf("events/poll %s: %v", name, err)
	}
	return &res
}

func TestEventsPollOutputAndStatus(t *testing.T) {
	g := &gates{}
	s := eventsServer(t, mcptask.Events{}, g)
	ctx := ctxT(t)
	alice := userClient(s, "alice")

	// server/discover advertises Events both ways clients read it.
	var disc struct {
		Capabilities struct {
			Events     map[string]any `json:"events"`
			Extensions map[string]any `json:"extensions"`
		} `json:"capabilities"`
	}
	if err := alice.Result(ctx, "server/discover", nil, &disc); err != nil {
		t.Fatal(err)
	}
	if disc.Capabilities.Events == nil || disc.Capabilities.Extensions[events.ExtensionID] == nil {
		t.Fatalf("server/discover capabilities: %+v", disc.Capabilities)
	}

	// events/list names the task types and the tool's own.
	var list events.ListResult
	if err := alice.Result(ctx, events.MethodList, nil, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list.Events {
		names = append(names, e.Name)
	}
	if strings.Join(names, " ") != "task.status task.output ci.output" {
		t.Fatalf("events/list = %v", names)
	}

	// A status cursor from now, before the call.
	st := poll(t, ctx, alice, events.TypeStatus, nil, nil)
	if len(st.Events) != 0 || st.Cursor == nil {
		t.Fatalf("a poll from now: %+v", st)
	}

	var created createWithSource
	if err := alice.Result(ctx, "tools/call", map[string]any{"name": "ci", "arguments": map[string]any{"stages": []string{"build", "test"}, "gate": "ci1"}}, &created); err != nil {
		t.Fatal(err)
	}
	src := created.EventSource
	if src == nil || src.Name != "ci.output" || src.Input.TaskID != created.TaskID || src.InitialCursor == "" {
		t.Fatalf("eventSource = %+v", src)
	}
	// The outputs so far, from the initial cursor: both stages and the
	// published line, never the stderr one nor the refused value.
	var outs []events.OutputData
	cursor := &src.InitialCursor
	waitUntil(t, func() bool {
		p := poll(t, ctx, alice, src.Name, map[string]any{"taskId": src.Input.TaskID}, cursor)
		for _, e := range p.Events {
			var d events.OutputData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			if e.Name != "ci.output" || e.EventID == "" || e.Timestamp == "" {
				t.Fatalf("occurrence %+v", e)
			}
			outs = append(outs, d)
		}
		cursor = p.Cursor
		return len(outs) >= 3
	})
	if len(outs) != 3 || string(outs[0].Data) != `{"stage":"build"}` || string(outs[1].Data) != `{"stage":"test"}` ||
		outs[2].Text != "published line" || outs[2].Stream != "stdout" || outs[0].Stream != "emit" {
		t.Fatalf("outputs = %+v", outs)
	}
	// Bob sees none of it, and his lookup of alice's task is refused
	// silently.
	bob := userClient(s, "bob")
	zero := "e1.0.0"
	if p := poll(t, ctx, bob, events.TypeOutput, map[string]any{"taskId": created.TaskID}, &zero); len(p.Events) != 0 {
		t.Fatalf("bob read %d of alice's events", len(p.Events))
	}
	if p := poll(t, ctx, bob, events.TypeStatus, nil, &zero); len(p.Events) != 0 {
		t.Fatalf("bob read %d of alice's status events", len(p.Events))
	}

	close(g.get("ci1"))
	var done []events.StatusData
	waitUntil(t, func() bool {
		p := poll(t, ctx, alice, events.TypeStatus, map[string]any{"tool": "ci"}, st.Cursor)
		for _, e := range p.Events {
			var d events.StatusData
			_ = json.Unmarshal(e.Data, &d)
			done = append(done, d)
		}
		st.Cursor = p.Cursor
		return len(done) > 0 && done[len(done)-1].Status == "completed"
	})
	last := done[len(done)-1]
	if done[0].Status != "working" || last.Outcome != "ok" || !strings.Contains(string(last.Result), "built build,test") {
		t.Fatalf("status events = %+v", done)
	}
	// maxEvents pages; hasMore says so.
	p := poll(t, ctx, alice, events.TypeOutput, nil, &zero)
	if len(p.Events) != 3 {
		t.Fatalf("all outputs: %d", len(p.Events))
	}
	one := 1
	var paged events.PollResult
	if err := alice.Result(ctx, events.MethodPoll, map[string]any{"name": events.TypeOutput, "cursor": zero, "maxEvents": one}, &paged); err != nil {
		t.Fatal(err)
	}
	if len(paged.Events) != 1 || !paged.HasMore {
		t.Fatalf("maxEvents 1: %d events, hasMore %v", len(paged.Events), paged.HasMore)
	}
}

func TestEventsNoSourceWithoutCapability(t *testing.T) {
	g := &gates{}
	s := eventsServer(t, mcptask.Events{}, g)
	ctx := ctxT(t)
	c := userClient(s, "alice")
	c.Events = false
	var created createWithSource
	if err := c.Result(ctx, "tools/call", map[string]any{"name": "ci", "arguments": map[string]any{"stages": []string{"a"}}}, &created); err != nil {
		t.Fatal(err)
	}
	if created.EventSource != nil || created.TaskID == "" {
		t.Fatalf("an eventSource for a client without Events: %+v", created)
	}
}

func TestEventsBadInput(t *testing.T) {
	s := eventsServer(t, mcptask.Events{Webhooks: true}, &gates{})
	ctx := ctxT(t)
	alice := userClient(s, "alice")
	anon := userClient(s, "")
	secret := "whsec_" + strings.Repeat("QUJD", 8)
	for _, tc := range []struct {
		name   string
		c      *wiretest.Client
		method string
		params map[string]any
		code   int64
	}{
		{"unknown event", alice, events.MethodPoll, map[string]any{"name": "nope", "cursor": nil}, events.CodeNotFound},
		{"unknown tool output", alice, events.MethodPoll, map[string]any{"name": "work.output", "cursor": nil}, events.CodeNotFound},
		{"bad arguments", alice, events.MethodPoll, map[string]any{"name": "task.status", "arguments": map[string]any{"x": 1}, "cursor": nil}, -32602},
		{"bad task id", alice, events.MethodPoll, map[string]any{"name": "task.status", "arguments": map[string]any{"taskId": "../x"}, "cursor": nil}, -32602},
		{"bad cursor", alice, events.MethodPoll, map[string]any{"name": "task.status", "cursor": "zzz"}, -32602},
		{"negative maxAge", alice, events.MethodPoll, map[string]any{"name": "task.status", "cursor": "e1.0.0", "maxAgeMs": -1}, -32602},
		{"http callback", alice, events.MethodSubscribe, map[string]any{"name": "task.status", "delivery": map[string]any{"url": "http://hooks.example/x", "secret": secret}}, -32602},
		{"bad secret", alice, events.MethodSubscribe, map[string]any{"name": "task.status", "delivery": map[string]any{"url": "https://hooks.example/x", "secret": "whsec_short"}}, -32602},
		{"anonymous subscribe", anon, events.MethodSubscribe, map[string]any{"name": "task.status", "delivery": map[string]any{"url": "https://hooks.example/x", "secret": secret}}, events.CodeForbidden},
		{"other mode", alice, events.MethodSubscribe, map[string]any{"name": "task.status", "delivery": map[string]any{"mode": "push", "url": "https://hooks.example/x", "secret": secret}}, events.CodeUnsupported},
		{"private callback", alice, events.MethodSubscribe, map[string]any{"name": "task.status", "delivery": map[string]any{"url": "https://127.0.0.1:9/x", "secret": secret}}, events.CodeCallbackEndpoint},
		{"metadata callback", alice, events.MethodSubscribe, map[string]any{"name": "task.status", "delivery": map[string]any{"url": "https://169.254.169.254/latest", "secret": secret}}, events.CodeCallbackEndpoint},
		{"unsubscribe unknown", alice, events.MethodUnsubscribe, map[string]any{"name": "task.status", "delivery": map[string]any{"url": "https://hooks.example/x"}}, events.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := tc.c.Call(ctx, tc.method, tc.params, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Error == nil || resp.Error.Code != tc.code {
				t.Fatalf("%s: got %+v (result %s), want code %d", tc.name, resp.Error, resp.Result, tc.code)
			}
			if tc.code == events.CodeCallbackEndpoint && !strings.Contains(string(resp.Error.Data), "blocked_address") {
				t.Errorf("a private callback refused for %s, want blocked_address", resp.Error.Data)
			}
			if strings.Contains(resp.Error.Message, secret) || strings.Contains(resp.Error.Message, "whsec_short") {
				t.Errorf("the error repeats the secret: %s", resp.Error.Message)
			}
		})
	}
	// Webhooks off: Unsupported.
	off := eventsServer(t, mcptask.Events{}, &gates{})
	resp, err := userClient(off, "alice").Call(ctx, events.MethodSubscribe, map[string]any{"name": "task.status",
		"delivery": map[string]any{"url": "https://hooks.example/x", "secret": secret}}, nil)
	if err != nil || resp.Error == nil || resp.Error.Code != events.CodeUnsupported {
		t.Fatalf("webhooks off: %+v %v", resp, err)
	}
}

func TestEventsStreamEndsWithTask(t *testing.T) {
	g := &gates{}
	s := eventsServer(t, mcptask.Events{}, g)
	ctx := ctxT(t)
	alice := userClient(s, "alice")
	var created createWithSource
	if err := alice.Result(ctx, "tools/call", map[string]any{"name": "ci", "arguments": map[string]any{"stages": []string{"build"}, "gate": "s1"}}, &created); err != nil {
		t.Fatal(err)
	}
	src := created.EventSource
	st, err := alice.OpenStream(ctx, events.MethodStream, map[string]any{"name": src.Name, "arguments": src.Input, "cursor": src.InitialCursor})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got []string
	opened := false
	for m := range st.Messages {
		switch m.Method {
		case events.NotifyActive:
			opened = true
		case events.NotifyEvent:
			var occ events.Occurrence
			_ = json.Unmarshal(m.Params, &occ)
			var d events.OutputData
			_ = json.Unmarshal(occ.Data, &d)
			if occ.Cursor == nil {
				t.Errorf("a pushed event without its cursor")
			}
			var meta struct {
				Meta map[string]any `json:"_meta"`
			}
			_ = json.Unmarshal(m.Params, &meta)
			if meta.Meta[events.MetaSubscriptionID] == nil {
				t.Errorf("a pushed event without the stream's subscription ID")
			}
			got = append(got, string(d.Data)+d.Text)
			if len(got) == 2 {
				close(g.get("s1")) // the task ends: the stream must end too
			}
		case "":
			if m.Error != nil {
				t.Fatalf("stream refused: %+v", m.Error)
			}
		}
	}
	if !opened || len(got) != 2 || got[0] != `{"stage":"build"}` || got[1] != "published line" {
		t.Fatalf("stream: opened %v, events %v", opened, got)
	}
}

// hookReceiver is a webhook endpoint on loopback that verifies every
// delivery with the Standard Webhooks library, echoes verification
// challenges, and fails the first failFirst event deliveries with status.
type hookReceiver struct {
	t      *testing.T
	wh     *standardwebhooks.Webhook
	srv    *httptest.Server
	mu     sync.Mutex
	events []hookDelivery
	ids    map[string]int
	fail   int
	status int
	bad    int
}

type hookDelivery struct {
	ID, Sub string
	Occ     events.Occurrence
}

func newHookReceiver(t *testing.T, secret string, failFirst, status int) *hookReceiver {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	h := &hookReceiver{t: t, wh: wh, ids: map[string]int{}, fail: failFirst, status: status}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := h.wh.Verify(body, r.Header); err != nil || r.Header.Get("X-MCP-Subscription-Id") == "" {
		h.mu.Lock()
		h.bad++
		h.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var ctl events.ControlEnvelope
	if json.Unmarshal(body, &ctl) == nil && ctl.Type == "verification" {
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": ctl.Challenge})
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	id := r.Header.Get("webhook-id")
	h.ids[id]++
	if h.fail > 0 {
		h.fail--
		w.WriteHeader(h.status)
		return
	}
	var occ events.Occurrence
	_ = json.Unmarshal(body, &occ)
	if occ.EventID != id {
		h.t.Errorf("webhook-id %s is not the eventId %s", id, occ.EventID)
	}
	h.events = append(h.events, hookDelivery{ID: id, Sub: r.Header.Get("X-MCP-Subscription-Id"), Occ: occ})
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) received() []hookDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookDelivery(nil), h.events...)
}

func TestEventsWebhookDelivery(t *testing.T) {
	g := &gates{}
	s := eventsServer(t, mcptask.Events{Webhooks: true, AllowPrivateCallbacks: true, RetryBase: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond}, g)
	ctx := ctxT(t)
	alice := userClient(s, "alice")
	secret := "whsec_" + strings.Repeat("c2VjcmV0", 4)
	hook := newHookReceiver(t, secret, 2, http.StatusServiceUnavailable)

	var sub events.SubscribeResult
	params := map[string]any{"name": events.TypeStatus, "arguments": map[string]any{"tool": "work"},
		"delivery": map[string]any{"mode": "webhook", "url": hook.srv.URL + "/hook", "secret": secret}, "ttlMs": 600000}
	if err := alice.Result(ctx, events.MethodSubscribe, params, &sub); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sub.ID, "sub_") || sub.RefreshBefore == nil || sub.DeliveryStatus != nil {
		t.Fatalf("subscribe = %+v", sub)
	}
	until, err := time.Parse(time.RFC3339, *sub.RefreshBefore)
	if err != nil || until.After(time.Now().Add(11*time.Minute)) {
		t.Fatalf("refreshBefore %v beyond the 10 min asked", *sub.RefreshBefore)
	}
	task1, err := alice.CallTool(ctx, "work", map[string]any{"label": "w1"})
	if err != nil {
		t.Fatal(err)
	}
	// Another tool's task is not delivered (the subscription's tool).
	if _, err := alice.CallTool(ctx, "ci", map[string]any{"stages": []string{}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool {
		for _, d := range hook.received() {
			var sd events.StatusData
			_ = json.Unmarshal(d.Occ.Data, &sd)
			if sd.TaskID == task1.TaskID && sd.Status == "completed" {
				return true
			}
		}
		return false
	})
	hook.mu.Lock()
	retried := 0
	for _, n := range hook.ids {
		if n > 1 {
			retried++
		}
	}
	bad := hook.bad
	hook.mu.Unlock()
	if retried == 0 || bad != 0 {
		t.Fatalf("retries with the same webhook-id: %d; deliveries failing verification: %d", retried, bad)
	}
	for _, d := range hook.received() {
		var sd events.StatusData
		_ = json.Unmarshal(d.Occ.Data, &sd)
		if sd.Tool != "work" || d.Sub != sub.ID || d.Occ.Cursor == nil {
			t.Errorf("delivery %+v (data %+v)", d, sd)
		}
	}
	// A refresh keeps the ID and tells the delivery status.
	// (the receiver answered before the server recorded the delivery).
	var again events.SubscribeResult
	waitUntil(t, func() bool {
		if err := alice.Result(ctx, events.MethodSubscribe, params, &again); err != nil {
			t.Fatal(err)
		}
		return again.DeliveryStatus != nil && again.DeliveryStatus.LastDeliveryAt != nil
	})
	if again.ID != sub.ID || again.DeliveryStatus == nil || !again.DeliveryStatus.Active || again.DeliveryStatus.LastDeliveryAt == nil {
		t.Fatalf("refresh = %+v", again)
	}
	// Bob's subscription with the same key is another one, and bob
	// cannot remove alice's.
	bob := userClient(s, "bob")
	resp, err := bob.Call(ctx, events.MethodUnsubscribe, map[string]any{"name": events.TypeStatus, "arguments": map[string]any{"tool": "work"},
		"delivery": map[string]any{"url": hook.srv.URL + "/hook"}}, nil)
	if err != nil || resp.Error == nil || resp.Error.Code != events.CodeNotFound {
		t.Fatalf("bob's unsubscribe of alice's: %+v %v", resp, err)
	}
	if err := alice.Result(ctx, events.MethodUnsubscribe, map[string]any{"name": events.TypeStatus, "arguments": map[string]any{"tool": "work"},
		"delivery": map[string]any{"url": hook.srv.URL + "/hook"}}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestEventsWebhookVerificationAndDeadLetter(t *testing.T) {
	g := &gates{}
	s := eventsServer(t, mcptask.Events{Webhooks: true, AllowPrivateCallbacks: true, MaxAttempts: 2,
		RetryBase: 5 * time.Millisecond, RetryMax: 10 * time.Millisecond, MaxSubscriptions: 1}, g)
	ctx := ctxT(t)
	alice := userClient(s, "alice")
	secret := "whsec_" + strings.Repeat("c2VjcmV0", 4)

	// An endpoint that does not echo the challenge is refused.
	var deafPosts atomic.Int64
	deaf := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deafPosts.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer deaf.Close()
	for range 3 {
		resp, err := alice.Call(ctx, events.MethodSubscribe, map[string]any{"name": events.TypeStatus,
			"delivery": map[string]any{"url": deaf.URL, "secret": secret}}, nil)
		if err != nil || resp.Error == nil || resp.Error.Code != events.CodeCallbackEndpoint || !strings.Contains(string(resp.Error.Data), "challenge_failed") {
			t.Fatalf("a deaf endpoint: %+v %v", resp.Error, err)
		}
	}
	if n := deafPosts.Load(); n != 1 {
		t.Fatalf("the deaf endpoint got %d verification POSTs for 3 subscribes, want 1 (the failure is remembered)", n)
	}
	var resp *wiretest.Response
	var err error

	// An endpoint that answers 503 to every event: its budget spent,
	// dead letters, and the subscription suspended.
	hook := newHookReceiver(t, secret, 1000, http.StatusServiceUnavailable)
	params := map[string]any{"name": events.TypeStatus, "delivery": map[string]any{"url": hook.srv.URL, "secret": secret}}
	var sub events.SubscribeResult
	if err := alice.Result(ctx, events.MethodSubscribe, params, &sub); err != nil {
		t.Fatal(err)
	}
	// The cap: a second subscription is refused.
	resp, err = alice.Call(ctx, events.MethodSubscribe, map[string]any{"name": events.TypeOutput,
		"delivery": map[string]any{"url": hook.srv.URL, "secret": secret}}, nil)
	if err != nil || resp.Error == nil || resp.Error.Code != events.CodeResourceExhausted {
		t.Fatalf("beyond the cap: %+v %v", resp.Error, err)
	}
	if _, err := alice.CallTool(ctx, "work", map[string]any{"label": "x"}); err != nil {
		t.Fatal(err)
	}
	evs := s.eng.Events()
	waitUntil(t, func() bool {
		dls, err := evs.DeadLetters(ctx, 10)
		return err == nil && len(dls) > 0
	})
	dls, _ := evs.DeadLetters(ctx, 10)
	if dls[0].Attempts != 2 || dls[0].Error != "http_5xx" || dls[0].SubID != sub.ID {
		t.Fatalf("dead letter %+v", dls[0])
	}
	var refreshed events.SubscribeResult
	if err := alice.Result(ctx, events.MethodSubscribe, params, &refreshed); err != nil {
		t.Fatal(err)
	}
	if refreshed.DeliveryStatus == nil || refreshed.DeliveryStatus.Active || refreshed.DeliveryStatus.LastError == nil ||
		*refreshed.DeliveryStatus.LastError != "http_5xx" || refreshed.DeliveryStatus.FailedSince == nil {
		t.Fatalf("refresh after a dead letter: %+v", refreshed.DeliveryStatus)
	}
}

// waitUntil waits for cond, checking it every few milliseconds, or fails
// the test at its deadline.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 20 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestEventsStreamStdio serves events/stream on a stdio-like connection
// (Server.Run): the notifications name the stream's request ID, the
// stream ends with its task and with its result; initialize advertises
// Events.
func TestEventsStreamStdio(t *testing.T) {
	g := &gates{}
	s := startRaw2025Tools(t, mcptask.Options{}, func(ts *mcptask.Server) { registerEventTools(ts, g) }, nil)
	tk := s.callTask(t, "ci", map[string]any{"stages": []string{"lint"}, "gate": "st"}, nil)
	done := make(chan error, 1)
	go func() {
		done <- s.call(events.MethodStream, map[string]any{"name": events.TypeOutput, "arguments": map[string]any{"taskId": tk.TaskID},
			"cursor": "e1.0.0"}, nil)
	}()
	var got []string
	waitUntil(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		got = got[:0]
		for _, n := range s.notes {
			if n.Method != events.NotifyEvent {
				continue
			}
			var p struct {
				Data events.OutputData `json:"data"`
				Meta map[string]any    `json:"_meta"`
			}
			_ = json.Unmarshal(n.Params, &p)
			if p.Meta[events.MetaSubscriptionID] == nil {
				t.Errorf("an event without the stream's request ID: %s", n.Params)
			}
			got = append(got, string(p.Data.Data)+p.Data.Text)
		}
		return len(got) == 2
	})
	if got[0] != `{"stage":"lint"}` || got[1] != "published line" {
		t.Fatalf("events %v", got)
	}
	close(g.get("st"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the stream ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stream did not end with its task")
	}
}

// TestEventsRequestRate: events/* requests count against the requester's
// request rate, as tasks/* ones do.
func TestEventsRequestRate(t *testing.T) {
	g := &gates{}
	s := startServerOpts(t, filepath.Join(t.TempDir(), "tasks.db"), mcptask.Options{Owner: userOwner,
		Limits: mcptask.Limits{RequestRate: 0.001, RequestBurst: 3}},
		func(ts *mcptask.Server) { registerEventTools(ts, g) })
	t.Cleanup(s.close)
	ctx := ctxT(t)
	alice := userClient(s, "alice")
	limited := 0
	for range 6 {
		resp, err := alice.Call(ctx, events.MethodPoll, map[string]any{"name": events.TypeStatus, "cursor": nil}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Error != nil {
			limited++
		}
	}
	if limited != 3 {
		t.Fatalf("%d of 6 polls refused, want 3 (a burst of 3)", limited)
	}
	// Another requester has a rate of its own.
	if resp, err := userClient(s, "bob").Call(ctx, events.MethodPoll, map[string]any{"name": events.TypeStatus, "cursor": nil}, nil); err != nil || resp.Error != nil {
		t.Fatalf("bob: %+v %v", resp, err)
	}
}
