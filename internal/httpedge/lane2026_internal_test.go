package httpedge

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDecodesAs: whenever decodesAs says a _meta value decodes, the
// go-sdk's way (remarshal) agrees.
func TestDecodesAs(t *testing.T) {
	values := []string{
		`{"name":"c","version":"1"}`, `{"name":"c","version":"1","title":"t","description":"d","websiteUrl":"u"}`,
		`{}`, `{"name":5}`, `{"name":null}`, `{"icons":[]}`, `{"icons":5}`, `{"Name":"x"}`, `"x"`, `[]`, `5`,
		`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, `{"extensions":{},"experimental":{"a":[1]}}`,
		`{"extensions":5}`, `{"extensions":null}`, `{"extensions":[]}`, `{"sampling":{}}`, `{"roots":{"listChanged":true}}`,
		`{"roots":5}`, `{"elicitation":"x"}`,
	}
	for _, raw := range values {
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			t.Fatal(err)
		}
		var impl *mcp.Implementation
		if decodesAs(v, implementationStrings, nil) && remarshal(v, &impl) != nil {
			t.Errorf("clientInfo %s: decodesAs says yes, the go-sdk no", raw)
		}
		var caps *sdkClientCapabilities
		if decodesAs(v, nil, capabilityObjects) && remarshal(v, &caps) != nil {
			t.Errorf("clientCapabilities %s: decodesAs says yes, the go-sdk no", raw)
		}
	}
	var typical any
	_ = json.Unmarshal([]byte(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`), &typical)
	if !decodesAs(typical, nil, capabilityObjects) {
		t.Error("the usual capabilities are not recognized")
	}
}
