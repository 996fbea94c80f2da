package mcptask_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// registerChatty adds the tool "chatty": it logs three lines (one on
// stderr), waits for the gate label, logs one more and completes.
func registerChatty(ts *mcptask.Server, g *gates) {
	mcptask.AddTool(ts, &mcp.Tool{Name: "chatty", Description: "logs"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sleepArgs) (*mcp.CallToolResult, any, error) {
			tk := mcptask.FromContext(ctx)
			tk.Log("line 1")
			tk.Logf("line %d", 2)
			tk.LogStream(mcptask.LogStreamStderr, "line 3")
			select {
			case <-g.get(in.Label):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			tk.Log("line 4")
			return text("done " + in.Label), nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Required})
}

// readLog sends resources/read of uri on the 2026-07-28 wire and returns
// the text and the io.mcptask/log page.
func readLog(ctx context.Context, t *testing.T, c *wiretest.Client, uri string) (string, wire.LogPage, error) {
	t.Helper()
	var res struct {
		Meta     map[string]json.RawMessage `json:"_meta"`
		Contents []struct {
			URI      string `json:"uri"`
			MIMEType string `json:"mimeType"`
			Text     string `json:"text"`
		} `json:"contents"`
	}
	var page wire.LogPage
	if err := c.Result(ctx, "resources/read", map[string]any{"uri": uri}, &res); err != nil {
		return "", page, err
	}
	if len(res.Contents) != 1 || res.Contents[0].URI != uri {
		t.Fatalf("resources/read of %s: contents %+v", uri, res.Contents)
	}
	if err := json.Unmarshal(res.Meta[wire.MetaLog], &page); err != nil {
		t.Fatalf("resources/read of %s: _meta %v: %v", uri, res.Meta, err)
	}
	return res.Contents[0].Text, page, nil
}

// TestTaskLog2026 follows a task's log on the 2026-07-28 wire as a
// generic client would: the resource template is listed (and the
// resources capability advertised), tasks/get links the log once the
// work logged, resources/read answers the lines as text with the
// cursor to continue from and the task's status, the lines logged later
// follow from that cursor, format=json gives each line's number, time
// and stream, and an unknown task's log is an unknown resource.
func TestTaskLog2026(t *testing.T) {
	g := &gates{}
	s := startServerWith(t, filepath.Join(t.TempDir(), "tasks.db"), func(ts *mcptask.Server) {
		registerTestTools(ts, g)
		registerChatty(ts, g)
	})
	c, _ := clients(s)
	ctx := ctxT(t)

	var disc struct {
		Capabilities struct {
			Resources map[string]any `json:"resources"`
		} `json:"capabilities"`
	}
	if err := c.Result(ctx, "server/discover", map[string]any{}, &disc); err != nil {
		t.Fatal(err)
	}
	if disc.Capabilities.Resources == nil {
		t.Error("server/discover advertises no resources capability")
	}
	var tmpls struct {
		ResourceTemplates []struct {
			URITemplate string `json:"uriTemplate"`
		} `json:"resourceTemplates"`
	}
	if err := c.Result(ctx, "resources/templates/list", map[string]any{}, &tmpls); err != nil {
		t.Fatal(err)
	}
	if len(tmpls.ResourceTemplates) != 1 || tmpls.ResourceTemplates[0].URITemplate != wire.LogURITemplate {
		t.Errorf("resources/templates/list = %+v, want the task log's template", tmpls.ResourceTemplates)
	}

	h, err := c.CallTool(ctx, "chatty", map[string]any{"label": "chatty-26"})
	if err != nil {
		t.Fatal(err)
	}
	uri := wire.LogURI(h.TaskID)
	var text string
	var page wire.LogPage
	// The lines reach the store within the engine's flush interval.
	for page.Last < 3 {
		if text, page, err = readLog(ctx, t, c, uri); err != nil {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatal("the log never had 3 lines")
		}
	}
	if text != "line 1\nline 2\nline 3\n" || page.Next != 3 || page.Status != "working" || page.More {
		t.Errorf("the running task's log: %q %+v", text, page)
	}
	var got struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if err := c.Result(ctx, wire.MethodTasksGet, map[string]any{"taskId": h.TaskID}, &got); err != nil {
		t.Fatal(err)
	}
	var link wire.LogLink
	if err := json.Unmarshal(got.Meta[wire.MetaLog], &link); err != nil || link.URI != uri || link.Last != 3 {
		t.Errorf("tasks/get _meta %s = %s, want the link to %s with last 3", wire.MetaLog, got.Meta[wire.MetaLog], uri)
	}

	close(g.get("chatty-26"))
	if _, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal); err != nil {
		t.Fatal(err)
	}
	// The work's last line was written before its outcome.
	text, page, err = readLog(ctx, t, c, fmt.Sprintf("%s?cursor=%d", uri, page.Next))
	if err != nil || text != "line 4\n" || page.Next != 4 || page.Status != "completed" || page.More {
		t.Errorf("the rest after the task completed: %q %+v %v", text, page, err)
	}
	text, _, err = readLog(ctx, t, c, uri+"?cursor=1&limit=2&format=json")
	var lines wire.LogLines
	if err != nil || json.Unmarshal([]byte(text), &lines) != nil || len(lines.Lines) != 2 {
		t.Fatalf("format=json: %s %v", text, err)
	}
	if l := lines.Lines[1]; l.Seq != 3 || l.Stream != "stderr" || l.Text != "line 3" || l.Time == "" {
		t.Errorf("line 3 as JSON: %+v", l)
	}
	if l := lines.Lines[0]; l.Seq != 2 || l.Stream != "log" {
		t.Errorf("line 2 as JSON: %+v", l)
	}

	for _, bad := range []string{wire.LogURI(string(task.NewID())), "mcptask://tasks/not-an-id/log"} {
		var we *wiretest.Error
		if _, _, err := readLog(ctx, t, c, bad); !errors.As(err, &we) || we.Code != -32602 {
			t.Errorf("resources/read of %s: %v, want -32602", bad, err)
		}
	}
	var we *wiretest.Error
	if _, _, err := readLog(ctx, t, c, uri+"?cursor=x"); !errors.As(err, &we) || we.Code != -32602 || !strings.Contains(we.Message, "cursor") {
		t.Errorf("a bad cursor: %v", err)
	}
}

