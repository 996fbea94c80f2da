package mcpgo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// The mcp-go v1.2.1 client against mcptaskd (its demo tools, and the
// mcp-go upstream behind its gateway for sampling), over Streamable HTTP
// and stdio, on the two wires a host gets from the client's public API:
// the default (it probes server/discover and speaks the 2026-07-28 core,
// without the tasks extension) and 2025-11-25 (WithProtocolVersion), the
// only one on which it has task methods that work.
//
// Each flow asserts what the client does, including what it cannot do: a
// flow the client cannot do passes when it fails the way README.md says.

// pollIntervalMs is mcptaskd's default suggested poll interval.
const pollIntervalMs = 500

// rig opens mcp-go clients on one transport.
type rig struct {
	name string
	// dial opens a client on wire: over HTTP a new session of the one
	// mcptaskd; over stdio a new mcptaskd -stdio process on the SQLite
	// file db (flows give each process its own file, but the resume
	// flows, which reopen the same one).
	dial func(t *testing.T, wire, db string, h *host, opts ...mcpclient.ClientOption) *mcpclient.Client
	// polls records the tasks/get requests of the clients made with
	// dial, for the poll-interval flow.
	polls *pollLog
	// url is mcptaskd's endpoint over HTTP ("" over stdio).
	url string
}

func TestClient(t *testing.T) {
	cfg := writeConfig(t, map[string]any{"demo": true, "mcpServers": map[string]any{
		"up": map[string]any{"command": upstreamBin, "prefix": "up_"}}})
	d := startDaemon(t, filepath.Join(t.TempDir(), "tasks.db"), "-config", cfg)

	httpPolls, stdioPolls := &pollLog{}, &pollLog{}
	rigs := []rig{{
		name: "http", polls: httpPolls, url: d.URL,
		dial: func(t *testing.T, wire, _ string, h *host, opts ...mcpclient.ClientOption) *mcpclient.Client {
			tr, err := transport.NewStreamableHTTP(d.URL, transport.WithHTTPBasicClient(&http.Client{Transport: httpPolls}))
			if err != nil {
				t.Fatal(err)
			}
			return connect(t, tr, wire, h, opts...)
		},
	}, {
		name: "stdio", polls: stdioPolls,
		dial: func(t *testing.T, wire, db string, h *host, opts ...mcpclient.ClientOption) *mcpclient.Client {
			args := append([]string{"-stdio", "-db", db, "-config", cfg}, daemonFlags...)
			return connect(t, &stdioRecorder{Interface: transport.NewStdio(daemonBin, nil, args...), polls: stdioPolls}, wire, h, opts...)
		},
	}}
	for _, r := range rigs {
		t.Run(r.name, func(t *testing.T) {
			t.Run(wire2025, func(t *testing.T) { flows2025(t, r) })
			t.Run("2026-07-28", func(t *testing.T) { flows2026(t, r) })
		})
	}
}

