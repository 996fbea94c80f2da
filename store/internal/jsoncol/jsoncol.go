// Package jsoncol encodes and decodes the JSON columns of a task (its error
// and its input requests and responses) for the store backends, keeping
// every client- or tool-supplied JSON value byte for byte.
package jsoncol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/mcptask/mcptask/task"
)

// EncodeError writes e as a JSON object, keeping e.Data byte for byte. A
// nil error gives nil (a NULL column).
func EncodeError(e *task.Error) ([]byte, error) {
	if e == nil {
		return nil, nil
	}
	msg, err := json.Marshal(e.Message)
	if err != nil {
		return nil, err
	}
	b := []byte(`{"code":`)
	b = strconv.AppendInt(b, e.Code, 10)
	b = append(b, `,"message":`...)
	b = append(b, msg...)
	if len(e.Data) > 0 {
		if !json.Valid(e.Data) {
			return nil, fmt.Errorf("error data is not valid JSON")
		}
		b = append(b, `,"data":`...)
		b = append(b, e.Data...)
	}
	return append(b, '}'), nil
}

// EncodeMap writes m as a JSON object with sorted keys, keeping each value
// byte for byte (encoding/json would re-encode them). A nil map gives nil
// (a NULL column), an empty one {}; a nil value is null.
func EncodeMap(m map[string]json.RawMessage) ([]byte, error) {
	if m == nil {
		return nil, nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if !utf8.ValidString(k) {
			return nil, fmt.Errorf("key %q is not valid UTF-8", k)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		kj, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(kj)
		b.WriteByte(':')
		v := m[k]
		switch {
		case len(v) == 0:
			b.WriteString("null")
		case !json.Valid(v):
			return nil, fmt.Errorf("the value for %q is not valid JSON", k)
		default:
			b.Write(v)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Decode sets t's Error, InputRequests and InputResponses from their
// columns (nil for NULL). A column that is not valid JSON is reported by
// name.
func Decode(t *task.Task, errJSON, inputRequests, inputResponses []byte) error {
	if errJSON != nil {
		t.Error = new(task.Error)
		if err := json.Unmarshal(errJSON, t.Error); err != nil {
			return fmt.Errorf("task %s: corrupt error column: %w", t.ID, err)
		}
	}
	if inputRequests != nil {
		if err := json.Unmarshal(inputRequests, &t.InputRequests); err != nil {
			return fmt.Errorf("task %s: corrupt input_requests column: %w", t.ID, err)
		}
	}
	if inputResponses != nil {
		if err := json.Unmarshal(inputResponses, &t.InputResponses); err != nil {
			return fmt.Errorf("task %s: corrupt input_responses column: %w", t.ID, err)
		}
	}
	return nil
}

// EncodeCorrelation writes a correlation map (task.Task.Correlation,
// task.Operation.Correlation) as a JSON object with sorted keys, after
// task.CheckCorrelation. An empty map gives "" (the column's none).
func EncodeCorrelation(c map[string]string) (string, error) {
	if len(c) == 0 {
		return "", nil
	}
	if err := task.CheckCorrelation(c); err != nil {
		return "", err
	}
	b, err := json.Marshal(c) // encoding/json sorts map keys
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// DecodeCorrelation reads what EncodeCorrelation wrote: nil for "".
func DecodeCorrelation(col string) (map[string]string, error) {
	if col == "" {
		return nil, nil
	}
	var c map[string]string
	if err := json.Unmarshal([]byte(col), &c); err != nil {
		return nil, fmt.Errorf("corrupt correlation column: %w", err)
	}
	if len(c) == 0 {
		return nil, nil
	}
	return c, nil
}