// TestResultLink: with Options.ResultLinkBytes, a result larger than the
// threshold is answered as one resource_link to the task's result
// resource, on both wires (tasks/get on 2026-07-28, tasks/result on
// 2025-11-25), and resources/read of it answers the whole result; a
// small result stays inline; an unknown task's result is an unknown
// resource.
func TestResultLink(t *testing.T) {
	g := &gates{}
	s := startServerOpts(t, filepath.Join(t.TempDir(), "tasks.db"), mcptask.Options{ResultLinkBytes: 10 << 10}, func(ts *mcptask.Server) {
		registerTestTools(ts, g)
		mcptask.AddTool(ts, &mcp.Tool{Name: "big", Description: "a 20 KiB result"},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return text(strings.Repeat("y", 20<<10)), nil, nil
			}, mcptask.ToolOptions{Support: mcptask.Optional})
	})
	c, _ := clients(s)
	ctx := ctxT(t)

	big, err := c.CallTool(ctx, "big", nil)
	if err != nil {
		t.Fatal(err)
	}
	small, err := c.CallTool(ctx, "work", map[string]any{"label": "small", "millis": -1})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := c.WaitFor(ctx, big.TaskID, wiretest.Terminal)
	if err != nil || tk.Status != "completed" {
		t.Fatalf("big: %+v, %v", tk, err)
	}
	var linked struct {
		Content []struct {
			Type     string `json:"type"`
			URI      string `json:"uri"`
			MIMEType string `json:"mimeType"`
			Size     int    `json:"size"`
		} `json:"content"`
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(tk.Result, &linked); err != nil || len(linked.Content) != 1 || linked.Content[0].Type != "resource_link" ||
		linked.Content[0].URI != wire.ResultURI(big.TaskID) || linked.Content[0].Size < 20<<10 || linked.Meta[wire.MetaResultLink] == nil {
		t.Fatalf("the large result on 2026-07-28: %.300s (%v)", tk.Result, err)
	}
	var read struct {
		Contents []struct {
			MIMEType string `json:"mimeType"`
			Text     string `json:"text"`
		} `json:"contents"`
	}
	if err := c.Result(ctx, "resources/read", map[string]any{"uri": linked.Content[0].URI}, &read); err != nil || len(read.Contents) != 1 {
		t.Fatalf("resources/read of the result: %v", err)
	}
	if text := resultText(t, json.RawMessage(read.Contents[0].Text)); text != strings.Repeat("y", 20<<10) || read.Contents[0].MIMEType != "application/json" {
		t.Errorf("the result resource: %s, %d bytes of text", read.Contents[0].MIMEType, len(text))
	}
	close(g.get("small"))
	tk, err = c.WaitFor(ctx, small.TaskID, wiretest.Terminal)
	if err != nil || resultText(t, tk.Result) != "done small" {
		t.Errorf("the small result: %+v, %v", tk, err)
	}
	// The Go client reads a linked result whole, on both wires.
	for _, w := range []string{client.Wire20260728, client.Wire20251125} {
		gc, err := client.Dial(ctx, s.url, &client.Options{ProtocolVersion: w})
		if err != nil {
			t.Fatal(err)
		}
		call, err := gc.CallTool(ctx, "big", nil)
		if err != nil || call.Task == nil {
			t.Fatalf("%s: big: %+v, %v", w, call, err)
		}
		res, err := gc.Wait(ctx, call.Task.ID, nil)
		if err != nil || len(res.Content) != 1 {
			t.Fatalf("%s: Wait: %+v, %v", w, res, err)
		}
		if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != strings.Repeat("y", 20<<10) {
			t.Errorf("%s: the Go client's result is not the whole result: %T", w, res.Content[0])
		}
		gc.Close()
	}
	var we *wiretest.Error
	if err := c.Result(ctx, "resources/read", map[string]any{"uri": wire.ResultURI(string(task.NewID()))}, &read); !errors.As(err, &we) || we.Code != -32602 {
		t.Errorf("an unknown task's result: %v", err)
	}

	// 2025-11-25: tasks/result answers the link too (the in-memory
	// session of Server.Run), and the session reads the resource.
	rs := startRaw2025With(t, mcptask.Options{ResultLinkBytes: 10 << 10}, nil)
	h := rs.callTask(t, "huge", map[string]any{}, nil)
	var res map[string]any
	if err := rs.call("tasks/result", map[string]any{"taskId": h.TaskID}, &res); err != nil {
		t.Fatal(err)
	}
	content, _ := res["content"].([]any)
	first, _ := content[0].(map[string]any)
	if len(content) != 1 || first["type"] != "resource_link" || first["uri"] != wire.ResultURI(h.TaskID) {
		t.Fatalf("tasks/result of the large result on 2025-11-25: %v", res)
	}
	if err := rs.call("resources/read", map[string]any{"uri": first["uri"]}, &read); err != nil || len(read.Contents) != 1 ||
		wireResultText(t, json.RawMessage(read.Contents[0].Text), "") != strings.Repeat("x", 100<<10) {
		t.Errorf("resources/read of the result on 2025-11-25: %v", err)
	}
}
