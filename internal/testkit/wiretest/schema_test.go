package wiretest_test

import (
	"encoding/json"
	"testing"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

func TestCheckCallToolResult(t *testing.T) {
	good := []string{
		`{"resultType":"complete","content":[]}`,
		`{"resultType":"complete","content":[{"type":"text","text":"hi"}],"structuredContent":{"n":1},"isError":true}`,
	}
	bad := []string{
		`{"content":[{"type":"text","text":"hi"}]}`,             // no resultType
		`{"resultType":"complete"}`,                             // no content
		`{"resultType":"complete","content":[{"type":"text"}]}`, // a text block without text
		`[]`,
	}
	for _, s := range good {
		if err := wiretest.CheckCallToolResult(json.RawMessage(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range bad {
		if err := wiretest.CheckCallToolResult(json.RawMessage(s)); err == nil {
			t.Errorf("%s: accepted", s)
		}
	}
}
