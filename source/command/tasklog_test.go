package command

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/wire"
)

// TestCommandTaskLog: a command's output lines reach its task's log as
// they are written, stdout and stderr named as such, the input protocol's
// lines left out, and the log is complete when the task has ended.
func TestCommandTaskLog(t *testing.T) {
	release := filepath.Join(t.TempDir(), "release")
	sc := script(t, `echo "out 1"
echo "err 1" >&2
while [ ! -e "$2" ]; do sleep 0.01; done
echo "out 2"
`)
	c := serve(t, true, Tool{Name: "talk", InputSchema: strSchema("release"), Argv: []string{sc, "--", "{release}"}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := c.CallTool(ctx, "talk", map[string]any{"release": release})
	if err != nil {
		t.Fatal(err)
	}
	read := func(cursor int64) (wire.LogLines, wire.LogPage) {
		t.Helper()
		var res struct {
			Meta     map[string]json.RawMessage `json:"_meta"`
			Contents []struct {
				Text string `json:"text"`
			} `json:"contents"`
		}
		uri := wire.LogURI(h.TaskID) + "?format=json&cursor=" + jsonInt(cursor)
		if err := c.Result(ctx, "resources/read", map[string]any{"uri": uri}, &res); err != nil {
			t.Fatal(err)
		}
		var lines wire.LogLines
		var page wire.LogPage
		if len(res.Contents) != 1 || json.Unmarshal([]byte(res.Contents[0].Text), &lines) != nil || json.Unmarshal(res.Meta[wire.MetaLog], &page) != nil {
			t.Fatalf("resources/read of %s: %+v", uri, res)
		}
		return lines, page
	}
	// Both lines written before the command waits arrive while it runs.
	var got []wire.LogLine
	var page wire.LogPage
	for len(got) < 2 {
		var lines wire.LogLines
		lines, page = read(page.Next)
		got = append(got, lines.Lines...)
		if ctx.Err() != nil {
			t.Fatalf("the log while the command runs: %+v", got)
		}
	}
	if page.Status != "working" {
		t.Errorf("the task is %s while the command waits", page.Status)
	}
	streams := map[string]string{}
	for _, l := range got {
		streams[l.Text] = l.Stream
	}
	if len(got) != 2 || streams["out 1"] != "stdout" || streams["err 1"] != "stderr" {
		t.Errorf("the lines while it runs: %+v", got)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal); err != nil {
		t.Fatal(err)
	}
	lines, page := read(page.Next)
	if len(lines.Lines) != 1 || lines.Lines[0].Text != "out 2" || lines.Lines[0].Seq != 3 || page.Status != "completed" || page.More {
		t.Errorf("the rest once the task ended: %+v %+v", lines, page)
	}
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