// flows2025 drives the experimental tasks of 2025-11-25.
func flows2025(t *testing.T, r rig) {
	dial := func(t *testing.T, h *host, opts ...mcpclient.ClientOption) (*mcpclient.Client, string) {
		db := filepath.Join(t.TempDir(), "tasks.db")
		return r.dial(t, wire2025, db, h, opts...), db
	}

	t.Run("immediate call", func(t *testing.T) {
		c, _ := dial(t, nil)
		res, err := c.CallTool(t.Context(), callReq("echo", map[string]any{"text": "hi"}, false))
		if err != nil || textOf(res.Content) != "hi" || res.IsError {
			t.Fatalf("echo: %+v, %v", res, err)
		}
	})

	t.Run("CallTool with params.task cannot read CreateTaskResult", func(t *testing.T) {
		// The task is created (and runs); the client's CallTool parses
		// every answer as a CallToolResult and rejects this one.
		c, _ := dial(t, nil)
		before := listTasks(t, c)
		_, err := c.CallTool(t.Context(), callReq("long_computation", map[string]any{"n": 100, "steps": 1}, true))
		if err == nil || !strings.Contains(err.Error(), "content is missing") {
			t.Fatalf("CallTool with a task: %v; want mcp-go's %q", err, "content is missing")
		}
		if after := listTasks(t, c); len(after) != len(before)+1 {
			t.Errorf("tasks/list after the CallTool: %d tasks, before %d; want the task created all the same", len(after), len(before))
		}
	})

	t.Run("task to completion with status messages", func(t *testing.T) {
		c, _ := dial(t, nil)
		task := createTask(t, c, "long_computation", map[string]any{"n": 20000, "steps": 8, "step_delay_ms": 400}, 60000)
		if task.Status != mcp.TaskStatusWorking || task.PollInterval == nil || *task.PollInterval != pollIntervalMs || task.TTL == nil || *task.TTL != 60000 {
			t.Errorf("the created task: %+v", task)
		}
		last, messages := pollUntil(t, c, task.TaskId, terminal)
		if last.Status != mcp.TaskStatusCompleted {
			t.Fatalf("status %s (%s)", last.Status, last.StatusMessage)
		}
		// Polled every 500 ms, 8 steps of 400 ms: two steps at least.
		steps := 0
		for _, m := range messages {
			if strings.Contains(m, " of 8") {
				steps++
			}
		}
		if steps < 2 {
			t.Errorf("status messages seen while polling: %q; want two steps at least", messages)
		}
		res, err := c.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}})
		if err != nil || !strings.Contains(textOf(res.Content), "2262 primes") {
			t.Fatalf("tasks/result: %+v, %v", res, err)
		}
		if rt := relatedTask(res.Meta); rt != task.TaskId {
			t.Errorf("tasks/result related-task _meta: %q, want %q", rt, task.TaskId)
		}
	})

	t.Run("input accepted", func(t *testing.T) {
		h := &host{}
		c, _ := dial(t, h)
		task := createTask(t, c, "deploy_with_confirmation", map[string]any{"service": "web", "version": "1.2", "build_steps": 1, "step_delay_ms": 10}, 0)
		pollUntil(t, c, task.TaskId, func(g *mcp.GetTaskResult) bool {
			return g.Status == mcp.TaskStatusInputRequired || g.Status.IsTerminal()
		})
		// WaitForTask only polls tasks/get. mcptaskd delivers the
		// question on a tasks/result stream: WaitForTask then waits while
		// the task waits. (Should mcptaskd also send it outside
		// tasks/result, issue 26 item 2, the client answers it there and
		// WaitForTask sees the end: both are checked.)
		wctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		got, err := c.WaitForTask(wctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: task.TaskId}}, time.Second)
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			if n := len(h.questions()); n != 0 {
				t.Errorf("asked %d times while WaitForTask polled", n)
			}
			res, err := c.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}})
			if err != nil || !strings.Contains(textOf(res.Content), "Deployed web@") {
				t.Fatalf("tasks/result after accepting: %+v, %v", res, err)
			}
		case err == nil && got.Status == mcp.TaskStatusCompleted:
			t.Logf("the question reached the client outside tasks/result")
		default:
			t.Fatalf("WaitForTask of a task waiting for input: %+v, %v", got, err)
		}
		q := h.questions()
		if len(q) != 1 || !strings.Contains(q[0], "Roll it out") {
			t.Errorf("questions: %q; want the confirmation, once", q)
		}
		if rt, _ := h.meta()[mcp.RelatedTaskMetaKey].(map[string]any); rt["taskId"] != task.TaskId {
			t.Errorf("the elicitation's related-task _meta: %v", h.meta())
		}
	})

	t.Run("input with a standalone GET stream", func(t *testing.T) {
		// WithContinuousListening: the client keeps the session's GET
		// stream open and answers the server's requests on it. Whether
		// the question comes there (issue 26 item 2) or only during
		// tasks/result, it is asked once.
		if r.url == "" {
			t.Skip("SKIPPED: HTTP only (stdio has no GET stream: the connection is the stream)")
		}
		tr, err := transport.NewStreamableHTTP(r.url, transport.WithContinuousListening())
		if err != nil {
			t.Fatal(err)
		}
		h := &host{}
		c := connect(t, tr, wire2025, h)
		task := createTask(t, c, "deploy_with_confirmation", map[string]any{"service": "web", "version": "1.4", "build_steps": 1, "step_delay_ms": 10}, 0)
		wctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		got, err := c.WaitForTask(wctx, getReq(task.TaskId), time.Second)
		cancel()
		switch {
		case err == nil && got.Status == mcp.TaskStatusCompleted:
			t.Logf("the question came on the GET stream")
		case errors.Is(err, context.DeadlineExceeded):
			t.Logf("the question did not come on the GET stream")
		default:
			t.Fatalf("WaitForTask: %+v, %v", got, err)
		}
		res, err := c.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}})
		if err != nil || !strings.Contains(textOf(res.Content), "Deployed web@1.4") {
			t.Fatalf("tasks/result: %+v, %v", res, err)
		}
		if q := h.questions(); len(q) != 1 {
			t.Errorf("asked %d times: %q; want once", len(q), q)
		}
	})

	t.Run("input declined", func(t *testing.T) {
		h := &host{decline: true}
		c, _ := dial(t, h)
		task := createTask(t, c, "deploy_with_confirmation", map[string]any{"service": "web", "version": "1.3", "build_steps": 1, "step_delay_ms": 10}, 0)
		res, err := c.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}})
		if err != nil || !strings.Contains(textOf(res.Content), "declined") {
			t.Fatalf("tasks/result after declining: %+v, %v", res, err)
		}
		if len(h.questions()) != 1 {
			t.Errorf("questions: %q", h.questions())
		}
	})

	t.Run("sampling", func(t *testing.T) {
		// The mcp-go upstream's sampling request, behind the gateway,
		// is our task's input: the host's sampling handler answers it
		// during tasks/result.
		h := &host{}
		c, _ := dial(t, h)
		task := createTask(t, c, "up_sample", map[string]any{"prompt": "six times seven?"}, 0)
		res, err := c.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}})
		if err != nil || !strings.Contains(textOf(res.Content), "the sampled answer: 42 (model test-model-7)") {
			t.Fatalf("tasks/result of the sampling task: %+v, %v", res, err)
		}
		if h.samples() != 1 {
			t.Errorf("sampled %d times, want once", h.samples())
		}
	})

	t.Run("cancel mid-way", func(t *testing.T) {
		c, _ := dial(t, nil)
		task := createTask(t, c, "long_computation", map[string]any{"n": 20000, "steps": 50, "step_delay_ms": 200}, 0)
		pollUntil(t, c, task.TaskId, func(g *mcp.GetTaskResult) bool {
			return g.Status == mcp.TaskStatusWorking && strings.Contains(g.StatusMessage, " of 50")
		})
		cres, err := c.CancelTask(t.Context(), mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: task.TaskId}})
		if err != nil || cres.Status != mcp.TaskStatusCancelled {
			t.Fatalf("tasks/cancel: %+v, %v", cres, err)
		}
		g := getTask(t, c, task.TaskId)
		if g.Status != mcp.TaskStatusCancelled {
			t.Errorf("after the cancel: %s", g.Status)
		}
		_, err = c.CancelTask(t.Context(), mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: task.TaskId}})
		if rpcCode(err) != mcp.INVALID_PARAMS {
			t.Errorf("a second cancel: %v; want -32602", err)
		}
	})

	t.Run("resume by task ID from a new client", func(t *testing.T) {
		// HTTP: a new session of the same mcptaskd. stdio: a new
		// mcptaskd process on the same SQLite file, after the first one
		// exited with the task running: the task (3 s) outlasts the
		// shutdown grace (2 s), is handed back, and the new process
		// re-runs it (long_computation is re-runnable).
		c, db := dial(t, nil)
		task := createTask(t, c, "long_computation", map[string]any{"n": 20000, "steps": 6, "step_delay_ms": 500}, 0)
		_ = c.Close()
		c2 := r.dial(t, wire2025, db, nil)
		got, err := c2.WaitForTask(t.Context(), mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: task.TaskId}}, time.Second)
		if err != nil || got.Status != mcp.TaskStatusCompleted {
			t.Fatalf("WaitForTask from the new client: %+v, %v", got, err)
		}
		res, err := c2.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}})
		if err != nil || !strings.Contains(textOf(res.Content), "2262 primes") {
			t.Fatalf("tasks/result from the new client: %+v, %v", res, err)
		}
	})

	t.Run("session closed with an unfinished task", func(t *testing.T) {
		// A task waiting for input when its client closes (HTTP: DELETE
		// of the session; stdio: stdin closed, mcptaskd exits). The host
		// does not answer (should the question reach it outside
		// tasks/result, its answer waits for the end of the test).
		c, db := dial(t, &host{hold: holdUntilEnd(t)})
		task := createTask(t, c, "deploy_with_confirmation", map[string]any{"service": "web", "version": "2", "build_steps": 1, "step_delay_ms": 10}, 0)
		pollUntil(t, c, task.TaskId, status(mcp.TaskStatusInputRequired))
		_ = c.Close()
		c2 := r.dial(t, wire2025, db, &host{})
		g := getTask(t, c2, task.TaskId)
		t.Logf("after the close: %s (%s)", g.Status, g.StatusMessage)
		switch r.name {
		case "http":
			// The task outlives its session: a new one answers it.
			if g.Status != mcp.TaskStatusInputRequired {
				t.Fatalf("after the session's DELETE: %s (%s); want it still waiting", g.Status, g.StatusMessage)
			}
			res, err := c2.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}})
			if err != nil || !strings.Contains(textOf(res.Content), "Deployed web@") {
				t.Fatalf("answered from the new session: %+v, %v", res, err)
			}
		case "stdio":
			// The process ended with it: not re-runnable, it failed.
			if g.Status != mcp.TaskStatusFailed {
				t.Fatalf("after the process ended: %s (%s); want failed", g.Status, g.StatusMessage)
			}
		}
	})

	t.Run("failed task", func(t *testing.T) {
		c, _ := dial(t, nil)
		task := createTask(t, c, "flaky_migration", map[string]any{"steps": 3, "fail_at_step": 2, "step_delay_ms": 10}, 0)
		last, _ := pollUntil(t, c, task.TaskId, terminal)
		if last.Status != mcp.TaskStatusFailed {
			t.Fatalf("status %s", last.Status)
		}
		_, err := c.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}})
		if rpcCode(err) != mcp.INTERNAL_ERROR || !strings.Contains(err.Error(), "lock wait timeout") {
			t.Fatalf("tasks/result of the failed task: %v; want its -32603", err)
		}
	})

	t.Run("isError result", func(t *testing.T) {
		c, _ := dial(t, nil)
		task := createTask(t, c, "lint_report", map[string]any{}, 0)
		last, _ := pollUntil(t, c, task.TaskId, terminal)
		// 2025-11-25: a tool result with isError is the task's failure.
		if last.Status != mcp.TaskStatusFailed {
			t.Errorf("status %s; want failed (2025-11-25 shows isError as failed)", last.Status)
		}
		res, err := c.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}})
		if err != nil || !res.IsError || len(res.Content) == 0 {
			t.Fatalf("tasks/result: %+v, %v; want the CallToolResult with isError", res, err)
		}
	})

	t.Run("unknown tool and unknown task", func(t *testing.T) {
		c, _ := dial(t, nil)
		if _, err := c.CallTool(t.Context(), callReq("no_such_tool", nil, false)); rpcCode(err) != mcp.INVALID_PARAMS {
			t.Errorf("unknown tool: %v; want -32602", err)
		}
		// As a task, an unknown tool is one without task support (the
		// 2025-11-25 text: -32601).
		if _, err := sendCreate(t, c, "no_such_tool", nil, 0); rpcCode(err) != mcp.METHOD_NOT_FOUND {
			t.Errorf("unknown tool as a task: %v; want -32601", err)
		}
		for name, call := range map[string]func() error{
			"tasks/get": func() error { _, err := c.GetTask(t.Context(), getReq("no-such-task")); return err },
			"tasks/result": func() error {
				_, err := c.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: "no-such-task"}})
				return err
			},
			"tasks/cancel": func() error {
				_, err := c.CancelTask(t.Context(), mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: "no-such-task"}})
				return err
			},
		} {
			if err := call(); rpcCode(err) != mcp.INVALID_PARAMS {
				t.Errorf("%s of an unknown task: %v; want -32602", name, err)
			}
		}
	})

	t.Run("poll interval honoured", func(t *testing.T) {
		c, _ := dial(t, nil)
		task := createTask(t, c, "long_computation", map[string]any{"n": 20000, "steps": 8, "step_delay_ms": 250}, 0)
		r.polls.follow(task.TaskId)
		got, err := c.WaitForTask(t.Context(), getReq(task.TaskId), 50*time.Millisecond)
		if err != nil || got.Status != mcp.TaskStatusCompleted {
			t.Fatalf("WaitForTask: %+v, %v", got, err)
		}
		gaps := r.polls.gaps(task.TaskId)
		if len(gaps) < 2 {
			t.Fatalf("tasks/get gaps: %v; want several polls", gaps)
		}
		for _, g := range gaps {
			if g < pollIntervalMs*time.Millisecond {
				t.Errorf("a poll %v after the previous one; want at least the %d ms the server suggested", g, pollIntervalMs)
			}
		}
		t.Logf("WaitForTask's tasks/get gaps: %v (fallback 50 ms, server's %d ms)", gaps, pollIntervalMs)
	})
}

