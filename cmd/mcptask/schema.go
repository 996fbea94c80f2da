package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// fieldSpec is one top-level property of a JSON schema: a tool's input
// schema or an elicitation's requested schema.
type fieldSpec struct {
	name        string
	title       string
	description string
	types       []string // "string", "number", "integer", "boolean", "array", "object", "null"
	required    bool
	choices     []choice // enum values (for an array: of its items)
	def         any      // default value, if hasDef
	hasDef      bool
	minimum     *float64
	maximum     *float64
}

// choice is one allowed value of an enum, with its label.
type choice struct {
	value any
	label string
}

func (f *fieldSpec) is(t string) bool { return slices.Contains(f.types, t) }

// onlyString reports whether the property takes strings and nothing else.
func (f *fieldSpec) onlyString() bool {
	return len(f.types) > 0 && !slices.ContainsFunc(f.types, func(t string) bool { return t != "string" })
}

// typeName is the property's type as the help shows it.
func (f *fieldSpec) typeName() string {
	var ts []string
	for _, t := range f.types {
		if t != "null" || len(f.types) == 1 {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return "any"
	}
	return strings.Join(ts, "|")
}

// label is the property's name for a prompt: its title, else its name.
func (f *fieldSpec) label() string {
	if f.title != "" {
		return f.title
	}
	return f.name
}

type schemaProp struct {
	Type        json.RawMessage `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Enum        []any           `json:"enum"`
	EnumNames   []string        `json:"enumNames"`
	OneOf       []constChoice   `json:"oneOf"`
	AnyOf       []constChoice   `json:"anyOf"`
	Default     json.RawMessage `json:"default"`
	Minimum     *float64        `json:"minimum"`
	Maximum     *float64        `json:"maximum"`
	Items       *schemaProp     `json:"items"`
}

type constChoice struct {
	Const any    `json:"const"`
	Title string `json:"title"`
}

// parseSchema returns the top-level properties of a JSON schema (any
// value that marshals to one), required ones first, otherwise in the
// schema's order.
func parseSchema(schema any) ([]fieldSpec, error) {
	if schema == nil {
		return nil, nil
	}
	data, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("schema: %v", err)
	}
	if len(s.Properties) == 0 || string(s.Properties) == "null" {
		return nil, nil
	}
	keys, err := objectKeys(s.Properties)
	if err != nil {
		return nil, fmt.Errorf("schema properties: %v", err)
	}
	var props map[string]schemaProp
	if err := json.Unmarshal(s.Properties, &props); err != nil {
		return nil, fmt.Errorf("schema properties: %v", err)
	}
	var fields []fieldSpec
	for _, k := range keys {
		p := props[k]
		f := fieldSpec{name: k, title: p.Title, description: p.Description, required: slices.Contains(s.Required, k),
			minimum: p.Minimum, maximum: p.Maximum}
		f.types = schemaTypes(p.Type)
		f.choices = choicesOf(&p)
		if len(f.choices) == 0 && p.Items != nil {
			f.choices = choicesOf(p.Items)
		}
		if len(f.types) == 0 && len(f.choices) > 0 {
			if _, ok := f.choices[0].value.(string); ok {
				f.types = []string{"string"}
			}
		}
		if len(p.Default) > 0 {
			var v any
			if json.Unmarshal(p.Default, &v) == nil {
				if x, ok := v.(float64); ok && f.is("integer") && x == math.Trunc(x) {
					v = int64(x)
				}
				f.def, f.hasDef = v, true
			}
		}
		fields = append(fields, f)
	}
	slices.SortStableFunc(fields, func(a, b fieldSpec) int {
		switch {
		case a.required && !b.required:
			return -1
		case b.required && !a.required:
			return 1
		}
		return 0
	})
	return fields, nil
}

func schemaTypes(raw json.RawMessage) []string {
	var one string
	if json.Unmarshal(raw, &one) == nil && one != "" {
		return []string{one}
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		return many
	}
	return nil
}

func choicesOf(p *schemaProp) []choice {
	var cs []choice
	for i, v := range p.Enum {
		c := choice{value: v, label: fmt.Sprint(v)}
		if i < len(p.EnumNames) && p.EnumNames[i] != "" {
			c.label = p.EnumNames[i]
		}
		cs = append(cs, c)
	}
	alts := append(p.OneOf, p.AnyOf...)
	for _, o := range alts {
		if o.Const == nil {
			// A branch that is no constant (anyOf: [{"const": "auto"},
			// {"type": "integer"}]): the values are not a closed list.
			return cs
		}
	}
	for _, o := range alts {
		c := choice{value: o.Const, label: o.Title}
		if c.label == "" {
			c.label = fmt.Sprint(o.Const)
		}
		cs = append(cs, c)
	}
	return cs
}

// objectKeys returns the keys of a JSON object in their order.
func objectKeys(data []byte) ([]string, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	if t != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	var keys []string
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// parseFieldInput reads the text a person typed (or gave with --answer)
// for a property, strictly by its type.
func parseFieldInput(f *fieldSpec, text string) (any, error) {
	text = strings.TrimSpace(text)
	if len(f.choices) > 0 && !f.is("array") {
		return pickChoice(f.choices, text)
	}
	switch {
	case f.is("array"):
		var out []any
		for part := range strings.SplitSeq(text, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			if len(f.choices) > 0 {
				v, err := pickChoice(f.choices, part)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			} else {
				out = append(out, part)
			}
		}
		return out, nil
	case f.is("boolean"):
		switch strings.ToLower(text) {
		case "y", "yes", "true", "t", "1", "on":
			return true, nil
		case "n", "no", "false", "f", "0", "off":
			return false, nil
		}
		return nil, errors.New("answer y or n")
	case f.is("integer"):
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return nil, errors.New("not a whole number")
		}
		if err := f.checkRange(float64(n)); err != nil {
			return nil, err
		}
		return n, nil
	case f.is("number"):
		x, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, errors.New("not a number")
		}
		if err := f.checkRange(x); err != nil {
			return nil, err
		}
		return x, nil
	case f.is("string"):
		return text, nil
	}
	return coerceArg(text, f), nil
}

func (f *fieldSpec) checkRange(x float64) error {
	if f.minimum != nil && x < *f.minimum {
		return fmt.Errorf("must be at least %v", *f.minimum)
	}
	if f.maximum != nil && x > *f.maximum {
		return fmt.Errorf("must be at most %v", *f.maximum)
	}
	return nil
}

// pickChoice finds the choice a person meant: its value, its label or its
// number in the list.
func pickChoice(cs []choice, text string) (any, error) {
	for _, c := range cs {
		if fmt.Sprint(c.value) == text || strings.EqualFold(c.label, text) {
			return c.value, nil
		}
	}
	if n, err := strconv.Atoi(text); err == nil && n >= 1 && n <= len(cs) {
		return cs[n-1].value, nil
	}
	var names []string
	for _, c := range cs {
		names = append(names, fmt.Sprint(c.value))
	}
	return nil, fmt.Errorf("choose one of %s (or its number)", strings.Join(names, ", "))
}

// checkValue says, in words, how v (a decoded JSON value) breaks f's
// rules, e.g. "steps must be at least 1"; nil when it keeps them. What
// it cannot tell (a schema's other keywords) is left to the server.
func (f *fieldSpec) checkValue(v any) error {
	if v == nil {
		if f.is("null") || len(f.types) == 0 {
			return nil
		}
		return fmt.Errorf("%s must not be null", f.name)
	}
	if len(f.choices) > 0 && !f.is("array") {
		for _, c := range f.choices {
			if sameValue(c.value, v) {
				return nil
			}
		}
		return fmt.Errorf("%s must be one of %s", f.name, choiceList(f.choices))
	}
	if len(f.types) == 0 {
		return nil
	}
	var x float64
	isNum := false
	switch n := v.(type) {
	case float64:
		x, isNum = n, true
	case int64:
		x, isNum = float64(n), true
	case json.Number:
		if y, err := n.Float64(); err == nil {
			x, isNum = y, true
		}
	}
	ok := false
	for _, t := range f.types {
		switch t {
		case "boolean":
			_, ok = v.(bool)
		case "string":
			_, ok = v.(string)
		case "number":
			ok = isNum
		case "integer":
			ok = isNum && x == math.Trunc(x)
		case "array":
			_, ok = v.([]any)
		case "object":
			_, ok = v.(map[string]any)
		}
		if ok {
			break
		}
	}
	if !ok {
		return fmt.Errorf("%s must be %s, not %s", f.name, typeWords(f.types), valueWords(v))
	}
	if isNum {
		if err := f.checkRange(x); err != nil {
			return fmt.Errorf("%s %v", f.name, err)
		}
	}
	return nil
}

// checkObject says, in words, how content breaks the rules of fields (a
// schema's top-level properties): a missing required field, a value of
// the wrong type or out of range, or (closed: the schema allows no other
// property) a field the schema does not have. Nil when it keeps them.
func checkObject(fields []fieldSpec, closed bool, content map[string]any) error {
	for i := range fields {
		f := &fields[i]
		v, ok := content[f.name]
		if !ok {
			if f.required && !f.hasDef { // a server applies the default
				return fmt.Errorf("%s is required", f.name)
			}
			continue
		}
		if err := f.checkValue(v); err != nil {
			return err
		}
	}
	if closed {
		for _, k := range slices.Sorted(maps.Keys(content)) {
			if !slices.ContainsFunc(fields, func(f fieldSpec) bool { return f.name == k }) {
				var names []string
				for _, f := range fields {
					names = append(names, f.name)
				}
				if len(names) == 0 {
					return fmt.Errorf("there is no field %s: it takes none", k)
				}
				return fmt.Errorf("there is no field %s (the fields are %s)", k, strings.Join(names, ", "))
			}
		}
	}
	return nil
}

// schemaClosed reports whether a JSON schema allows no property but its
// own (additionalProperties: false), as far as mcptask can tell: a schema
// whose other keywords may allow more (patternProperties, allOf, anyOf,
// oneOf, $ref) is left to the server.
func schemaClosed(schema any) bool {
	data, err := json.Marshal(schema)
	if err != nil {
		return false
	}
	var s map[string]json.RawMessage
	if json.Unmarshal(data, &s) != nil || string(bytes.TrimSpace(s["additionalProperties"])) != "false" {
		return false
	}
	for _, k := range []string{"patternProperties", "allOf", "anyOf", "oneOf", "$ref", "unevaluatedProperties", "dependentSchemas", "if"} {
		if _, ok := s[k]; ok {
			return false
		}
	}
	return true
}

// typeWords names JSON types for people: "true or false", "a whole
// number", "text", ...
func typeWords(types []string) string {
	var ws []string
	for _, t := range types {
		switch t {
		case "boolean":
			ws = append(ws, "true or false")
		case "integer":
			ws = append(ws, "a whole number")
		case "number":
			ws = append(ws, "a number")
		case "string":
			ws = append(ws, "text")
		case "array":
			ws = append(ws, "a list")
		case "object":
			ws = append(ws, "an object")
		case "null":
			ws = append(ws, "null")
		}
	}
	return strings.Join(ws, " or ")
}

// valueWords describes a decoded JSON value for an error message.
func valueWords(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(clipText(v, 40))
	case bool, float64, int64, json.Number:
		return fmt.Sprint(v)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprint(v)
}

// choiceList lists the values of choices, quoted when text.
func choiceList(cs []choice) string {
	var s []string
	for _, c := range cs {
		if str, ok := c.value.(string); ok {
			s = append(s, strconv.Quote(str))
		} else {
			s = append(s, fmt.Sprint(c.value))
		}
	}
	return strings.Join(s, ", ")
}

// sameValue reports whether two decoded JSON values are equal (numbers
// by value, whatever their Go type or spelling: 2 is 2.0).
func sameValue(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// number returns v as a float64 when it is a JSON number.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// clipText cuts s to n bytes on a rune boundary, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
