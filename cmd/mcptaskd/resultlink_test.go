package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
)

// TestResultLinkOwnerBound: with -result-link-bytes, a large result is
// answered as a link to its result resource, which its owner reads
// whole, while another principal reading it, on either wire, gets
// exactly what an unknown task's result gets, and nothing of it.
func TestResultLinkOwnerBound(t *testing.T) {
	srv, ps := startSecServerArgs(t, []string{"-result-link-bytes", "64"}, "alice@acme", "mallory@globex")
	alice, mallory := ps[0], ps[1]
	const secret = "There are 10000 primes up to 104729 (computed in 1 steps)."
	id := alice.start26(t, "long_computation", map[string]any{"n": 104729, "steps": 1, "step_delay_ms": 0}, nil)
	tk := alice.wait26(t, id, "terminal", terminal)
	if tk.Status != "completed" || strings.Contains(string(tk.Result), secret) || !strings.Contains(string(tk.Result), wire.ResultURI(id)) {
		t.Fatalf("alice's large result on tasks/get: %s %s", tk.Status, tk.Result)
	}
	uri := wire.ResultURI(id)
	r := alice.call26(t, "resources/read", map[string]any{"uri": uri})
	var read struct {
		Contents []struct {
			Text string `json:"text"`
		} `json:"contents"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &read) != nil || len(read.Contents) != 1 || !strings.Contains(read.Contents[0].Text, secret) {
		t.Fatalf("alice's resources/read of her result: %s", r.Body)
	}
	unknown := string(task.NewID())
	ms := mallory.open25(t)
	want26 := shapeOf(mallory.call26(t, "resources/read", map[string]any{"uri": wire.ResultURI(unknown)}), unknown)
	want25 := shapeOf(ms.call(t, "resources/read", map[string]any{"uri": wire.ResultURI(unknown)}), unknown)
	if want26.Code != -32602 || want25.Code != -32602 {
		t.Fatalf("an unknown task's result: %+v %+v", want26, want25)
	}
	if got := shapeOf(mallory.call26(t, "resources/read", map[string]any{"uri": uri}), id); got != want26 {
		t.Errorf("mallory's 2026-07-28 read of alice's result: %+v\nwant %+v", got, want26)
	}
	if got := shapeOf(ms.call(t, "resources/read", map[string]any{"uri": uri}), id); got != want25 {
		t.Errorf("mallory's 2025-11-25 read of alice's result: %+v\nwant %+v", got, want25)
	}
	for _, body := range srv.received(mallory) {
		if strings.Contains(body, secret) {
			t.Errorf("alice's result reached mallory: %s", body)
		}
	}
}
