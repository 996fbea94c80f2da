package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// pair is one key=value (or key:=json) argument.
type pair struct {
	key, value string
	raw        bool // key:=json: value must be JSON
}

// parsePair parses "key=value" or "key:=json".
func parsePair(s string) (pair, error) {
	i := strings.IndexByte(s, '=')
	if i < 0 {
		return pair{}, usagef("argument %q is not key=value, key:=json or a JSON object", s)
	}
	p := pair{key: s[:i], value: s[i+1:]}
	if strings.HasSuffix(p.key, ":") {
		p.key, p.raw = strings.TrimSuffix(p.key, ":"), true
	}
	if p.key == "" {
		return pair{}, usagef("argument %q has no key before the =", s)
	}
	if p.raw && !json.Valid([]byte(p.value)) {
		return pair{}, usagef("argument %s:=%s: the value after := must be JSON", p.key, p.value)
	}
	return p, nil
}

// toolArgs are the arguments of a call as the command line gave them.
type toolArgs struct {
	base  map[string]any // from --args and JSON objects among the arguments
	pairs []pair         // key=value arguments, applied over base
}

// parseToolArgs reads --args (JSON, @file or - for stdin) and the call's
// arguments after the tool's name.
func parseToolArgs(argsFlag string, stdin io.Reader, positional []string) (*toolArgs, error) {
	ta := &toolArgs{}
	if argsFlag != "" {
		var data []byte
		var err error
		var from string
		switch {
		case argsFlag == "-" || argsFlag == "@-":
			from = "standard input"
			data, err = io.ReadAll(stdin)
		case strings.HasPrefix(argsFlag, "@"):
			from = argsFlag[1:]
			data, err = os.ReadFile(argsFlag[1:])
		default:
			from, data = "--args", []byte(argsFlag)
		}
		if err != nil {
			return nil, usagef("--args: %v", err)
		}
		m, err := decodeObject(data)
		if err != nil {
			return nil, usagef("--args: %s: %v", from, err)
		}
		ta.base = m
	}
	for _, s := range positional {
		if strings.HasPrefix(strings.TrimSpace(s), "{") {
			m, err := decodeObject([]byte(s))
			if err != nil {
				return nil, usagef("argument %q: %v", s, err)
			}
			if ta.base == nil {
				ta.base = m
			} else {
				for k, v := range m {
					ta.base[k] = v
				}
			}
			continue
		}
		p, err := parsePair(s)
		if err != nil {
			return nil, err
		}
		ta.pairs = append(ta.pairs, p)
	}
	return ta, nil
}

// decodeObject decodes a JSON object, keeping numbers exact.
func decodeObject(data []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("not valid JSON: more after the object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("must be a JSON object such as {\"n\": 10}")
	}
	return m, nil
}

// decodeJSON decodes one JSON value, keeping numbers exact.
func decodeJSON(s string) (any, bool) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil, false
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	return v, true
}

// needsSchema reports whether some key=value is ambiguous: its value reads
// as JSON other than a string (1.2, true, null, [..]), which a string
// argument would want as text.
func (ta *toolArgs) needsSchema() bool {
	for _, p := range ta.pairs {
		if p.raw {
			continue
		}
		if v, ok := decodeJSON(p.value); ok {
			if _, isString := v.(string); !isString {
				return true
			}
		}
	}
	return false
}

// build returns the arguments object. fields, when known, are the tool's
// input schema properties: a key=value whose property takes only strings
// keeps its value as text.
func (ta *toolArgs) build(fields []fieldSpec) map[string]any {
	out := map[string]any{}
	for k, v := range ta.base {
		out[k] = v
	}
	for _, p := range ta.pairs {
		if p.raw {
			v, _ := decodeJSON(p.value)
			out[p.key] = v
			continue
		}
		var f *fieldSpec
		if i := slices.IndexFunc(fields, func(f fieldSpec) bool { return f.name == p.key }); i >= 0 {
			f = &fields[i]
		}
		out[p.key] = coerceArg(p.value, f)
	}
	return out
}

// coerceArg interprets the value of key=value: JSON if it parses (10,
// true, {"a":1}, "quoted"), else the text itself; but the text itself when
// the property f takes only strings.
func coerceArg(text string, f *fieldSpec) any {
	v, ok := decodeJSON(text)
	if !ok {
		return text
	}
	if s, isString := v.(string); isString {
		return s
	}
	if f != nil && f.onlyString() {
		return text
	}
	return v
}

// splitCommand splits a command line into words, honouring single and
// double quotes and backslashes, as a shell would (without expansions).
func splitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\\':
			escaped, inWord = true, true
		case quote == '"':
			if r == '"' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote in %q", quote, s)
	}
	if escaped {
		return nil, fmt.Errorf("trailing backslash in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errors.New("empty command")
	}
	return words, nil
}
