package httpjob

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// placeholder is {name} in a template: an argument of the call, or jobId.
var placeholder = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_.-]*)\}`)

// jobIDName is the placeholder of the job's ID.
const jobIDName = "jobId"

// names returns the placeholders of a template.
func names(tmpl string) []string {
	var out []string
	for _, m := range placeholder.FindAllStringSubmatch(tmpl, -1) {
		out = append(out, m[1])
	}
	return out
}

// bodyNames returns the placeholders of a body template, in its strings
// (keys included).
func bodyNames(v any) []string {
	var out []string
	switch v := v.(type) {
	case string:
		out = names(v)
	case map[string]any:
		for k, e := range v {
			out = append(out, names(k)...)
			out = append(out, bodyNames(e)...)
		}
	case []any:
		for _, e := range v {
			out = append(out, bodyNames(e)...)
		}
	}
	return out
}

// vars are the values a template is filled with: the call's arguments
// and, once known, the job's ID.
type vars struct {
	args  map[string]json.RawMessage
	jobID string
	// captured are the values captured from the job API's answers (see
	// Request.Capture), by name.
	captured map[string]string
	// logOffset is {logOffset}: where the log request reads on from
	// ("" outside the log request).
	logOffset string
}

// logOffsetName is the placeholder of the log's offset (see Log).
const logOffsetName = "logOffset"

// text returns the value of name as text: a string as it is, anything
// else as compact JSON; ok is false for an argument not given (or a value
// not captured yet).
func (v vars) text(name string) (string, bool) {
	if name == jobIDName && v.jobID != "" {
		return v.jobID, true
	}
	if name == logOffsetName && v.logOffset != "" {
		return v.logOffset, true
	}
	if c, ok := v.captured[name]; ok {
		return c, true
	}
	raw, ok := v.args[name]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return string(raw), true
}

// fillURL fills a URL template: each value escaped for where it stands
// (a path segment before the '?', a query value after). A path segment
// filled from a value must not be "", "." or ".." (nor decode to one): a
// server resolving dot segments would serve another endpoint, so such a
// value is refused and nothing is sent.
func (v vars) fillURL(tmpl string) (string, error) {
	query := strings.IndexByte(tmpl, '?')
	if query < 0 {
		query = len(tmpl)
	}
	var missing []string
	fill := func(part string, escape func(string) string) string {
		return replaceAll(part, func(name string) string {
			s, ok := v.text(name)
			if !ok {
				missing = append(missing, name)
				return ""
			}
			return escape(s)
		})
	}
	segs := strings.Split(tmpl[:query], "/")
	for i, seg := range segs {
		ns := names(seg)
		if len(ns) == 0 {
			continue
		}
		segs[i] = fill(seg, url.PathEscape)
		if dec, err := url.PathUnescape(segs[i]); err == nil && (dec == "" || dec == "." || dec == "..") && len(missing) == 0 {
			what := "the argument " + ns[0]
			if len(ns) > 1 {
				what = "the arguments " + strings.Join(ns, ", ")
			} else if ns[0] == jobIDName && v.jobID != "" {
				what = "the job ID"
			}
			return "", fmt.Errorf("%s is %q, which cannot be a whole path segment of the URL (%s): it would reach another endpoint; nothing was sent",
				what, dec, seg)
		}
	}
	out := strings.Join(segs, "/") + fill(tmpl[query:], url.QueryEscape)
	if len(missing) > 0 {
		return "", fmt.Errorf("the URL needs the argument %s, which the call did not give", strings.Join(missing, ", "))
	}
	return out, nil
}

// replaceAll replaces each placeholder of tmpl with fn(its name).
func replaceAll(tmpl string, fn func(name string) string) string {
	var b strings.Builder
	last := 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(tmpl, -1) {
		b.WriteString(tmpl[last:m[0]])
		b.WriteString(fn(tmpl[m[2]:m[3]]))
		last = m[1]
	}
	b.WriteString(tmpl[last:])
	return b.String()
}

// fillBody fills a JSON body template: a string that is exactly "{name}"
// becomes the argument's JSON value; other strings (and keys) get the
// values interpolated as text. An object member whose value is exactly
// "{name}" of an argument the call did not give (and whose schema has no
// default) is left out, not sent as null; in a list it is null.
func (v vars) fillBody(tmpl any) any {
	out, _ := v.fillValue(tmpl)
	return out
}

// fillValue is fillBody; ok is false for "{name}" of an argument not
// given.
func (v vars) fillValue(tmpl any) (_ any, ok bool) {
	switch t := tmpl.(type) {
	case string:
		if m := placeholder.FindStringSubmatch(t); m != nil && m[0] == t {
			if m[1] == jobIDName && v.jobID != "" {
				return v.jobID, true
			}
			if c, ok := v.captured[m[1]]; ok {
				return c, true
			}
			raw, ok := v.args[m[1]]
			if !ok {
				return nil, false
			}
			var val any
			_ = json.Unmarshal(raw, &val)
			return val, true
		}
		return v.fillText(t), true
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			if val, ok := v.fillValue(e); ok {
				out[v.fillText(k)] = val
			}
		}
		return out, true
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i], _ = v.fillValue(e)
		}
		return out, true
	}
	return tmpl, true
}

// fillText fills a text template: each placeholder becomes its value as
// text ("" for an argument not given).
func (v vars) fillText(tmpl string) string {
	return placeholder.ReplaceAllStringFunc(tmpl, func(ph string) string {
		s, _ := v.text(ph[1 : len(ph)-1])
		return s
	})
}

// has reports whether every placeholder of req's URL and body has a
// value: a lookup or a log request waits until it does.
func (v vars) has(req Request) bool {
	for _, n := range append(append(names(req.URL), bodyNames(req.Body)...), names(req.BodyText)...) {
		if _, ok := v.text(n); !ok {
			return false
		}
	}
	return true
}

// withDefaults adds to args the default of each property of schema (an
// object schema's "properties") that args lacks.
func withDefaults(args map[string]json.RawMessage, schema map[string]any) {
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		pm, _ := p.(map[string]any)
		d, ok := pm["default"]
		if _, given := args[name]; given || !ok || d == nil {
			continue
		}
		if b, err := json.Marshal(d); err == nil {
			args[name] = b
		}
	}
}

// checkPointer checks the syntax of an RFC 6901 JSON pointer: "" (the
// whole document) or "/" followed by tokens, with "~" only as "~0" or "~1".
func checkPointer(p string) error {
	if p == "" {
		return nil
	}
	if p[0] != '/' {
		return fmt.Errorf("%q is not a JSON pointer: it must be empty or start with '/' (e.g. /data/id)", p)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return fmt.Errorf("%q is not a JSON pointer: '~' must be followed by 0 or 1", p)
		}
	}
	return nil
}

var errNoValue = errors.New("no value there")

// lookup returns the value at the JSON pointer p in doc (decoded JSON).
func lookup(doc any, p string) (any, error) {
	if p == "" {
		return doc, nil
	}
	if err := checkPointer(p); err != nil {
		return nil, err
	}
	cur := doc
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, errNoValue
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) || (len(tok) > 1 && tok[0] == '0') {
				return nil, errNoValue
			}
			cur = c[i]
		default:
			return nil, errNoValue
		}
	}
	return cur, nil
}

// scalarText is a value found by a pointer as text: a string as it is, a
// number or boolean as JSON; ok is false for null, objects and arrays.
func scalarText(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}
