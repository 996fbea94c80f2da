package adapter

import (
	"fmt"

	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CheckCorrelationKeys reports whether keys can be the host correlation
// keys of a server: none twice, and as task.CheckCorrelation takes the
// keys of a correlation map (at most task.MaxCorrelationKeys, each
// non-empty, valid UTF-8 and at most task.MaxCorrelationKey bytes).
func CheckCorrelationKeys(keys []string) error {
	asMap := make(map[string]string, len(keys))
	for _, k := range keys {
		if _, twice := asMap[k]; twice {
			return fmt.Errorf("correlation key %q given twice", k)
		}
		asMap[k] = ""
	}
	return task.CheckCorrelation(asMap)
}

// Correlation returns the host correlation keys of a call's _meta that
// the server reads (Config.CorrelationKeys) with their values, nil when
// the call carries none. A key whose value is not a string, or is the
// empty string, is ignored (a host's other use of the key is none of the
// task's business); a string value longer than task.MaxCorrelationValue
// bytes, or holding a NUL, refuses the call with invalid params (-32602)
// rather than store a cut ID that would match nothing.
func (c *Core) Correlation(meta map[string]any) (map[string]string, error) {
	var out map[string]string
	for _, k := range c.corrKeys {
		v, ok := meta[k].(string)
		if !ok || v == "" {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(c.corrKeys))
		}
		out[k] = v
	}
	if err := task.CheckCorrelation(out); err != nil {
		return nil, InvalidParams(fmt.Sprintf("invalid host correlation key in _meta: %v (a correlation value has at most %d bytes)", err, task.MaxCorrelationValue))
	}
	return out, nil
}

// WithCorrelationOf returns meta with t's host correlation keys under
// wire.MetaCorrelation, for the answers of tasks/get of both wires: meta
// itself when the task has none.
func WithCorrelationOf(t *task.Task, meta mcp.Meta) mcp.Meta {
	if t == nil || len(t.Correlation) == 0 {
		return meta
	}
	if meta == nil {
		meta = mcp.Meta{}
	}
	meta[wire.MetaCorrelation] = task.CloneCorrelation(t.Correlation)
	return meta
}
