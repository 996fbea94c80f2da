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
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestParseToolArgs(t *testing.T) {
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"n":       map[string]any{"type": "integer"},
			"version": map[string]any{"type": "string"},
			"flag":    map[string]any{"type": "boolean"},
			"any":     map[string]any{},
		},
	}
	fields, err := parseSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	ta, err := parseToolArgs(`{"n": 1, "keep": [1,2]}`, nil, []string{
		"n=10", "version=1.2", "flag=true", "text=hello world", "quoted=\"42\"", "obj:={\"a\":1}",
		"any=null", "empty=", `{"extra": 12345678901234567890}`, "eq=a=b",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !ta.needsSchema() {
		t.Error("needsSchema: 1.2 is ambiguous")
	}
	got := ta.build(fields)
	b, _ := json.Marshal(got)
	want := `{"any":null,"empty":"","eq":"a=b","extra":12345678901234567890,"flag":true,"keep":[1,2],"n":10,"obj":{"a":1},"quoted":"42","text":"hello world","version":"1.2"}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	// Without the schema, 1.2 is a number.
	if v := ta.build(nil)["version"]; fmt.Sprint(v) != "1.2" || reflect.TypeOf(v) != reflect.TypeFor[json.Number]() {
		t.Errorf("without schema: %T %v", v, v)
	}
	plain, _ := parseToolArgs("", nil, []string{"text=hi", "who=\"x\""})
	if plain.needsSchema() {
		t.Error("needsSchema for text only")
	}

	for _, bad := range [][]string{{"novalue"}, {"=x"}, {"k:=nope"}, {"{bad"}, {"[1]"}} {
		if _, err := parseToolArgs("", nil, bad); err == nil {
			t.Errorf("%q: no error", bad)
		} else if ue := (*usageError)(nil); !errors.As(err, &ue) {
			t.Errorf("%q: %v is not a usage error", bad, err)
		}
	}
	if _, err := parseToolArgs(`{"a":1} {"b":2}`, nil, nil); err == nil {
		t.Error("two objects in --args: no error")
	}
	if ta, err := parseToolArgs("-", strings.NewReader(`{"n": 5}`), nil); err != nil || fmt.Sprint(ta.build(nil)["n"]) != "5" {
		t.Errorf("--args -: %v %v", ta, err)
	}
	file := filepath.Join(t.TempDir(), "args.json")
	os.WriteFile(file, []byte(`{"n": 6}`), 0o600)
	if ta, err := parseToolArgs("@"+file, nil, nil); err != nil || fmt.Sprint(ta.build(nil)["n"]) != "6" {
		t.Errorf("--args @file: %v %v", ta, err)
	}
}

func TestSplitCommand(t *testing.T) {
	for in, want := range map[string][]string{
		"mcptaskd -stdio":                    {"mcptaskd", "-stdio"},
		`  a   'b c'  "d e" f\ g `:           {"a", "b c", "d e", "f g"},
		`x "it's" 'say "hi"' ""`:             {"x", "it's", `say "hi"`, ""},
		`/path/to/my\ server --db=/tmp/x.db`: {"/path/to/my server", "--db=/tmp/x.db"},
	} {
		got, err := splitCommand(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("splitCommand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "   ", "a 'b", `a "b`, `a\`} {
		if _, err := splitCommand(bad); err == nil {
			t.Errorf("splitCommand(%q): no error", bad)
		}
	}
}

