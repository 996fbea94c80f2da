package adapter

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
)

// TestPresentedIsError: a result above the link threshold is answered as
// a link carrying the result's own top-level isError, never one of a
// nested value (a content item's, the structured content's).
func TestPresentedIsError(t *testing.T) {
	c := &Core{resultLink: 1 << 10}
	items := strings.Repeat(`{"type":"text","text":"a line of output, \"isError\":true"},`, 1000)
	for _, tc := range []struct {
		name   string
		result string
		want   bool
	}{
		{"nested only", `{"content":[` + items + `{"type":"text","text":"x","isError":true}],"structuredContent":{"isError":true}}`, false},
		{"nested true, top false", `{"content":[` + items + `{"isError":true}],"isError":false}`, false},
		{"top true after nested", `{"content":[` + items + `{"isError":false}],"isError":true}`, true},
		{"top true first", `{"isError":true,"content":[` + items + `{"isError":false}]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk := &task.Task{ID: task.NewID(), Status: task.Completed, Result: json.RawMessage(tc.result)}
			got := c.Presented(tk)
			if got == tk {
				t.Fatalf("a %d-byte result above a 1 KiB threshold answered inline", len(tc.result))
			}
			var link struct {
				IsError bool              `json:"isError"`
				Meta    map[string]any    `json:"_meta"`
				Content []json.RawMessage `json:"content"`
			}
			if err := json.Unmarshal(got.Result, &link); err != nil {
				t.Fatal(err)
			}
			if link.IsError != tc.want {
				t.Errorf("the link's isError = %v, want %v", link.IsError, tc.want)
			}
			if link.Meta[wire.MetaResultLink] == nil || len(link.Content) != 1 {
				t.Errorf("not a link: %s", got.Result)
			}
			if string(tk.Result) != tc.result {
				t.Error("the task's own result changed")
			}
		})
	}
}
