package mcptask_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool whose work runs two steps as child tasks of another tool, one
// after the other: each is durable and named, so that the work run again
// after a crash finds the finished step (its result) instead of running
// it again. The requester sees one task; a client that knows children
// reads them too.
func ExampleTask_Spawn() {
	dir, _ := os.MkdirTemp("", "mcptask-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(filepath.Join(dir, "tasks.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	eng, _ := engine.New(engine.Options{Store: st, Logger: discard})
	srv := mcp.NewServer(&mcp.Implementation{Name: "example", Version: "1"}, &mcp.ServerOptions{Logger: discard})
	ts, _ := mcptask.New(srv, eng, &mcptask.Options{Logger: discard})

	type buildArgs struct {
		Target string `json:"target"`
	}
	mcptask.AddTool(ts, &mcp.Tool{Name: "build", Description: "Builds a target."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in buildArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Target + " built"}}}, nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Optional})
	mcptask.AddTool(ts, &mcp.Tool{Name: "release", Description: "Builds the server, then the client."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			t := mcptask.FromContext(ctx)
			var out []string
			for _, target := range []string{"server", "client"} {
				_ = t.SetStatusMessage(ctx, "building "+target)
				child, err := t.Spawn(ctx, "build", buildArgs{Target: target}, &mcptask.SpawnOptions{Step: "build-" + target})
				if err != nil {
					return nil, nil, err
				}
				res, err := child.Wait(ctx) // its questions reach the requester through this task
				if err != nil {
					return nil, nil, err
				}
				out = append(out, res.Content[0].(*mcp.TextContent).Text)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(out, ", ")}}}, nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Required, Rerunnable: true}) // a re-run finds its steps

	ctx := context.Background()
	if err := ts.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer ts.Close(ctx)
	hs := httptest.NewServer(ts.Handler(nil))
	defer hs.Close()
	c, err := client.Dial(ctx, hs.URL, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	call, err := c.CallTool(ctx, "release", nil)
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Wait(ctx, call.Task.ID, &client.WaitOptions{Deadline: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	st2, _ := c.Get(ctx, call.Task.ID)
	for _, ch := range st2.Children {
		fmt.Println(ch.Step, ch.Tool, ch.Status)
	}
	// Output:
	// server built, client built
	// build-server build completed
	// build-client build completed
}
