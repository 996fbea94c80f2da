package workflow

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A reference names a value a step's arguments or condition read:
//
//	${args}                  the workflow's arguments (an object)
//	${args/service}          a JSON pointer (RFC 6901) into them
//	${steps.build}           the value of step build (see [scope.value])
//	${steps.build/image/tag} a JSON pointer into it
//	${steps.build.outcome}   how step build ended: ok, tool_error,
//	                         failed, cancelled or skipped
var refPattern = regexp.MustCompile(`\$\{([^${}]*)\}`)

// ref is a parsed reference.
type ref struct {
	step    string // "" for args
	outcome bool   // the step's outcome
	pointer string // "" for the whole value
}

// parseRef parses the inside of ${...}.
func parseRef(s string) (ref, error) {
	var r ref
	rest, ok := strings.CutPrefix(s, "args")
	if !ok {
		if rest, ok = strings.CutPrefix(s, "steps."); !ok {
			return r, fmt.Errorf("${%s}: a reference is ${args...} or ${steps.NAME...}", s)
		}
		end := strings.IndexAny(rest, "./")
		if end < 0 {
			end = len(rest)
		}
		r.step, rest = rest[:end], rest[end:]
		if !stepName.MatchString(r.step) {
			return r, fmt.Errorf("${%s}: %q is not a step name", s, r.step)
		}
		if rest == ".outcome" {
			r.outcome = true
			return r, nil
		}
	}
	if rest != "" && !strings.HasPrefix(rest, "/") {
		return r, fmt.Errorf("${%s}: after the name comes a JSON pointer (/a/b) or, for a step, .outcome", s)
	}
	r.pointer = rest
	return r, nil
}

// refs returns the references of a template value (strings anywhere in
// it), or the first malformed one's error.
func refs(v any) ([]ref, error) {
	var out []ref
	var walk func(v any) error
	walk = func(v any) error {
		switch x := v.(type) {
		case string:
			for _, m := range refPattern.FindAllStringSubmatch(x, -1) {
				r, err := parseRef(m[1])
				if err != nil {
					return err
				}
				out = append(out, r)
			}
		case map[string]any:
			for _, e := range x {
				if err := walk(e); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range x {
				if err := walk(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk(v)
}

// scope is what references read while a workflow runs.
type scope struct {
	args  any
	steps map[string]*stepState
	notes map[string]string // what a running step waits for (its approval), by name
}

// value returns the value a reference names; ok is false when it names
// nothing (a missing key, a step not ended).
func (sc *scope) value(r ref) (any, bool) {
	var v any
	if r.step == "" {
		v = sc.args
	} else {
		st := sc.steps[r.step]
		if st == nil || st.outcome == "" {
			return nil, false
		}
		if r.outcome {
			return st.outcome, true
		}
		v = st.value
	}
	return pointer(v, r.pointer)
}

// pointer resolves a JSON pointer in v.
func pointer(v any, p string) (any, bool) {
	if p == "" {
		return v, true
	}
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[tok]
			if !ok {
				return nil, false
			}
			v = e
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// render fills the references of a template value: a string that is one
// reference becomes the value itself (a number stays a number); a
// reference within a longer string is replaced by the value's text (a
// string as it is, anything else as JSON). A reference to nothing is an
// error naming it.
func (sc *scope) render(v any) (any, error) {
	switch x := v.(type) {
	case string:
		if m := refPattern.FindStringSubmatch(x); m != nil && m[0] == x {
			r, _ := parseRef(m[1]) // checked when the workflow was
			val, ok := sc.value(r)
			if !ok {
				return nil, fmt.Errorf("%s names no value", x)
			}
			return val, nil
		}
		var err error
		out := refPattern.ReplaceAllStringFunc(x, func(m string) string {
			r, _ := parseRef(m[2 : len(m)-1])
			val, ok := sc.value(r)
			if !ok {
				if err == nil {
					err = fmt.Errorf("%s names no value", m)
				}
				return ""
			}
			return textOf(val)
		})
		return out, err
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := sc.render(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := sc.render(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

// textOf is a value as text: a string as it is, anything else as JSON.
func textOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// condition is a parsed when: an operand alone (true unless it is
// missing, false, null, 0, "" or empty), or two compared with == or !=
// (as text: ${args/replicas} == 3 holds for the number 3 and the string
// "3").
type condition struct {
	left, right string // templates
	op          string // "", "==" or "!="
}

// parseCondition parses a step's when.
func parseCondition(s string) (*condition, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	c := &condition{left: s}
	for _, op := range []string{"==", "!="} {
		if l, r, ok := strings.Cut(s, op); ok {
			c.left, c.right, c.op = strings.TrimSpace(l), unquote(strings.TrimSpace(r)), op
			if c.left == "" || c.right == "" {
				return nil, fmt.Errorf("%q: both sides of %s are needed", s, op)
			}
			break
		}
	}
	c.left = unquote(c.left)
	for _, side := range []string{c.left, c.right} {
		if _, err := refs(side); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// unquote drops the quotes of a quoted literal ('prod' or "prod").
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// holds evaluates c in sc; a reference to nothing is false (a missing
// key), not an error.
func (c *condition) holds(sc *scope) bool {
	if c == nil {
		return true
	}
	side := func(t string) (any, bool) {
		v, err := sc.render(t)
		return v, err == nil
	}
	l, ok := side(c.left)
	if c.op == "" {
		return ok && truthy(l)
	}
	r, rok := side(c.right)
	eq := ok && rok && textOf(l) == textOf(r)
	return eq == (c.op == "==")
}

// truthy reports whether a value counts as true.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != "" && x != "false"
	case float64:
		return x != 0
	case map[string]any:
		return len(x) > 0
	case []any:
		return len(x) > 0
	}
	return true
}
