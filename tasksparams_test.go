package mcptask_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// paramsConn is a JSON-RPC connection to a Server.Run session, for requests
// no SDK client would send.
type paramsConn struct {
	c  mcp.Connection
	id int64
}

// call sends one request and returns "OK <result>" or "ERR <code> <message>".
func (z *paramsConn) call(t *testing.T, method, params string) string {
	t.Helper()
	z.id++
	rid, _ := jsonrpc.MakeID(float64(z.id))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := z.c.Write(ctx, &jsonrpc.Request{ID: rid, Method: method, Params: json.RawMessage(params)}); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := z.c.Read(ctx)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if r, ok := msg.(*jsonrpc.Response); ok {
			if r.Error != nil {
				var je *jsonrpc.Error
				if e, ok := r.Error.(*jsonrpc.Error); ok {
					je = e
				} else {
					je = &jsonrpc.Error{Message: r.Error.Error()}
				}
				return "ERR " + strconv64(je.Code) + " " + je.Message
			}
			return "OK " + string(r.Result)
		}
	}
}

func strconv64(n int64) string { b, _ := json.Marshal(n); return string(b) }

// paramsSession serves a 2025-11-25 session of a server with one optional
// task tool, "echo", over Server.Run, and initializes it.
func paramsSession(t *testing.T, lim mcptask.Limits) *paramsConn {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "t.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, _ := engine.New(engine.Options{Store: st, Exclusive: true, Logger: discard})
	srv := mcp.NewServer(&mcp.Implementation{Name: "z", Version: "1"}, &mcp.ServerOptions{Logger: discard})
	ts, err := mcptask.New(srv, eng, &mcptask.Options{Logger: discard, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	mcptask.AddTool(ts, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hi"}}}, nil, nil
	}, mcptask.ToolOptions{Support: mcptask.Optional})
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close(context.Background()) })
	ct, stt := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go ts.Run(ctx, stt)
	c, err := ct.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	z := &paramsConn{c: c}
	z.call(t, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`)
	_ = c.Write(ctx, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)})
	return z
}

// TestTasksParamsDecodedByTheSDK: the params of tasks/* are decoded as
// the go-sdk decodes them (field names case-sensitively, malformed values
// refused before the middleware), then read by the wire the request is on.
func TestTasksParamsDecodedByTheSDK(t *testing.T) {
	z := paramsSession(t, mcptask.Limits{})
	out := z.call(t, "tools/call", `{"name":"echo","arguments":{},"task":{}}`)
	var h struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if !strings.HasPrefix(out, "OK ") || json.Unmarshal([]byte(out[3:]), &h) != nil || h.Task.TaskID == "" {
		t.Fatalf("tools/call with params.task: %s", out)
	}
	id := h.Task.TaskID
	for out := z.call(t, "tasks/get", `{"taskId":"`+id+`"}`); !strings.Contains(out, `"status":"completed"`); out = z.call(t, "tasks/get", `{"taskId":"`+id+`"}`) {
		if !strings.HasPrefix(out, "OK ") {
			t.Fatalf("tasks/get: %s", out)
		}
	}
	for _, c := range []struct {
		method, params, want string
	}{
		{"tasks/get", `{"TaskId":"` + id + `"}`, "ERR -32602"},                       // TaskId is not taskId
		{"tasks/result", `{"TASKID":"` + id + `"}`, "ERR -32602"},                    // nor TASKID
		{"tasks/cancel", `{"taskID":"` + id + `"}`, "ERR -32602"},                    // nor taskID
		{"tasks/list", `{"Cursor":"zz"}`, "OK "},                                     // Cursor is no cursor: the first page
		{"tasks/get", `{"taskId":"` + id + `","requestState":5}`, "ERR -32602"},      // a malformed field of the other wire
		{"tasks/update", `{"taskId":"` + id + `","inputResponses":5}`, "ERR -32602"}, // malformed before "not on this wire"
		{"tasks/update", `{"taskId":"` + id + `"}`, "ERR -32601"},                    // well-formed: not on this wire
		// "_META" is not "_meta": the request stays on the session's wire.
		{"tasks/get", `{"taskId":"` + id + `","_META":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, `OK {"_meta":{"io.mcptask/outcome":"ok"},"taskId":"` + id},
	} {
		if got := z.call(t, c.method, c.params); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s %s = %.200s; want %s…", c.method, c.params, got, c.want)
		}
	}
}

// TestMalformedParamsCostNoRateToken: a request the go-sdk refuses as
// malformed never reaches the rate limiter.
func TestMalformedParamsCostNoRateToken(t *testing.T) {
	z := paramsSession(t, mcptask.Limits{RequestRate: 0.001, RequestBurst: 1})
	z.call(t, "tasks/get", `{"taskId":5}`)
	z.call(t, "tasks/get", `{"taskId":5}`)
	if out := z.call(t, "tasks/get", `{"taskId":"aaaaaaaaaaaaaaaaaaaaaaaaaa"}`); strings.Contains(out, "rate limit") {
		t.Errorf("after two malformed requests, a valid one is rate limited: %s", out)
	}
}