// flows2026 drives the default client: the 2026-07-28 core, which it
// negotiates through server/discover, with no tasks extension.
func flows2026(t *testing.T, r rig) {
	dial := func(t *testing.T, h *host, opts ...mcpclient.ClientOption) *mcpclient.Client {
		c := r.dial(t, wireDefault, filepath.Join(t.TempDir(), "tasks.db"), h, opts...)
		if v := c.ProtocolVersion(); v != mcp.ProtocolVersion20260728 {
			t.Fatalf("negotiated %q, want 2026-07-28", v)
		}
		return c
	}
	// withExtension declares the tasks extension, as a host may through
	// the client's capabilities.
	withExtension := mcpclient.WithClientCapabilities(mcp.ClientCapabilities{Extensions: map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}})

	t.Run("immediate call", func(t *testing.T) {
		c := dial(t, nil)
		res, err := c.CallTool(t.Context(), callReq("echo", map[string]any{"text": "hi"}, false))
		if err != nil || textOf(res.Content) != "hi" || res.ResultType != mcp.ResultTypeComplete {
			t.Fatalf("echo: %+v, %v", res, err)
		}
	})

	t.Run("task: without the extension an optional tool runs synchronously", func(t *testing.T) {
		c := dial(t, nil)
		res, err := c.CallTool(t.Context(), callReq("long_computation", map[string]any{"n": 20000, "steps": 2, "step_delay_ms": 10}, true))
		if err != nil || !strings.Contains(textOf(res.Content), "2262 primes") {
			t.Fatalf("long_computation: %+v, %v; want its result at once", res, err)
		}
	})

	t.Run("task: with the extension declared CallTool cannot read the task", func(t *testing.T) {
		c := dial(t, nil, withExtension)
		_, err := c.CallTool(t.Context(), callReq("long_computation", map[string]any{"n": 100, "steps": 1}, false))
		if err == nil || !strings.Contains(err.Error(), "content is missing") {
			t.Fatalf("CallTool answered with a task: %v; want mcp-go's %q", err, "content is missing")
		}
	})

	t.Run("input: a task-required tool is refused -32021", func(t *testing.T) {
		c := dial(t, &host{})
		_, err := c.CallTool(t.Context(), callReq("deploy_with_confirmation", map[string]any{"service": "web", "version": "1"}, false))
		var mc mcp.MissingRequiredClientCapabilityError
		if !errors.As(err, &mc) {
			t.Fatalf("deploy_with_confirmation: %v; want -32021", err)
		}
		// mcp-go reads data.capability; the extension's -32021 names it
		// in data.requiredCapabilities, so the host learns nothing of
		// what is missing (and loses the message).
		if mc.Capability != "" {
			t.Errorf("mcp-go read the missing capability as %q", mc.Capability)
		}
	})

	t.Run("sampling: refused in a plain call", func(t *testing.T) {
		// Without a task, the gateway has no input_required to carry
		// the upstream's sampling request (and mcptaskd's 2026-07-28
		// plain calls send no inputRequests).
		h := &host{}
		c := dial(t, h)
		_, err := c.CallTool(t.Context(), callReq("up_sample", map[string]any{"prompt": "six times seven?"}, false))
		if err == nil || !strings.Contains(err.Error(), "does not run as a task") || h.samples() != 0 {
			t.Fatalf("up_sample as a plain call: %v (sampled %d); want the gateway's refusal", err, h.samples())
		}
	})

	t.Run("tasks/get (resume, poll, cancel by ID)", func(t *testing.T) {
		// tasks/get is what resuming, polling and (with tasks/cancel)
		// cancelling need on this wire. mcp-go sets Mcp-Name only for
		// tools/call, prompts/get and resources/read: over HTTP mcptaskd
		// refuses every tasks/* request (Mcp-Name MUST equal
		// params.taskId); over stdio (no headers) a declaring client
		// gets the answer.
		for _, declared := range []bool{false, true} {
			var opts []mcpclient.ClientOption
			if declared {
				opts = append(opts, withExtension)
			}
			c := dial(t, nil, opts...)
			_, err := c.GetTask(t.Context(), getReq("no-such-task"))
			var hm mcp.HeaderMismatchError
			switch {
			case r.name == "http":
				if !errors.As(err, &hm) {
					t.Errorf("tasks/get over HTTP (extension declared: %v): %v; want the Mcp-Name refusal", declared, err)
				}
			case declared:
				if rpcCode(err) != mcp.INVALID_PARAMS {
					t.Errorf("tasks/get of an unknown task over stdio: %v; want -32602", err)
				}
			default:
				if rpcCode(err) != mcp.MISSING_REQUIRED_CLIENT_CAPABILITY {
					t.Errorf("tasks/get over stdio without the extension: %v; want -32021", err)
				}
			}
		}
	})

	t.Run("failed call", func(t *testing.T) {
		c := dial(t, nil)
		_, err := c.CallTool(t.Context(), callReq("flaky_migration", map[string]any{"steps": 2, "fail_at_step": 1, "step_delay_ms": 1}, false))
		if rpcCode(err) != mcp.INTERNAL_ERROR || !strings.Contains(err.Error(), "lock wait timeout") {
			t.Fatalf("flaky_migration: %v; want its -32603", err)
		}
	})

	t.Run("isError result", func(t *testing.T) {
		c := dial(t, nil)
		res, err := c.CallTool(t.Context(), callReq("lint_report", map[string]any{}, false))
		if err != nil || !res.IsError {
			t.Fatalf("lint_report: %+v, %v; want isError", res, err)
		}
	})

	t.Run("unknown tool", func(t *testing.T) {
		c := dial(t, nil)
		_, err := c.CallTool(t.Context(), callReq("no_such_tool", nil, false))
		if rpcCode(err) != mcp.INVALID_PARAMS {
			t.Errorf("unknown tool: %v; want -32602", err)
		}
	})
}

