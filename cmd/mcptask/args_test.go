package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
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
