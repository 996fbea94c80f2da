package mcptask_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// callRaw sends a request whose params member is absent (raw nil) or
// the given raw JSON, and returns the response.
func (s *rawSession) callRaw(method string, params json.RawMessage) *jsonrpc.Response {
	s.t.Helper()
	s.mu.Lock()
	s.next++
	id := s.next
	ch := make(chan *jsonrpc.Response, 1)
	s.pending[id] = ch
	s.mu.Unlock()
	rid, _ := jsonrpc.MakeID(float64(id))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.conn.Write(ctx, &jsonrpc.Request{ID: rid, Method: method, Params: params}); err != nil {
		s.t.Fatal(err)
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		s.t.Fatalf("%s: no answer", method)
		return nil
	}
}

// The tasks methods without params (absent or null) must not crash the
// server: tasks/list lists (its params are optional), the others answer
// -32602 for the missing taskId (tasks/update: -32601 on this wire).
// Found by the TypeScript SDK interop tests: its listTasks() sends no params.
func TestTasksMethodsWithoutParams(t *testing.T) {
	s := startRaw2025(t, noRequests)
	for _, params := range []json.RawMessage{nil, json.RawMessage("null")} {
		r := s.callRaw("tasks/list", params)
		if r.Error != nil {
			t.Fatalf("tasks/list params=%s: %v", params, r.Error)
		}
		var list struct {
			Tasks []json.RawMessage `json:"tasks"`
		}
		if err := json.Unmarshal(r.Result, &list); err != nil || list.Tasks == nil {
			t.Fatalf("tasks/list params=%s: %s %v", params, r.Result, err)
		}
		for method, want := range map[string]int64{"tasks/get": -32602, "tasks/result": -32602, "tasks/cancel": -32602, "tasks/update": -32601} {
			r := s.callRaw(method, params)
			if code := rpcCode(r.Error); code != want {
				t.Errorf("%s params=%s: %v, want %d", method, params, r.Error, want)
			}
		}
	}
}
