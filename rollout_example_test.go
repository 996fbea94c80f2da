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
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Gate a tool by an approval: the call is answered with a task that
// waits, and the work starts once an operator approves it.
func ExampleApproval() {
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

	mcptask.AddTool(ts, &mcp.Tool{Name: "deploy", Description: "Deploys to production."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deployed"}}}, nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Optional,
			Approval: &mcptask.Approval{Approvers: []string{"alice"}, Reason: "production", Expires: time.Hour}})

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

	call, err := c.CallTool(ctx, "deploy", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(call.Task.Status, strings.SplitN(call.Task.StatusMessage, ";", 2)[0])
	// An operator (the dashboard, mcptask approve, /admin/decide) approves.
	if _, err := ts.Decide(ctx, task.ID(call.Task.ID), true, "alice", "go ahead"); err != nil {
		log.Fatal(err)
	}
	res, err := c.Wait(ctx, call.Task.ID, &client.WaitOptions{Deadline: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// working waiting for approval by alice (production)
	// deployed
}
