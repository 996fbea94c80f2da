package adapter

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckAnswer(t *testing.T) {
	confirm := `{"method":"elicitation/create","params":{"mode":"form","message":"Deploy?","requestedSchema":{"type":"object","properties":{"confirm":{"type":"boolean"},"action":{"type":"string","enum":["go","stop"]}},"required":["confirm"]}}}`
	url := `{"method":"elicitation/create","params":{"mode":"url","message":"Log in","url":"https://example.com/x","elicitationId":"e1"}}`
	sample := `{"method":"sampling/createMessage","params":{"maxTokens":10,"messages":[]}}`
	for _, c := range []struct {
		name, request, answer, wantErr string
	}{
		{"accepted, valid", confirm, `{"action":"accept","content":{"confirm":true}}`, ""},
		{"declined", confirm, `{"action":"decline"}`, ""},
		{"cancelled", confirm, `{"action":"cancel"}`, ""},
		{"a bare string", confirm, `"yes"`, "must be an object"},
		{"no action", confirm, `{"content":{"confirm":true}}`, "needs an action"},
		{"unknown action", confirm, `{"action":"maybe"}`, `"maybe" is none of`},
		{"wrong type", confirm, `{"action":"accept","content":{"confirm":"yes"}}`, "does not match the requested schema"},
		{"outside the enum", confirm, `{"action":"accept","content":{"confirm":true,"action":"maybe"}}`, "does not match the requested schema"},
		{"missing required", confirm, `{"action":"accept","content":{}}`, "does not match the requested schema"},
		{"accepted without content", confirm, `{"action":"accept"}`, "needs its content"},
		{"url mode, accepted", url, `{"action":"accept"}`, ""},
		{"sampling, valid", sample, `{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}`, ""},
		{"sampling, no model", sample, `{"role":"assistant","content":{"type":"text","text":"hi"}}`, "needs the model"},
		{"sampling, bad role", sample, `{"role":"robot","content":{"type":"text","text":"hi"},"model":"m"}`, "role"},
		{"sampling, a number", sample, `5`, "must be an object"},
	} {
		err := CheckAnswer(json.RawMessage(c.request), json.RawMessage(c.answer))
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.wantErr)
		}
	}
}