func callReq(name string, args map[string]any, task bool) mcp.CallToolRequest {
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name}}
	if args != nil {
		req.Params.Arguments = args
	}
	if task {
		req.Params.Task = &mcp.TaskParams{}
	}
	return req
}

func getReq(id string) mcp.GetTaskRequest {
	return mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}}
}

// rawIDs numbers the requests sent past the client (createTask), far from
// the client's own IDs.
var rawIDs atomic.Int64

func init() { rawIDs.Store(1 << 40) }

// sendCreate sends a task-augmented tools/call through the client's
// transport (the client's CallTool cannot read its answer) and decodes
// the CreateTaskResult.
func sendCreate(t *testing.T, c *mcpclient.Client, name string, args map[string]any, ttl int64) (*mcp.Task, error) {
	t.Helper()
	params := map[string]any{"name": name, "task": map[string]any{}}
	if args != nil {
		params["arguments"] = args
	}
	if ttl > 0 {
		params["task"] = map[string]any{"ttl": ttl}
	}
	resp, err := c.GetTransport().SendRequest(t.Context(), transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(rawIDs.Add(1)), Method: string(mcp.MethodToolsCall), Params: params})
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error.AsError()
	}
	var created mcp.CreateTaskResult
	if err := json.Unmarshal(resp.Result, &created); err != nil || created.Task.TaskId == "" {
		return nil, fmt.Errorf("not a CreateTaskResult: %s (%v)", resp.Result, err)
	}
	return &created.Task, nil
}

