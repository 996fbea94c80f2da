package wiretest

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// schema2026 is the JSON Schema of the 2026-07-28 revision, as the
// specification publishes it (modelcontextprotocol/modelcontextprotocol,
// schema/2026-07-28/schema.json).
//
//go:embed schema/2026-07-28.json
var schema2026 []byte

var (
	callToolResultOnce sync.Once
	callToolResult     *jsonschema.Resolved
	callToolResultErr  error
)

// CheckCallToolResult reports whether raw is a CallToolResult of the
// 2026-07-28 schema (resultType, content, every content block's shape),
// as a client of that revision validates a tools/call answer and a
// completed task's result. The error names what does not fit.
func CheckCallToolResult(raw json.RawMessage) error {
	callToolResultOnce.Do(func() {
		var doc struct {
			Defs map[string]*jsonschema.Schema `json:"$defs"`
		}
		if err := json.Unmarshal(schema2026, &doc); err != nil {
			callToolResultErr = err
			return
		}
		root := &jsonschema.Schema{Ref: "#/$defs/CallToolResult", Defs: doc.Defs}
		callToolResult, callToolResultErr = root.Resolve(nil)
	})
	if callToolResultErr != nil {
		return fmt.Errorf("the 2026-07-28 schema: %w", callToolResultErr)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := callToolResult.Validate(v); err != nil {
		return fmt.Errorf("not a 2026-07-28 CallToolResult: %w (%.300s)", err, raw)
	}
	return nil
}
