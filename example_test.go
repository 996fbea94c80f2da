package mcptask_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/wiretest"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Turn an ordinary go-sdk tool into a task-capable one, serve it, and call it
// as a 2026-07-28 client that declares the tasks extension.
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
	ts, _ := mcptask.New(srv, eng, nil)

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

	if err := eng.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	defer eng.Shutdown(context.Background())
	hs := httptest.NewServer(ts.Handler(nil))
	defer hs.Close()

	c := &wiretest.Client{URL: hs.URL, Tasks: true}
	ctx := context.Background()
	handle, _ := c.CallTool(ctx, "greet_slowly", map[string]any{"name": "gopher"})
	fmt.Println("answer:", handle.ResultType)
	done, _ := c.WaitFor(ctx, handle.TaskID, wiretest.Terminal)
	var res mcp.CallToolResult
	_ = json.Unmarshal(done.Result, &res)
	fmt.Println(done.Status+":", res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// answer: task
	// completed: Hello, gopher!
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))