func createTask(t *testing.T, c *mcpclient.Client, name string, args map[string]any, ttl int64) *mcp.Task {
	t.Helper()
	task, err := sendCreate(t, c, name, args, ttl)
	if err != nil {
		t.Fatalf("creating a task of %s: %v", name, err)
	}
	return task
}

func getTask(t *testing.T, c *mcpclient.Client, id string) *mcp.GetTaskResult {
	t.Helper()
	g, err := c.GetTask(t.Context(), getReq(id))
	if err != nil {
		t.Fatalf("tasks/get %s: %v", id, err)
	}
	return g
}

func listTasks(t *testing.T, c *mcpclient.Client) []mcp.Task {
	t.Helper()
	l, err := c.ListTasks(t.Context(), mcp.ListTasksRequest{})
	if err != nil {
		t.Fatalf("tasks/list: %v", err)
	}
	return l.Tasks
}

func terminal(g *mcp.GetTaskResult) bool { return g.Status.IsTerminal() }

func status(s mcp.TaskStatus) func(*mcp.GetTaskResult) bool {
	return func(g *mcp.GetTaskResult) bool { return g.Status == s }
}

// pollUntil polls tasks/get, at the task's poll interval, until done
// holds (or fails the test after 30 s), and returns the last answer and
// the status messages seen.
func pollUntil(t *testing.T, c *mcpclient.Client, id string, done func(*mcp.GetTaskResult) bool) (*mcp.GetTaskResult, []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var messages []string
	for {
		g := getTask(t, c, id)
		if g.StatusMessage != "" && (len(messages) == 0 || messages[len(messages)-1] != g.StatusMessage) {
			messages = append(messages, g.StatusMessage)
		}
		if done(g) {
			return g, messages
		}
		if g.Status.IsTerminal() || time.Now().After(deadline) {
			t.Fatalf("task %s: %s (%s) and the condition never held; messages %q", id, g.Status, g.StatusMessage, messages)
		}
		wait := 100 * time.Millisecond
		if g.PollInterval != nil {
			wait = time.Duration(*g.PollInterval) * time.Millisecond
		}
		timer := time.NewTimer(wait)
		select {
		case <-t.Context().Done():
			timer.Stop()
			t.Fatal(t.Context().Err())
		case <-timer.C:
		}
	}
}

