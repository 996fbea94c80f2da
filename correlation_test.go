package mcptask_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"testing"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCorrelation2025: on 2025-11-25, the default correlation key of a
// task-augmented tools/call's _meta is stored with the task and shown by
// tasks/get (and by the operation the work recorded); with
// Options.CorrelationKeys empty, nothing is read.
func TestCorrelation2025(t *testing.T) {
	get := func(t *testing.T, s *rawSession, id string) map[string]json.RawMessage {
		t.Helper()
		var res struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if err := s.call("tasks/get", map[string]any{"taskId": id}, &res); err != nil {
			t.Fatal(err)
		}
		return res.Meta
	}
	call := func(t *testing.T, s *rawSession) string {
		t.Helper()
		var res struct {
			Task task2025 `json:"task"`
		}
		p := map[string]any{"name": "records_op", "arguments": map[string]any{"label": "c"}, "task": map[string]any{"ttl": 60000},
			"_meta": map[string]any{wire.MetaClaudeCodeToolUseID: "toolu_01_2025", "other/key": "x"}}
		if err := s.call("tools/call", p, &res); err != nil || res.Task.TaskID == "" {
			t.Fatalf("tools/call: %+v, %v", res, err)
		}
		s.waitStatus(t, res.Task.TaskID, "completed")
		return res.Task.TaskID
	}
	t.Run("default", func(t *testing.T) {
		s := startRaw2025(t, noRequests)
		meta := get(t, s, call(t, s))
		var corr map[string]string
		if err := json.Unmarshal(meta[wire.MetaCorrelation], &corr); err != nil ||
			!maps.Equal(corr, map[string]string{wire.MetaClaudeCodeToolUseID: "toolu_01_2025"}) {
			t.Errorf("%s = %s (%v)", wire.MetaCorrelation, meta[wire.MetaCorrelation], err)
		}
		var ops wire.ListOperationsResult
		if err := s.call(wire.MethodOperationsList, map[string]any{}, &ops); err != nil {
			t.Fatal(err)
		}
		if len(ops.Operations) != 1 || ops.Operations[0].Correlation[wire.MetaClaudeCodeToolUseID] != "toolu_01_2025" {
			t.Errorf("operations: %+v", ops.Operations)
		}
	})
	t.Run("none", func(t *testing.T) {
		s := startRaw2025With(t, mcptask.Options{CorrelationKeys: []string{}}, noRequests)
		if meta := get(t, s, call(t, s)); meta[wire.MetaCorrelation] != nil {
			t.Errorf("with no correlation keys, tasks/get shows %s", meta[wire.MetaCorrelation])
		}
	})
}

// TestCorrelationKeysChecked: New refuses more keys than a task keeps, an
// empty key and a key given twice.
func TestCorrelationKeysChecked(t *testing.T) {
	var nine []string
	for i := range 9 {
		nine = append(nine, fmt.Sprintf("host/%d", i))
	}
	for _, keys := range [][]string{nine, {""}, {"a", "a"}} {
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		eng, err := engine.New(engine.Options{Store: st, Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
		if _, err := mcptask.New(srv, eng, &mcptask.Options{CorrelationKeys: keys}); err == nil {
			t.Errorf("New with correlation keys %q: nil error", keys)
		}
	}
}
