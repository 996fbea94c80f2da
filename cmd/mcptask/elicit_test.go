package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestPromptElicit(t *testing.T) {
	params := &mcp.ElicitParams{
		Message: "Deploy?",
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"confirm": map[string]any{"type": "boolean", "title": "Roll out"},
				"note":    map[string]any{"type": "string"},
				"count":   map[string]any{"type": "integer", "default": 2},
			},
			"required": []string{"confirm"},
		},
	}
	for _, tc := range []struct {
		input string
		want  *mcp.ElicitResult
	}{
		{"\n\nmaybe\ny\n\n\n", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true, "count": int64(2)}}},
		{"a\nn\n7\nhello\n", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": false, "note": "hello", "count": int64(7)}}},
		{"d\n", &mcp.ElicitResult{Action: "decline"}},
		{"x\nc\n", &mcp.ElicitResult{Action: "cancel"}},
		{"a\n", &mcp.ElicitResult{Action: "cancel"}}, // end of input
		{"", &mcp.ElicitResult{Action: "cancel"}},
	} {
		var out bytes.Buffer
		got, err := promptElicit(context.Background(), &lineReader{r: strings.NewReader(tc.input)}, &out, "task x", params)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("input %q: got %+v, %v; want %+v\n%s", tc.input, got, err, tc.want, out.String())
		}
		if !strings.Contains(out.String(), "task x asks:\n  Deploy?") {
			t.Errorf("the prompt does not show the question:\n%s", out.String())
		}
	}

	// A prompt gives up when its context ends.
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errInterrupted)
	blocked := &lineReader{r: blockingReader{}}
	if _, err := promptElicit(ctx, blocked, &bytes.Buffer{}, "x", params); !errors.Is(err, errInterrupted) {
		t.Errorf("cancelled prompt: %v", err)
	}
}

type blockingReader struct{}

func (blockingReader) Read([]byte) (int, error) { select {} }

func TestAnswers(t *testing.T) {
	params := &mcp.ElicitParams{RequestedSchema: map[string]any{
		"type":       "object",
		"properties": map[string]any{"confirm": map[string]any{"type": "boolean"}, "name": map[string]any{"type": "string"}},
	}}
	build := func(pairs []string, file string) (*answers, error) {
		f := &answerFlags{pairs: pairs, file: file}
		return f.build(nil)
	}
	ans, err := build([]string{"confirm=yes", "name=42", "extra:=[1]"}, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ans.result(params)
	if err != nil {
		t.Fatal(err)
	}
	want := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true, "name": "42", "extra": []any{json.Number("1")}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	res := func(ans *answers) *mcp.ElicitResult {
		r, err := ans.result(params)
		if err != nil {
			t.Fatalf("result: %v", err)
		}
		return r
	}
	if ans, _ := build([]string{"decline"}, ""); res(ans).Action != "decline" {
		t.Error("--answer decline")
	}
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, fmt.Sprint(len(s))+".json")
		os.WriteFile(p, []byte(s), 0o600)
		return p
	}
	if ans, err := build(nil, write(`{"confirm": false}`)); err != nil || !reflect.DeepEqual(res(ans).Content, map[string]any{"confirm": false}) {
		t.Errorf("--answers content: %+v %v", ans, err)
	}
	if ans, err := build(nil, write(`{"action":"accept","content":{"name":"x"}}`)); err != nil || res(ans).Content["name"] != "x" {
		t.Errorf("--answers with action: %+v %v", ans, err)
	}
	for _, bad := range []string{`{"action":"maybe"}`, `[1]`, `nope`} {
		if _, err := build(nil, write(bad)); err == nil {
			t.Errorf("--answers %s: no error", bad)
		}
	}
	if ans, _ := build(nil, ""); ans != nil {
		t.Error("no answers given, but answers built")
	}
}

// TestAnswersChecked: answers that break the requested schema are refused
// before sending, in words that name the field and the rule.
func TestAnswersChecked(t *testing.T) {
	params := &mcp.ElicitParams{RequestedSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"confirm": map[string]any{"type": "boolean"},
			"steps":   map[string]any{"type": "integer", "minimum": 1, "maximum": 10},
			"env":     map[string]any{"type": "string", "enum": []any{"staging", "prod"}},
		},
		"required":             []any{"confirm"},
		"additionalProperties": false,
	}}
	for pairs, want := range map[string]string{
		"confirm=maybe":           `confirm must be true or false, not "maybe"`,
		"confirm=true steps=0":    "steps must be at least 1",
		"confirm=true steps=11":   "steps must be at most 10",
		"confirm=true steps=1.5":  "steps must be a whole number",
		"confirm=true env=dev":    `env must be one of "staging", "prod"`,
		"steps=2":                 "confirm is required",
		"confirm=true color=blue": "there is no field color (the fields are confirm, env, steps)",
		"confirm=yes steps=3":     "",
	} {
		f := &answerFlags{pairs: strings.Fields(pairs)}
		ans, err := f.build(nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ans.result(params)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", pairs, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", pairs, err, want)
		}
	}
}

// TestSchemaCheckNoFalseRefusal: what a server's schema allows is never
// refused before sending: a union of a constant and a type, a number
// spelled 2.0 for an enum's 2, a property that patternProperties allows.
func TestSchemaCheckNoFalseRefusal(t *testing.T) {
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"n":    map[string]any{"anyOf": []any{map[string]any{"const": "auto", "type": "string"}, map[string]any{"type": "integer"}}},
			"size": map[string]any{"type": "integer", "enum": []any{1, 2}},
		},
		"patternProperties":    map[string]any{"^x-": map[string]any{}},
		"additionalProperties": false,
	}
	fields, err := parseSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, content := range []map[string]any{
		{"n": json.Number("5")}, {"n": "auto"}, {"size": json.Number("2.0")}, {"size": int64(1)}, {"x-b": true},
	} {
		if err := checkObject(fields, schemaClosed(schema), content); err != nil {
			t.Errorf("%v refused: %v", content, err)
		}
	}
	if err := checkObject(fields, schemaClosed(schema), map[string]any{"size": json.Number("3")}); err == nil {
		t.Error("size 3 (not in the enum) accepted")
	}
}
