package v20251125

import (
	"encoding/json"
	"testing"
)

func TestLiftTaskMessage(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","arguments":{"task":1},"task":{"ttl":60000},"_meta":{"progressToken":"p"}}}`
	out, ok := LiftTaskMessage([]byte(in))
	if !ok {
		t.Fatal("not lifted")
	}
	var msg struct {
		Params struct {
			Name      string                     `json:"name"`
			Arguments map[string]any             `json:"arguments"`
			Task      json.RawMessage            `json:"task"`
			Meta      map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(out, &msg); err != nil {
		t.Fatal(err)
	}
	p := msg.Params
	if p.Task != nil || string(p.Meta[MetaTaskParam]) != `{"ttl":60000}` || string(p.Meta["progressToken"]) != `"p"` || p.Arguments["task"] != 1.0 || p.Name != "x" {
		t.Fatalf("lifted = %s", out)
	}
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"task":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"task"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"task":{},"_meta":7}}`,
		`not json "task"`,
	} {
		if out, ok := LiftTaskMessage([]byte(s)); ok || string(out) != s {
			t.Errorf("%s: lifted to %s", s, out)
		}
	}
}

func TestParseTaskParam(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantMs  int64
		wantNil bool
		wantErr bool
	}{
		{in: `{"ttl":60000}`, wantMs: 60000},
		{in: `{}`, wantNil: true},
		{in: `{"ttl":null}`, wantNil: true},
		{in: `{"ttl":0}`, wantMs: 0},
		{in: `{"ttl":-5}`, wantErr: true},
		{in: `{"ttl":1.5}`, wantErr: true},
		{in: `{"ttl":"60000"}`, wantErr: true},
		{in: `{"ttl":"abc"}`, wantErr: true},
		{in: `{"ttl":1e300}`, wantMs: -1},
		{in: `[]`, wantErr: true},
		{in: `7`, wantErr: true},
	} {
		d, err := ParseTaskParam(json.RawMessage(tc.in))
		switch {
		case tc.wantErr:
			if err == nil {
				t.Errorf("%s: no error (got %v)", tc.in, d)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.wantNil:
			if d != nil {
				t.Errorf("%s: %v, want nil", tc.in, *d)
			}
		case tc.wantMs >= 0 && (d == nil || d.Milliseconds() != tc.wantMs):
			t.Errorf("%s: %v, want %dms", tc.in, d, tc.wantMs)
		case tc.wantMs < 0 && (d == nil || *d <= 0):
			t.Errorf("%s: %v, want a huge positive duration", tc.in, d)
		}
	}
}

func FuzzLiftTaskMessage(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","task":{"ttl":1}}}`)
	f.Add(`{"method":"tools/call","params":{"task":null,"_meta":{}}}`)
	f.Fuzz(func(t *testing.T, s string) {
		out, ok := LiftTaskMessage([]byte(s))
		if !ok {
			if string(out) != s {
				t.Fatalf("changed without lifting: %q -> %q", s, out)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("lifted to invalid JSON: %q", out)
		}
	})
}
