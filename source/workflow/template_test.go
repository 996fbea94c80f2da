package workflow

import (
	"encoding/json"
	"testing"
)

// TestRender fills references of every kind.
func TestRender(t *testing.T) {
	sc := &scope{args: map[string]any{"ref": "v1", "n": 3.0, "a/b": "slash"}, steps: map[string]*stepState{
		"build": {outcome: "ok", value: map[string]any{"artifact": "app.tgz", "list": []any{"x", "y"}}},
		"skip":  {outcome: "skipped"},
		"late":  {},
	}}
	for _, tc := range []struct {
		in   any
		want string
	}{
		{"${args/ref}", `"v1"`},
		{"${args/n}", `3`},
		{"n=${args/n}", `"n=3"`},
		{"${args/a~1b}", `"slash"`},
		{"${steps.build/artifact}:${steps.build.outcome}", `"app.tgz:ok"`},
		{"${steps.build/list/1}", `"y"`},
		{map[string]any{"all": "${steps.build}", "k": []any{"${args/ref}"}}, `{"all":{"artifact":"app.tgz","list":["x","y"]},"k":["v1"]}`},
		{"${steps.skip.outcome}", `"skipped"`},
		{"plain $ {x} text", `"plain $ {x} text"`},
	} {
		got, err := sc.render(tc.in)
		b, _ := json.Marshal(got)
		if err != nil || string(b) != tc.want {
			t.Errorf("render(%v) = %s, %v; want %s", tc.in, b, err, tc.want)
		}
	}
	for _, bad := range []string{"${args/nope}", "x ${steps.late/a}", "${steps.build/list/9}"} {
		if _, err := sc.render(bad); err == nil {
			t.Errorf("render(%q) names no value, yet no error", bad)
		}
	}
	for cond, want := range map[string]bool{
		"":                                 true,
		"${args/ref}":                      true,
		"${args/nope}":                     false,
		"${args/ref} == v1":                true,
		"${args/ref} == 'v1'":              true,
		"${args/n} == 3":                   true,
		"${args/ref} != v1":                false,
		"${steps.skip.outcome} == skipped": true,
		"${args/nope} != x":                true,
	} {
		c, err := parseCondition(cond)
		if err != nil || c.holds(sc) != want {
			t.Errorf("%q holds = %v (%v); want %v", cond, c.holds(sc), err, want)
		}
	}
}

// FuzzTemplate: whatever the text of an argument or a condition, parsing
// and filling it neither panics nor reads past what it names.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"${args/ref}", "${steps.a/b/0}", "${steps.a.outcome} == ok", "${", "${}", "${steps.}", "${args/~2}", "x ${args} y != ${steps.a}"} {
		f.Add(s)
	}
	sc := &scope{args: map[string]any{"ref": "v1"}, steps: map[string]*stepState{"a": {outcome: "ok", value: []any{map[string]any{"b": 1.0}}}}}
	f.Fuzz(func(t *testing.T, s string) {
		if rs, err := refs(s); err == nil {
			for _, r := range rs {
				sc.value(r)
			}
			_, _ = sc.render(s)
		}
		if c, err := parseCondition(s); err == nil {
			c.holds(sc)
		}
	})
}
