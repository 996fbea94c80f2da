package wire2026

import (
	"encoding/json"
	"testing"
)

// TestIDOf: the listen's own result (written when the go-sdk's has not
// come) answers the request's ID, number or string, as the go-sdk decodes
// it; it had no ID at all for a numeric one.
func TestIDOf(t *testing.T) {
	for raw, want := range map[string]any{`2`: int64(2), `"abc"`: "abc"} {
		got := idOf(json.RawMessage(raw))
		if !got.IsValid() || got.Raw() != want {
			t.Errorf("idOf(%s) = %v, want %v", raw, got.Raw(), want)
		}
	}
	if id := idOf(json.RawMessage(`{}`)); id.IsValid() {
		t.Errorf("idOf({}) = %v, want none", id.Raw())
	}
}
