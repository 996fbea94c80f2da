package mcptask_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkSpawn measures one step of a parent's work on SQLite (FULL):
// Spawn of a child whose tool answers at once, and Wait for its result,
// b.N steps in a row in one parent task; beside it, for scale, one
// top-level task of the same tool created and read to its end over
// loopback HTTP. A step costs the child's durable creation (its key
// looked up, the tree's counts read), its run and the parent's reads of
// it. Compare the variants of one run.
func BenchmarkSpawn(b *testing.B) {
	echo := func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		return text("ok"), nil, nil
	}
	steps := make(chan int, 1)
	done := make(chan error, 1)
	parent := func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		tk := mcptask.FromContext(ctx)
		n := <-steps
		for i := range n {
			c, err := tk.Spawn(ctx, "echo", nil, &mcptask.SpawnOptions{Step: fmt.Sprint("s", i)})
			if err != nil {
				done <- err
				return nil, nil, err
			}
			if _, err := c.Wait(ctx); err != nil {
				done <- err
				return nil, nil, err
			}
		}
		done <- nil
		return text("ok"), nil, nil
	}
	hs := servertest.Start(b, servertest.Options{
		HTTP:  &mcp.StreamableHTTPOptions{Stateless: true},
		Tasks: mcptask.Options{Limits: mcptask.Limits{MaxChildren: 1 << 30, MaxTreeTasks: 1 << 30}},
		Register: func(ts *mcptask.Server) (func(), error) {
			mcptask.AddTool(ts, &mcp.Tool{Name: "echo"}, echo, mcptask.ToolOptions{Support: mcptask.Optional})
			mcptask.AddTool(ts, &mcp.Tool{Name: "parent"}, parent, mcptask.ToolOptions{Support: mcptask.Required})
			return nil, nil
		},
	})
	c := &wiretest.Client{URL: hs.URL, Tasks: true, HTTP: &http.Client{Timeout: time.Minute}}
	b.Run("step", func(b *testing.B) {
		ctx := context.Background()
		if _, err := c.CallTool(ctx, "parent", nil); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		steps <- b.N
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	})
	b.Run("top-level-task", func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			h, err := c.CallTool(ctx, "echo", nil)
			if err != nil {
				b.Fatal(err)
			}
			if h.TaskID != "" {
				if _, err := c.WaitFor(ctx, h.TaskID, wiretest.Terminal); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