func relatedTask(m *mcp.Meta) string {
	if m == nil {
		return ""
	}
	rt, _ := m.AdditionalFields[mcp.RelatedTaskMetaKey].(map[string]any)
	id, _ := rt["taskId"].(string)
	return id
}

// pollLog records when tasks/get requests of followed tasks were sent.
// Over HTTP it is the clients' http.RoundTripper.
type pollLog struct {
	mu    sync.Mutex
	tasks map[string][]time.Time
}

func (p *pollLog) follow(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tasks == nil {
		p.tasks = map[string][]time.Time{}
	}
	p.tasks[id] = nil
}

func (p *pollLog) saw(method string, params any) {
	if method != string(mcp.MethodTasksGet) {
		return
	}
	b, _ := json.Marshal(params)
	var q struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(b, &q)
	p.mu.Lock()
	defer p.mu.Unlock()
	if times, ok := p.tasks[q.TaskID]; ok {
		p.tasks[q.TaskID] = append(times, time.Now())
	}
}

func (p *pollLog) gaps(id string) []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	times := p.tasks[id]
	var out []time.Duration
	for i := 1; i < len(times); i++ {
		out = append(out, times[i].Sub(times[i-1]).Round(time.Millisecond))
	}
	return out
}

func (p *pollLog) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(body, &m) == nil {
			p.saw(m.Method, m.Params)
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

// stdioRecorder is a stdio transport that records the tasks/get requests
// sent through it.
type stdioRecorder struct {
	transport.Interface
	polls *pollLog
}

func (s *stdioRecorder) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	s.polls.saw(req.Method, req.Params)
	return s.Interface.SendRequest(ctx, req)
}

// SetRequestHandler passes the client's handler of server requests
// (elicitation, sampling) to the stdio transport.
func (s *stdioRecorder) SetRequestHandler(h transport.RequestHandler) {
	s.Interface.(transport.BidirectionalInterface).SetRequestHandler(h)
}
