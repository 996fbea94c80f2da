package mcptask_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Turn an ordinary go-sdk tool into a task-capable one, serve it, and call
// it with the mcptask client, which gets a task handle at once and waits
// for the task's result.
func ExampleAddTool() {
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

	type args struct {
		Name string `json:"name"`
	}
	mcptask.AddTool(ts, &mcp.Tool{Name: "greet_slowly", Description: "Greets, eventually."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
			if t := mcptask.FromContext(ctx); t != nil {
				_ = t.SetStatusMessage(ctx, "thinking about "+in.Name)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Hello, " + in.Name + "!"}}}, nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Optional})

	ctx := context.Background()
	if err := ts.Start(ctx); err != nil { // recovers unfinished tasks, runs the engine
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
	call, err := c.CallTool(ctx, "greet_slowly", map[string]any{"name": "gopher"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("wire:", c.Wire(), "task:", call.Task != nil)
	res, err := c.Wait(ctx, call.Task.ID, &client.WaitOptions{Deadline: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// wire: 2026-07-28 task: true
	// Hello, gopher!
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))
