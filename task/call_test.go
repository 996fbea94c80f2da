package task

import (
	"encoding/json"
	"testing"
)

func TestCallDigest(t *testing.T) {
	base := CallDigest("deploy", json.RawMessage(`{"name":"deploy","arguments":{"service":"api","env":"prod"}}`))
	for _, c := range []struct {
		name   string
		tool   string
		params string
		same   bool
	}{
		{"same call", "deploy", `{"name":"deploy","arguments":{"service":"api","env":"prod"}}`, true},
		{"keys reordered, spaces", "deploy", `{ "arguments": { "env" : "prod", "service":"api" }, "name":"deploy"}`, true},
		{"other _meta", "deploy", `{"name":"deploy","arguments":{"service":"api","env":"prod"},"_meta":{"io.mcptask/idempotency-key":"k"}}`, true},
		{"other argument value", "deploy", `{"name":"deploy","arguments":{"service":"web","env":"prod"}}`, false},
		{"an argument more", "deploy", `{"name":"deploy","arguments":{"service":"api","env":"prod","force":true}}`, false},
		{"other tool", "rollback", `{"name":"rollback","arguments":{"service":"api","env":"prod"}}`, false},
		{"no arguments", "deploy", `{"name":"deploy"}`, false},
	} {
		if got := CallDigest(c.tool, json.RawMessage(c.params)) == base; got != c.same {
			t.Errorf("%s: same digest = %v, want %v", c.name, got, c.same)
		}
	}
	if CallDigest("t", json.RawMessage(`{"name":"t"}`)) != CallDigest("t", json.RawMessage(`{"name":"t","arguments":null}`)) {
		t.Error("absent and null arguments differ")
	}
	if CallDigest("t", json.RawMessage(`{"arguments":{"n":1}}`)) == CallDigest("t", json.RawMessage(`{"arguments":{"n":2}}`)) {
		t.Error("numbers are not compared")
	}
}