func TestParseSchemaOrderAndInput(t *testing.T) {
	raw := json.RawMessage(`{"type":"object","properties":{
		"zeta":{"type":"string","title":"Zeta"},
		"count":{"type":"integer","minimum":1,"maximum":5},
		"ratio":{"type":["number","null"]},
		"ok":{"type":"boolean","default":true},
		"color":{"type":"string","enum":["red","green"],"enumNames":["Red","Green"]},
		"size":{"type":"string","oneOf":[{"const":"s","title":"Small"},{"const":"l","title":"Large"}]},
		"tags":{"type":"array","items":{"enum":["a","b","c"]}}
	},"required":["count","color"]}`)
	fields, err := parseSchema(raw)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fields {
		names = append(names, f.name)
	}
	if want := []string{"count", "color", "zeta", "ratio", "ok", "size", "tags"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("order %v, want %v (required first, then the schema's order)", names, want)
	}
	byName := map[string]*fieldSpec{}
	for i := range fields {
		byName[fields[i].name] = &fields[i]
	}
	for _, tc := range []struct {
		field, in string
		want      any
		bad       bool
	}{
		{"count", "3", int64(3), false},
		{"count", "9", nil, true},
		{"count", "2.5", nil, true},
		{"ratio", "0.5", 0.5, false},
		{"ratio", "x", nil, true},
		{"ok", "Y", true, false},
		{"ok", "no", false, false},
		{"ok", "maybe", nil, true},
		{"color", "2", "green", false},
		{"color", "Red", "red", false},
		{"color", "blue", nil, true},
		{"size", "Large", "l", false},
		{"tags", "a, 3", []any{"a", "c"}, false},
		{"zeta", " text ", "text", false},
	} {
		got, err := parseFieldInput(byName[tc.field], tc.in)
		if tc.bad != (err != nil) || (!tc.bad && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("%s %q: got %#v, %v; want %#v (error %v)", tc.field, tc.in, got, err, tc.want, tc.bad)
		}
	}
	if !byName["ok"].hasDef || byName["ok"].def != true {
		t.Errorf("default of ok: %+v", byName["ok"])
	}
}

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
	got := ans.result(params)
	want := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true, "name": "42", "extra": []any{json.Number("1")}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if ans, _ := build([]string{"decline"}, ""); ans.result(params).Action != "decline" {
		t.Error("--answer decline")
	}
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, fmt.Sprint(len(s))+".json")
		os.WriteFile(p, []byte(s), 0o600)
		return p
	}
	if ans, err := build(nil, write(`{"confirm": false}`)); err != nil || !reflect.DeepEqual(ans.result(params).Content, map[string]any{"confirm": false}) {
		t.Errorf("--answers content: %+v %v", ans, err)
	}
	if ans, err := build(nil, write(`{"action":"accept","content":{"name":"x"}}`)); err != nil || ans.result(params).Content["name"] != "x" {
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

// TestTargets checks which servers 'list' and 'resume' visit, as the
// journal (read with client.ReadJournal) names them.
func TestTargets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("bad.json", "{not json")
	write("j.json", `{"version":1,"tasks":[
		{"taskId":"a","target":"http://x/mcp","wire":"2026-07-28","tool":"t1"},
		{"taskId":"b","target":"stdio:srv -stdio","tool":"t2"}]}`)
	// JSON Lines are not the journal's format: the client refuses it as
	// corrupt, like any other file it cannot read.
	write("lines.json", "{\"taskId\":\"a\",\"target\":\"u\"}\n{\"taskId\":\"b\",\"target\":\"u\"}\n")

	a := &app{getenv: func(string) string { return "" }}
	a.g.init(a.getenv)
	a.g.journal = filepath.Join(dir, "j.json")
	targets, skipped := a.targets()
	if !reflect.DeepEqual(targets, []string{"http://x/mcp"}) || skipped["stdio:srv -stdio"] != 1 {
		t.Errorf("targets %v, skipped %v", targets, skipped)
	}
	a.g.journal = filepath.Join(dir, "missing.json")
	if targets, skipped := a.targets(); len(targets) != 0 || len(skipped) != 0 {
		t.Errorf("empty journal: targets %v, skipped %v", targets, skipped)
	}
	for _, bad := range []string{"bad.json", "lines.json"} {
		a.g.journal = filepath.Join(dir, bad)
		if targets, _ := a.targets(); !reflect.DeepEqual(targets, []string{defaultURL}) {
			t.Errorf("unreadable journal %s: targets %v", bad, targets)
		}
	}
	a.g.journal = filepath.Join(dir, "j.json")
	a.g.targetSet, a.g.url = true, "http://y/mcp"
	if targets, _ := a.targets(); len(targets) != 0 {
		t.Errorf("explicit target without tasks: %v", targets)
	}
	a.g.url = "http://x/mcp"
	if targets, _ := a.targets(); !reflect.DeepEqual(targets, []string{"http://x/mcp"}) {
		t.Errorf("explicit target: %v", targets)
	}
	a.g.targetSet = false
}

func TestExitCodeOf(t *testing.T) {
	ctx := context.Background()
	interrupted, cancel := context.WithCancelCause(ctx)
	cancel(errInterrupted)
	for _, tc := range []struct {
		ctx  context.Context
		err  error
		code int
	}{
		{ctx, nil, exitOK},
		{ctx, &client.TaskError{TaskID: "x", Code: -32603, Message: "boom"}, exitFailed},
		{ctx, fmt.Errorf("wrapped: %w", client.ErrCancelled), exitCancelled},
		{ctx, fmt.Errorf("task x: %w", client.ErrTaskNotFound), exitConnection},
		{ctx, fmt.Errorf("still working: %w", client.ErrDeadline), exitDeadline},
		{ctx, errWaitDeadline, exitDeadline},
		{ctx, &refusedError{&jsonrpc.Error{Code: -32602, Message: "unknown tool"}}, exitFailed},
		{ctx, &jsonrpc.Error{Code: -32603, Message: "tasks/get failed"}, exitConnection},
		{ctx, usagef("bad"), exitUsage},
		{ctx, errors.New("connection refused"), exitConnection},
		{interrupted, context.Canceled, exitInterrupted},
	} {
		if got := exitCodeOf(tc.ctx, tc.err); got != tc.code {
			t.Errorf("exitCodeOf(%v) = %d, want %d", tc.err, got, tc.code)
		}
	}
	// The codes are distinct and documented.
	seen := map[int]bool{}
	for _, e := range exitCodes {
		if seen[e.code] {
			t.Errorf("exit code %d twice", e.code)
		}
		seen[e.code] = true
	}
	if len(seen) != 8 {
		t.Errorf("%d exit codes documented, want 8", len(seen))
	}
}

