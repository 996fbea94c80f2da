package task_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/task"
)

// reference is what ToolError must answer: a whole decoding.
func reference(result []byte) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(result, &r) == nil && r.IsError
}

func TestToolError(t *testing.T) {
	big := strings.Repeat(`{"type":"text","text":"x \"isError\":true }] {[ \\"},`, 2000)
	for _, c := range []struct {
		in   string
		want bool
	}{
		{`{"content":[],"isError":true}`, true},
		{`{"isError":false}`, false},
		{` { "isError" : true } `, true},
		{`{"content":[` + big + `{"isError":true}],"structuredContent":{"isError":true}}`, false},
		{`{"content":[` + big + `{"isError":true}],"isError":true}`, true},
		{`{"isError":true,"content":[` + big + `{"isError":false}]}`, true},
		{`{"ISERROR":true}`, true},
		{`{"is\u0045rror":true}`, true},
		{`{"i\u017FError":true}`, true}, // ſ folds to s, as encoding/json matches names
		{`{"isError":true,"isError":false}`, false},
		{`{"isError":false,"isError":true}`, true},
		{`{"isError":true,"isError":null}`, true},
		{`{"isError":"true"}`, false},
		{`{"isError":1}`, false},
		{`{"isError":true,"isError":{"a":1}}`, false},
		{`{"isError":true`, false},
		{`null`, false},
		{`[{"isError":true}]`, false},
		{`true`, false},
		{``, false},
		{`{}`, false},
		{`{"a":"}","isError":true}`, true},
		{`{"a":"\\","isError":true}`, true},
		{`{"a":-1.5e3,"b":[1,[2,{"c":"]"}]],"isError":true}`, true},
	} {
		got := task.ToolError([]byte(c.in))
		if ref := reference([]byte(c.in)); ref != c.want {
			t.Fatalf("test case %.80q: want %v, but encoding/json says %v", c.in, c.want, ref)
		}
		if got != c.want {
			t.Errorf("ToolError(%.80q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// FuzzToolError: ToolError answers as a whole decoding does.
func FuzzToolError(f *testing.F) {
	for _, s := range []string{`{"isError":true}`, `{"content":[{"isError":true}],"isError":false}`, `{"IsError":null}`, `[]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := task.ToolError([]byte(s)), reference([]byte(s)); got != want {
			t.Errorf("ToolError(%q) = %v, encoding/json says %v", s, got, want)
		}
	})
}

func BenchmarkToolError(b *testing.B) {
	result := []byte(`{"content":[` + strings.Repeat(`{"type":"text","text":"some output line, quite long"},`, 4000) + `{"type":"text","text":"end"}],"isError":true}`)
	b.Run("ToolError", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !task.ToolError(result) {
				b.Fatal("not an error")
			}
		}
	})
	b.Run("Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !reference(result) {
				b.Fatal("not an error")
			}
		}
	})
}
