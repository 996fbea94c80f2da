package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// template is a parsed argv template: each element a sequence of
// literal text and {name} placeholders.
type template [][]part

// part is literal text (name empty) or a placeholder.
type part struct {
	lit  string
	name string
}

// parseTemplate parses argv: {name} (a name of letters, digits, '_' and
// '-', not starting with a digit or '-') is a placeholder, {{ and }} are
// literal braces, any other brace is literal.
func parseTemplate(argv []string) template {
	t := make(template, len(argv))
	for i, el := range argv {
		var parts []part
		var lit strings.Builder
		flush := func() {
			if lit.Len() > 0 {
				parts = append(parts, part{lit: lit.String()})
				lit.Reset()
			}
		}
		for j := 0; j < len(el); {
			switch {
			case strings.HasPrefix(el[j:], "{{"):
				lit.WriteByte('{')
				j += 2
			case strings.HasPrefix(el[j:], "}}"):
				lit.WriteByte('}')
				j += 2
			case el[j] == '{':
				if end := strings.IndexByte(el[j+1:], '}'); end > 0 && isName(el[j+1:j+1+end]) {
					flush()
					parts = append(parts, part{name: el[j+1 : j+1+end]})
					j += end + 2
					continue
				}
				lit.WriteByte('{')
				j++
			default:
				lit.WriteByte(el[j])
				j++
			}
		}
		flush()
		if len(parts) == 0 {
			parts = []part{{lit: ""}}
		}
		t[i] = parts
	}
	return t
}

func isName(s string) bool {
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r == '-' || r >= '0' && r <= '9'):
		default:
			return false
		}
	}
	return s != ""
}

// Placeholders returns the names the template argv uses, in order of
// first use, each once.
func Placeholders(argv []string) []string {
	var names []string
	seen := map[string]bool{}
	for _, el := range parseTemplate(argv) {
		for _, p := range el {
			if p.name != "" && !seen[p.name] {
				seen[p.name] = true
				names = append(names, p.name)
			}
		}
	}
	return names
}

// literal reports whether element i has no placeholder, and its text.
func (t template) literal(i int) (string, bool) {
	var b strings.Builder
	for _, p := range t[i] {
		if p.name != "" {
			return "", false
		}
		b.WriteString(p.lit)
	}
	return b.String(), true
}

// flagMayFollow reports whether element i may begin with a '-' that an
// argument put there: the element before it in the template is a flag
// (literal, starting with '-', "--" included), or a literal "--" came
// earlier (everything after it is an operand).
func (t template) flagMayFollow(i int) bool {
	if i == 0 {
		return false
	}
	if prev, ok := t.literal(i - 1); ok && strings.HasPrefix(prev, "-") {
		return true
	}
	for j := 0; j < i-1; j++ {
		if s, ok := t.literal(j); ok && s == "--" {
			return true
		}
	}
	return false
}

// ArgumentError is an argument the argv template refuses: the command
// is not run.
type ArgumentError struct{ Msg string }

func (e *ArgumentError) Error() string { return e.Msg }

// fill builds the command line from the call's arguments: every value is
// part of exactly one element, as it is (strings) or in JSON form (other
// values), never split or interpreted. An element naming an absent (or
// null) argument takes the schema's default (defaults), else is left
// out. A value that would begin an element with '-' is refused unless
// the template puts a flag or "--" before that element.
func (t template) fill(args map[string]json.RawMessage, defaults map[string]json.RawMessage) ([]string, error) {
	out := make([]string, 0, len(t))
elements:
	for i, el := range t {
		var b strings.Builder
		fromValue := false // the element's first byte came from a value
		for _, p := range el {
			if p.name == "" {
				b.WriteString(p.lit)
				continue
			}
			raw, ok := args[p.name]
			if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
				if raw, ok = defaults[p.name]; !ok {
					continue elements // left out
				}
			}
			v, err := argString(raw)
			if err != nil {
				return nil, &ArgumentError{Msg: fmt.Sprintf("argument %s: %v", p.name, err)}
			}
			if b.Len() == 0 && v != "" {
				fromValue = true
			}
			b.WriteString(v)
		}
		s := b.String()
		if fromValue && strings.HasPrefix(s, "-") && !t.flagMayFollow(i) {
			name := ""
			for _, p := range el {
				if p.name != "" {
					name = p.name
					break
				}
			}
			return nil, &ArgumentError{Msg: fmt.Sprintf("argument %s: %q begins with '-' where the command line takes no flag: an argument never becomes a flag (the command was not run)", name, truncate(s, 64))}
		}
		out = append(out, s)
	}
	return out, nil
}

// argString is a value as one argv element: a string as it is, anything
// else in compact JSON form.
func argString(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		if strings.IndexByte(s, 0) >= 0 {
			return "", fmt.Errorf("contains a NUL byte, which no command line can carry")
		}
		return s, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", err
	}
	return b.String(), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