func TestStatusViewPlain(t *testing.T) {
	var b bytes.Buffer
	v := newStatusView(&b, viewPlain, nil)
	st := &client.TaskStatus{ID: "t1", Status: "working", StatusMessage: "step 1 of 2"}
	v.Update(st)
	v.Update(st) // no change, no line
	st2 := *st
	st2.StatusMessage = "step 2 of 2"
	v.Update(&st2)
	v.Notef("a note")
	v.Close()
	want := "mcptask: working: step 1 of 2\nmcptask: working: step 2 of 2\na note\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}

	b.Reset()
	q := newStatusView(&b, viewQuiet, nil)
	q.Update(st)
	q.Close()
	if b.Len() != 0 {
		t.Errorf("quiet view printed %q", b.String())
	}
}

func TestStatusViewLive(t *testing.T) {
	var b lockedBuffer
	v := newStatusView(&b, viewLive, func() int { return 40 })
	created := time.Now().Add(-3 * time.Second)
	v.Update(&client.TaskStatus{ID: "t1", Status: "working", StatusMessage: strings.Repeat("long message ", 10), CreatedAt: created})
	v.Notef("note")
	v.Update(&client.TaskStatus{ID: "t1", Status: "completed", StatusMessage: "done", CreatedAt: created, LastUpdatedAt: created.Add(4 * time.Second)})
	v.Close()
	out := b.String()
	for _, s := range []string{"\r\x1b[K", "working 3.", "…", "note\n", "completed 4.0s · done\n"} {
		if !strings.Contains(out, s) {
			t.Errorf("live output lacks %q: %q", s, out)
		}
	}
	for line := range strings.SplitSeq(out, "\r\x1b[K") {
		for l := range strings.SplitSeq(line, "\n") {
			if n := len([]rune(l)); n > 39 {
				t.Errorf("line of %d runes on a 40-column terminal: %q", n, l)
			}
		}
	}
}

type lockedBuffer struct {
	mu chan struct{}
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.lock()
	defer l.unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.lock()
	defer l.unlock()
	return l.b.String()
}

func (l *lockedBuffer) lock() {
	if l.mu == nil {
		l.mu = make(chan struct{}, 1)
	}
	l.mu <- struct{}{}
}
func (l *lockedBuffer) unlock() { <-l.mu }

func TestFormatElapsed(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1500 * time.Millisecond:     "1.5s",
		42 * time.Second:            "42s",
		65 * time.Second:            "1m05s",
		2*time.Hour + 3*time.Minute: "2h03m",
	} {
		if got := formatElapsed(d); got != want {
			t.Errorf("formatElapsed(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestSelfCommand(t *testing.T) {
	env := map[string]string{}
	a := &app{getenv: func(k string) string { return env[k] }}
	a.g.init(a.getenv)
	if got := a.selfCommand(); got != "mcptask" {
		t.Errorf("defaults: %q", got)
	}
	a.g.url = "http://127.0.0.1:9/mcp"
	a.g.journal = "/tmp/my journal.json"
	if got := a.selfCommand(); got != "mcptask --url http://127.0.0.1:9/mcp --journal '/tmp/my journal.json'" {
		t.Errorf("flags: %q", got)
	}
	env[envURL], env[envJournal] = a.g.url, a.g.journal // from the environment: nothing to repeat
	if got := a.selfCommand(); got != "mcptask" {
		t.Errorf("environment: %q", got)
	}
	a.g.stdio = "mcptaskd -stdio"
	if got := a.selfCommand(); got != "mcptask --stdio 'mcptaskd -stdio'" {
		t.Errorf("stdio: %q", got)
	}
}

// TestReadmeExitCodes keeps the README's table of exit codes in step with
// exitCodes.
func TestReadmeExitCodes(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skip(err)
	}
	_, section, ok := strings.Cut(string(data), "## mcptask CLI")
	if !ok {
		t.Fatal("README has no mcptask CLI section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var got []int
	for line := range strings.Lines(section) {
		var code int
		if _, err := fmt.Sscanf(line, "| %d |", &code); err == nil {
			got = append(got, code)
		}
	}
	var want []int
	for _, e := range exitCodes {
		want = append(want, e.code)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("README lists exit codes %v, mcptask has %v", got, want)
	}
}
